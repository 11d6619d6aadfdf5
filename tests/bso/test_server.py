"""The HTTP protocol against a real `basht bso serve` (uvicorn subprocess, SQLite): every route,
status code and error body a Zeus client can meet, and the fixes over Zeus."""

from __future__ import annotations

import json

import httpx

from tests.bso.support import job_body, result_body


def post_raw(http: httpx.Client, path: str, body: dict) -> httpx.Response:
    """POST the way Zeus's client does: JSON bytes, no Content-Type header."""
    request = http.build_request("POST", path, content=json.dumps(body))
    request.headers.pop("content-type", None)
    return http.send(request)


def register(http: httpx.Client, job_id: str, **changes) -> dict:
    response = http.post("/jobs", json=job_body(job_id, **changes))
    assert response.status_code in (200, 201), response.text
    return response.json()


def next_trial(http: httpx.Client, job_id: str) -> dict:
    response = http.get("/jobs/batch_size", params={"job_id": job_id})
    assert response.status_code == 200, response.text
    return response.json()


def finish(
    http: httpx.Client, trial: dict, converged: bool = True, cost_scale: float = 1.0
) -> dict:
    body = result_body(
        trial,
        metric=0.9 if converged else 0.1,
        current_epoch=100,
        time=10 * cost_scale,
        energy=100 * cost_scale,
    )
    response = http.post("/report", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def state(http: httpx.Client, job_id: str) -> dict:
    response = http.get("/jobs", params={"job_id": job_id})
    assert response.status_code == 200, response.text
    return response.json()


# -- POST /jobs -------------------------------------------------------------------------------


def test_registering_creates_then_confirms_then_refuses_a_changed_spec(http):
    body = job_body("reg-1")
    created = http.post("/jobs", json=body)
    assert created.status_code == 201
    assert created.json() == {**body, "batch_sizes": sorted(body["batch_sizes"])}
    assert list(created.json())[:4] == ["max_power", "number_of_gpus", "gpu_model", "job_id"]
    assert http.post("/jobs", json=body).status_code == 200
    shuffled = {**body, "batch_sizes": list(reversed(body["batch_sizes"]))}
    assert http.post("/jobs", json=shuffled).status_code == 200
    changed = http.post("/jobs", json={**body, "max_power": 2500.0})
    assert changed.status_code == 409
    assert changed.json() == {
        "message": "JobSpec doesn't match with existing jobSpec. Use a new job_id for "
        "different configuration"
    }


def test_without_a_job_id_every_registration_is_a_new_job(http):
    first = http.post("/jobs", json=job_body(None, job_id_prefix="anon"))
    second = http.post("/jobs", json=job_body(None, job_id_prefix="anon"))
    assert first.status_code == second.status_code == 201
    ids = {first.json()["job_id"], second.json()["job_id"]}
    assert len(ids) == 2 and all(i.startswith("anon-") and len(i) == len("anon-") + 8 for i in ids)


def test_bodies_without_content_type_and_with_unknown_fields_are_accepted(http):
    response = post_raw(http, "/jobs", {**job_body("raw-1"), "seed": 1, "whatever": [1]})
    assert response.status_code == 201
    trial = next_trial(http, "raw-1")
    report = post_raw(http, "/report", {**result_body(trial, metric=0.9), "error": False})
    assert report.status_code == 200 and report.json()["converged"] is True
    request = http.build_request("PATCH", "/trials", content=json.dumps(trial))
    request.headers.pop("content-type", None)
    assert http.send(request).status_code == 200


def test_invalid_specs_get_fastapi_style_422(http):
    wrong_prefix = http.post("/jobs", json=job_body("bad-1", job_id_prefix="good"))
    assert wrong_prefix.status_code == 422
    detail = wrong_prefix.json()["detail"]
    assert detail[0]["loc"][0] == "body" and "does not start with prefix" in detail[0]["msg"]
    missing_default = http.post("/jobs", json=job_body("bad-2", default_batch_size=3))
    assert missing_default.status_code == 422
    no_prefix = {k: v for k, v in job_body("bad-3").items() if k != "job_id_prefix"}
    response = http.post("/jobs", json=no_prefix)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "job_id_prefix"]
    assert http.post("/jobs", content=b"{not json").status_code == 422


