"""With a token, every route that changes state needs it; Zeus's client sends it as basic auth."""

from __future__ import annotations

import json

import httpx

from tests.bso.support import basht_env, job_body, result_body

TOKEN = "s3cret-token"


def test_write_routes_need_the_token_read_routes_do_not(serve):
    server = serve(env=basht_env(BASHT_BSO_TOKEN=TOKEN))
    with server.client() as anonymous:
        body = job_body("tok-1")
        refused = anonymous.post("/jobs", json=body)
        assert refused.status_code == 401 and "token" in refused.json()["message"]
        assert anonymous.get("/jobs/batch_size", params={"job_id": "tok-1"}).status_code == 401
        wrong = anonymous.post("/jobs", json=body, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert anonymous.get("/health").status_code == 200
        assert anonymous.get("/docs").status_code == 200

    with server.client(headers={"Authorization": f"Bearer {TOKEN}"}) as bearer:
        assert bearer.post("/jobs", json=body).status_code == 201
        trial = bearer.get("/jobs/batch_size", params={"job_id": "tok-1"}).json()
        assert bearer.post("/report", json=result_body(trial, metric=0.9)).status_code == 200

    with server.client() as anonymous:
        assert anonymous.post("/report", json=result_body(trial)).status_code == 401
        assert anonymous.patch("/trials", json=trial).status_code == 401
        assert anonymous.delete("/jobs", params={"job_id": "tok-1"}).status_code == 401
        assert anonymous.get("/jobs", params={"job_id": "tok-1"}).status_code == 200

    # What Zeus's client does with server_url = "http://bso:TOKEN@host:port": httpx basic auth.
    userinfo_url = server.url.replace("http://", f"http://bso:{TOKEN}@")
    assert httpx.patch(userinfo_url + "/trials", content=json.dumps(trial)).status_code == 200
    assert httpx.delete(userinfo_url + "/jobs", params={"job_id": "tok-1"}).status_code == 200


def test_the_token_can_be_given_on_the_command_line(serve):
    server = serve("--token", TOKEN)
    with server.client() as c:
        assert c.post("/jobs", json=job_body("tok-2")).status_code == 401
        ok = c.post("/jobs", json=job_body("tok-2"), headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 201