HUGE = 99999999999999999999  # past int64: no database can store it


def send_json_text(http: httpx.Client, method: str, path: str, text: str) -> httpx.Response:
    """Send `text` as the JSON body verbatim: NaN, Infinity and 1e400 are not valid JSON, but
    Python's parser (and so the server's) reads them as floats."""
    return http.request(method, path, content=text, headers={"content-type": "application/json"})


def assert_422_on(response: httpx.Response, loc: list, fragment: str) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == loc and fragment in detail[0]["msg"], detail


def test_non_finite_floats_are_422s_that_name_the_field(http):
    # FastAPI's own 422 handler answered these with a 500 ("Out of range float values are not
    # JSON compliant") because it echoed the NaN back; now the input comes back as a string.
    for field, token, shown in [
        ("eta_knob", "NaN", "nan"),
        ("beta_knob", "Infinity", "inf"),
        ("target_metric", "NaN", "nan"),
        ("mab_prior_mean", "-Infinity", "-inf"),
        ("mab_prior_precision", "NaN", "nan"),
        ("max_power", "1e400", "inf"),
    ]:
        text = json.dumps(job_body("nan-1", **{field: "@"})).replace('"@"', token)
        for response in (
            send_json_text(http, "POST", "/jobs", text),
            post_raw(http, "/jobs", json.loads(text)),  # Zeus's way: no Content-Type
        ):
            assert_422_on(response, ["body", field], "finite number")
            assert response.json()["detail"][0]["input"] == shown
    assert http.get("/jobs", params={"job_id": "nan-1"}).status_code == 404  # nothing stored
    register(http, "nan-2")
    trial = next_trial(http, "nan-2")
    for field, token in [("time", "Infinity"), ("energy", "NaN"), ("time", "1e999")]:
        text = json.dumps(result_body(trial, **{field: "@"})).replace('"@"', token)
        assert_422_on(send_json_text(http, "POST", "/report", text), ["body", field], "finite")
    assert finish(http, trial)["converged"] is True  # the trial is still usable


def test_integers_past_int64_are_422s_not_database_errors(http):
    for field in ("max_epochs", "num_pruning_rounds", "mab_num_explorations", "window_size"):
        response = http.post("/jobs", json=job_body("big-1", **{field: HUGE}))
        assert_422_on(response, ["body", field], "less than or equal to 2147483647")
    too_big = http.post("/jobs", json=job_body("big-1", batch_sizes=[64, 1024, 2**31]))
    assert_422_on(too_big, ["body", "batch_sizes", 2], "less than or equal to")
    assert http.get("/jobs", params={"job_id": "big-1"}).status_code == 404
    register(http, "big-2")
    trial = next_trial(http, "big-2")
    for field in ("trial_number", "current_epoch"):
        response = http.post("/report", json=result_body(trial, **{field: HUGE}))
        assert_422_on(response, ["body", field], "less than or equal to")
    assert_422_on(
        http.patch("/trials", json={**trial, "trial_number": HUGE}),
        ["body", "trial_number"],
        "less than or equal to",
    )
    # One connection throughout: no 500 closed it under the next request.
    assert http.patch("/trials", json=trial).status_code == 200


def test_text_no_database_can_store_is_a_422_that_echoes_it(http):
    """A lone surrogate (a JSON \\ud800 escape) is not UTF-8: the database driver failed on it
    with a 500, and so did the 422 that echoed it back."""
    body = json.dumps(job_body("sur-1")).replace("sur-1", "sur-\\ud800")
    assert_422_on(send_json_text(http, "POST", "/jobs", body), ["body", "job_id"], "unicode")
    wrong_type = send_json_text(http, "POST", "/jobs", '{"batch_sizes": "\\ud800"}')
    assert wrong_type.status_code == 422
    shown = {tuple(d["loc"]): d.get("input") for d in wrong_type.json()["detail"]}
    assert shown[("body", "batch_sizes")] == "\\ud800"
    nul = http.post("/jobs", json=job_body("sur-2", gpu_model="A\x00100"))
    assert_422_on(nul, ["body", "gpu_model"], "NUL")
    register(http, "sur-3")
    trial = next_trial(http, "sur-3")
    body = json.dumps(result_body(trial)).replace("sur-3", "sur-\\udfff")
    assert_422_on(send_json_text(http, "POST", "/report", body), ["body", "job_id"], "unicode")
    body = json.dumps(trial).replace("sur-3", "\\ud800")
    assert_422_on(send_json_text(http, "PATCH", "/trials", body), ["body", "job_id"], "unicode")
    response = http.get("/jobs/batch_size", params={"job_id": "sur\x003"})
    assert_422_on(response, ["query", "job_id"], "NUL")
    assert http.get("/jobs", params={"job_id": "sur-1"}).status_code == 404
    assert finish(http, trial)["converged"] is True  # one connection throughout: no 500


def test_nonsense_window_epochs_and_costs_are_422s(http):
    assert_422_on(
        http.post("/jobs", json=job_body("bad-4", window_size=-5)),
        ["body", "window_size"],
        "greater than or equal to 0",
    )
    register(http, "bad-5", window_size=0)  # 0: no window, as in Zeus
    trial = next_trial(http, "bad-5")
    for epoch in (0, -3):
        response = http.post("/report", json=result_body(trial, current_epoch=epoch))
        assert_422_on(response, ["body", "current_epoch"], "greater than 0")
    for values in ({"time": -1.0}, {"energy": -1.0}):
        response = http.post("/report", json=result_body(trial, **values))
        assert_422_on(response, ["body", *values], "greater than or equal to 0")
    for values in ({"time": 1e308}, {"energy": 1e308}):  # finite, but the cost overflows
        response = http.post("/report", json=result_body(trial, **values))
        assert_422_on(response, ["body"], "above the 1e+100 this server accepts")
    assert finish(http, trial)["converged"] is True
    assert state(http, "bad-5")["min_cost"] == 0.5 * 100 + 0.5 * 3000 * 10


# -- GET /jobs/batch_size, POST /report, PATCH /trials -----------------------------------------


def test_unknown_jobs_and_trials_get_zeus_errors(http):
    unknown = http.get("/jobs/batch_size", params={"job_id": "nope-1"})
    assert unknown.status_code == 400
    assert unknown.json() == {"message": "Unknown job(nope-1). Please register the job first"}
    trial = {"job_id": "nope-1", "batch_size": 32, "trial_number": 1}
    assert http.post("/report", json=result_body(trial)).status_code == 400
    register(http, "unk-1")
    ghost = {"job_id": "unk-1", "batch_size": 32, "trial_number": 99}
    response = http.post("/report", json=result_body(ghost))
    assert response.status_code == 400 and response.json()["message"].startswith("Unknown trial")
    patched = http.patch("/trials", json=ghost)
    assert patched.status_code == 404
    assert patched.json()["message"].startswith("Could not find the trial")
    assert http.get("/jobs/batch_size").status_code == 422  # job_id is required


def test_a_trial_trains_until_the_target_then_the_result_is_kept(http):
    register(http, "run-1")
    trial = next_trial(http, "run-1")
    assert trial == {"job_id": "run-1", "batch_size": 1024, "trial_number": 1}
    keep = http.post("/report", json=result_body(trial, metric=0.3, current_epoch=1)).json()
    assert keep == {
        "stop_train": False,
        "converged": False,
        "message": "Stop condition not met, keep training",
    }
    done = http.post("/report", json=result_body(trial, metric=0.7, current_epoch=2)).json()
    assert done == {"stop_train": True, "converged": True, "message": "Train succeeded"}
    again = http.post("/report", json=result_body(trial, metric=0.1, current_epoch=3)).json()
    assert again == {
        "stop_train": True,
        "converged": True,
        "message": "Result for this trial(1) is already reported.",
    }
    assert http.patch("/trials", json=trial).json() is None  # the atexit PATCH changes nothing
    assert state(http, "run-1")["trials"][0]["status"] == "Succeeded"


def test_out_of_epochs_and_over_budget_runs_fail(http):
    register(http, "fail-1", max_epochs=3)
    first = next_trial(http, "fail-1")
    out = http.post("/report", json=result_body(first, metric=0.1, current_epoch=3)).json()
    assert out == {
        "stop_train": True,
        "converged": False,
        "message": "Train failed to converge within max_epoch(3)",
    }
    # A failed run sets no minimum cost (Zeus's server takes it): it never reached the target.
    assert state(http, "fail-1")["min_cost"] is None
    assert finish(http, next_trial(http, "fail-1"))["converged"] is True  # 2048
    # The minimum is the recurrence's: the converged run and the failed one before it.
    assert state(http, "fail-1")["min_cost"] == 2 * (0.5 * 100 + 0.5 * 3000 * 10)
    third = next_trial(http, "fail-1")  # twice the minimum (60,200) stops it
    over = http.post("/report", json=result_body(third, metric=0.1, time=45.0, energy=450.0))
    assert over.json()["stop_train"] is True and over.json()["converged"] is False
    assert "exceeded the cost upper bound" in over.json()["message"]


def test_a_trial_ended_without_a_result_is_failed_and_cannot_report(http):
    register(http, "crash-1")
    trial = next_trial(http, "crash-1")
    assert http.patch("/trials", json=trial).status_code == 200
    assert state(http, "crash-1")["trials"][0]["status"] == "Failed"
    late = http.post("/report", json=result_body(trial))
    assert late.status_code == 400
    assert late.json() == {"message": "Trial(1) is already reported but converged is not set."}
    # A crashed probe taught nothing: the same batch size is probed again.
    assert next_trial(http, "crash-1")["batch_size"] == 1024


def test_requests_during_a_running_probe_get_the_cheapest_known_size(http):
    register(http, "conc-1")
    probe = next_trial(http, "conc-1")
    concurrent = next_trial(http, "conc-1")
    assert concurrent == {"job_id": "conc-1", "batch_size": 1024, "trial_number": 2}
    assert [t["type"] for t in state(http, "conc-1")["trials"]] == ["Exploration", "Concurrent"]
    finish(http, probe)
    assert next_trial(http, "conc-1")["batch_size"] == 512  # the probe moved on downwards


# -- the whole path to the bandit, and the fixes over Zeus --------------------------------------


def test_pruning_then_bandit_over_the_survivors(http):
    """Zeus's test_explorer, with the arms read from GET /jobs instead of server logs."""
    register(http, "mab-1", batch_sizes=[32, 64, 256, 512, 1024, 2048, 4096], beta_knob=None)
    fails = {64, 4096}
    seen = []
    for _ in range(40):
        trial = next_trial(http, "mab-1")
        seen.append(trial["batch_size"])
        finish(
            http,
            trial,
            converged=trial["batch_size"] not in fails,
            cost_scale=trial["batch_size"] / 1024,
        )
        if state(http, "mab-1")["stage"] == "MAB" and len(seen) > 12:
            break
    s = state(http, "mab-1")
    assert seen[:5] == [1024, 512, 256, 64, 2048]  # round one: down to 64 (fails), up to 2048
    assert [a["batch_size"] for a in s["arms"]] == [256, 512, 1024, 2048]
    assert s["stage"] == "MAB"
    mab_sizes = {t["batch_size"] for t in s["trials"] if t["type"] == "MAB"}
    assert mab_sizes <= {256, 512, 1024, 2048}


def test_zero_pruning_rounds_goes_straight_to_the_bandit(http):
    """Zeus answers 500 {"message": "32"} here (a KeyError)."""
    register(http, "zero-1", num_pruning_rounds=0, batch_sizes=[32, 64, 128], default_batch_size=64)
    first = next_trial(http, "zero-1")
    s = state(http, "zero-1")
    assert s["stage"] == "MAB" and [a["batch_size"] for a in s["arms"]] == [32, 64, 128]
    assert first["batch_size"] in (32, 64, 128)
    tried = set()
    for trial in [first] + [next_trial(http, "zero-1") for _ in range(5)]:
        tried.add(trial["batch_size"])
        finish(http, trial)
    assert tried == {32, 64, 128}  # every cold arm is explored


def test_a_job_where_every_size_fails_keeps_answering(http):
    """Zeus answers 500 "No converged batch sizes..." for ever after."""
    register(http, "doomed-1", batch_sizes=[32, 64, 128], default_batch_size=64, beta_knob=None)
    for _ in range(8):
        trial = next_trial(http, "doomed-1")
        finish(http, trial, converged=False)
    s = state(http, "doomed-1")
    assert s["stage"] == "MAB" and "first pruning round" in s["pruning_note"]
    assert [a["batch_size"] for a in s["arms"]] == [32, 64, 128]


def test_a_concurrent_trial_finishing_after_the_switch_is_learned(http):
    """Zeus answers 400 "Cannot update an arm since this trial is not issued from MAB stage."."""
    register(http, "late-1", batch_sizes=[32, 64], default_batch_size=64, num_pruning_rounds=1)
    probe = next_trial(http, "late-1")
    concurrent = next_trial(http, "late-1")
    finish(http, probe)
    finish(http, next_trial(http, "late-1"))  # probes 32; pruning is over after this
    mab = next_trial(http, "late-1")
    assert state(http, "late-1")["stage"] == "MAB"
    late = http.post("/report", json=result_body(concurrent, metric=0.9, time=7.0, energy=70.0))
    assert late.status_code == 200 and late.json()["converged"] is True
    arms = {a["batch_size"]: a for a in state(http, "late-1")["arms"]}
    assert arms[64]["num_observations"] == 2  # the probe and the late concurrent result
    finish(http, mab)


def test_seeded_jobs_with_the_same_history_choose_the_same_sizes(http):
    sequences = []
    for job_id in ("seed-a", "seed-b"):
        register(
            http,
            job_id,
            mab_seed=99,
            num_pruning_rounds=1,
            batch_sizes=[32, 64, 128],
            default_batch_size=64,
        )
        chosen = []
        for i in range(12):
            trial = next_trial(http, job_id)
            chosen.append(trial["batch_size"])
            finish(http, trial, cost_scale=1 + (trial["batch_size"] % 7) / 10 + i / 100)
        sequences.append(chosen)
    assert sequences[0] == sequences[1]


# -- DELETE /jobs, GET /jobs, docs ------------------------------------------------------------


def test_deleting_a_job_twice(http):
    register(http, "del-1")
    next_trial(http, "del-1")
    first = http.delete("/jobs", params={"job_id": "del-1"})
    assert first.status_code == 200 and first.json() is None
    second = http.delete("/jobs", params={"job_id": "del-1"})
    assert second.status_code == 404 and second.json() == {"message": "No job was deleted."}
    assert http.get("/jobs", params={"job_id": "del-1"}).status_code == 404
    assert register(http, "del-1")["job_id"] == "del-1"  # the id is free again


def test_openapi_docs_are_served(http):
    assert http.get("/docs").status_code == 200
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/jobs", "/jobs/batch_size", "/report", "/trials"} <= set(paths)
    assert {"post", "delete", "get"} <= set(paths["/jobs"])


def test_an_unexpected_error_is_a_500_that_closes_the_connection(tmp_path):
    """Starlette re-raises after the 500 and uvicorn then closes the connection; the answer says
    so, or a client would send its next request on the dying connection (connection reset)."""
    import asyncio

    from basht.bso.config import ServerSettings
    from basht.bso.server import create_app

    app = create_app(ServerSettings(db=f"sqlite:///{tmp_path / 'x.db'}"))

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://bso.test") as c:
            return await c.get("/boom")

    response = asyncio.run(get())
    assert response.status_code == 500 and response.json() == {"message": "boom"}
    assert response.headers["connection"] == "close"


def test_validation_errors_render_any_input():
    from basht.bso.server import _validation_detail

    errors = [
        {"type": "finite_number", "loc": ("body", "x"), "msg": "m", "input": float("nan")},
        {"type": "t", "loc": ("body", "y"), "msg": "m", "input": {"a": [float("-inf"), 1.5]}},
    ]
    detail = _validation_detail(errors)
    assert [d["input"] for d in detail] == ["nan", {"a": ["-inf", 1.5]}]
    json.dumps(detail, allow_nan=False)
