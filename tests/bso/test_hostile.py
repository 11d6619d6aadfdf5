"""Hostile requests against a real `basht bso serve`: a missing or wrong token on every route that
needs one, bodies past the limit, malformed JSON, and job ids made to break SQL, paths, logs or
terminals. Each gets its 4xx, or (an id that is only odd) is an ordinary id, and no refused request
changes a row of any table."""

from __future__ import annotations

import base64
import json
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from basht.bso.config import ServerSettings
from basht.bso.server import create_app
from basht.bso.spec import JOB_ID_MAX_LENGTH
from tests.bso.support import Server, basht_env, job_body, result_body, start_server

pytestmark = pytest.mark.integration

TOKEN = "hostile-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_BODY = 4096

# How the routes are meant to be guarded, written down here rather than read from the server: a
# route the application gains later is checked as one that needs the token, unless listed.
OPEN = {("GET", "/health")}
READS = {
    ("GET", "/jobs"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
}
WRITES = {
    ("POST", "/jobs"),
    ("GET", "/jobs/batch_size"),
    ("POST", "/report"),
    ("PATCH", "/trials"),
    ("DELETE", "/jobs"),
}


def app_routes() -> set[tuple[str, str]]:
    """Every (method, path) the application serves (HEAD as GET), enumerated from FastAPI."""
    app = create_app(ServerSettings(db="sqlite:///never-opened.db", token=TOKEN))
    routes = set()
    for route in app.routes:
        methods = getattr(route, "methods", None)
        assert methods, f"{route!r}: a route kind this test does not know how to call"
        routes |= {("GET" if m == "HEAD" else m, route.path) for m in methods}  # type: ignore[attr-defined]
    return routes


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


BAD_CREDENTIALS = [
    None,
    "Bearer",
    "Bearer wrong",
    f"Bearer {TOKEN}x",
    f"Bearer {TOKEN[:-1]}",
    f"Bearer {TOKEN.upper()}",
    f"Bearer x{TOKEN}",
    f"Token {TOKEN}",
    TOKEN,
    basic("bso", "wrong"),
    basic(TOKEN, ""),  # the token as the user name is not the password
    "Basic !!not-base64!!",
    "Basic " + base64.b64encode(b"bso:\xff\xfe").decode(),  # not UTF-8
]


@dataclass
class Served:
    """A server with a token and a 4 KiB body limit, and its SQLite file."""

    server: Server
    db: Path

    def client(self, **kwargs: Any) -> httpx.Client:
        return self.server.client(**kwargs)

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, so that any change shows."""
        with closing(sqlite3.connect(self.db)) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return {
                t: sorted(conn.execute(f'SELECT * FROM "{t}"'), key=repr) for t in sorted(tables)
            }

    def raw(self, request: bytes) -> bytes:
        """Send bytes as they are; read until the server closes the connection."""
        host, port = self.server.url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(request)
            chunks = []
            try:
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            except ConnectionResetError:  # closed with our unread bytes: what came is the answer
                if not chunks:
                    raise
        return b"".join(chunks)


def _serve(tmp: Path, *args: str) -> Iterator[Served]:
    db = tmp / "bso.db"
    server = start_server(
        f"sqlite:///{db}",
        "--max-body-bytes",
        str(MAX_BODY),
        *args,
        log=tmp / "server.log",
        env=basht_env(BASHT_BSO_TOKEN=TOKEN),
    )
    try:
        yield Served(server, db)
    finally:
        server.stop()
    assert "Traceback" not in (tmp / "server.log").read_text()  # no request was a 500


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A token; reads open (the default)."""
    yield from _serve(tmp_path_factory.mktemp("guarded"))


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A token that guards the reads too."""
    yield from _serve(tmp_path_factory.mktemp("locked"), "--protect-reads")


@pytest.fixture
def http(guarded: Served) -> Iterator[httpx.Client]:
    with guarded.client(headers=AUTH) as client:
        yield client


def open_trial(http: httpx.Client, job_id: str) -> dict[str, Any]:
    """Register `job_id` if new and open a trial that has reported one epoch."""
    assert http.post("/jobs", json=job_body(job_id)).status_code in (200, 201)
    trial = http.get("/jobs/batch_size", params={"job_id": job_id}).json()
    response = http.post("/report", json=result_body(trial, metric=0.1, current_epoch=1))
    assert response.json()["stop_train"] is False
    return trial


# -- the token ------------------------------------------------------------------------------------


def test_the_routes_are_enumerated_from_the_application():
    routes = app_routes()
    assert routes >= OPEN | READS | WRITES


def test_every_route_but_health_and_the_reads_refuses_a_missing_or_wrong_token(guarded, http):
    report_me, end_me = open_trial(http, "tok-1"), open_trial(http, "tok-1")
    valid = {  # requests that would each change the database, given the token
        ("POST", "/jobs"): {"json": job_body("tok-2")},
        ("GET", "/jobs/batch_size"): {"params": {"job_id": "tok-1"}},
        ("POST", "/report"): {"json": result_body(report_me, metric=0.9, current_epoch=2)},
        ("PATCH", "/trials"): {"json": end_me},
        ("DELETE", "/jobs"): {"params": {"job_id": "tok-1"}},
    }
    before = guarded.dump()
    guarded_routes = app_routes() - OPEN - READS
    with guarded.client() as anonymous:
        for method, path in sorted(guarded_routes):
            for credentials in BAD_CREDENTIALS:
                headers = {} if credentials is None else {"Authorization": credentials}
                kwargs = valid.get((method, path), {})
                response = anonymous.request(method, path, headers=headers, **kwargs)
                assert response.status_code == 401, (method, path, credentials, response.text)
                assert "token" in response.json()["message"]
                assert "Bearer" in response.headers["www-authenticate"]
                assert guarded.dump() == before, (method, path, credentials)
        for method, path in sorted(OPEN | READS):
            response = anonymous.request(method, path, params={"job_id": "tok-1"})
            assert response.status_code == 200, (method, path, response.text)
    assert guarded.dump() == before
    # The same requests with the token are valid: each changes the database.
    for route in [
        ("POST", "/jobs"),
        ("GET", "/jobs/batch_size"),
        ("POST", "/report"),
        ("PATCH", "/trials"),
        ("DELETE", "/jobs"),
    ]:
        response = http.request(*route, **valid[route])
        assert 200 <= response.status_code < 300, (route, response.text)
        after = guarded.dump()
        assert after != before, route
        before = after
    http.delete("/jobs", params={"job_id": "tok-2"})


def test_protected_reads_refuse_every_route_but_health_without_the_token(locked):
    with locked.client(headers=AUTH) as http:
        open_trial(http, "locked-1")
    before = locked.dump()
    with locked.client() as anonymous:
        for method, path in sorted(app_routes() - OPEN):
            for credentials in BAD_CREDENTIALS[:4]:
                headers = {} if credentials is None else {"Authorization": credentials}
                params = {"job_id": "locked-1"}
                response = anonymous.request(method, path, headers=headers, params=params)
                assert response.status_code == 401, (method, path, credentials, response.text)
        assert anonymous.get("/health").json() == {"status": "ok"}
        assert anonymous.head("/docs").status_code == 401  # HEAD is a GET
        assert anonymous.get("/nowhere").status_code == 401  # nothing to learn about paths
    assert locked.dump() == before
    with locked.client(headers=AUTH) as http:
        assert http.get("/jobs", params={"job_id": "locked-1"}).json()["trials"]
        assert http.get("/jobs", params={"job_id": "locked-2"}).status_code == 404
        assert "/jobs/batch_size" in http.get("/openapi.json").json()["paths"]
        assert http.get("/nowhere").status_code == 404
    # A browser opening the docs asks once, then sends basic auth.
    browser = httpx.get(f"{locked.server.url}/docs", headers={"Authorization": basic("me", TOKEN)})
    assert browser.status_code == 200


# -- bodies ---------------------------------------------------------------------------------------

BODY_ROUTES = [("POST", "/jobs"), ("POST", "/report"), ("PATCH", "/trials")]


def padded(body: dict[str, Any], size: int) -> bytes:
    """`body` as JSON, padded with spaces to `size` bytes: still a valid body."""
    text = json.dumps(body).encode()
    assert len(text) <= size
    return text + b" " * (size - len(text))


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_body_past_the_limit_is_a_413_and_changes_nothing(guarded, http, method, path):
    trial = open_trial(http, "big-1")
    body = {
        "/jobs": job_body("big-2"),
        "/report": result_body(trial, metric=0.9),
        "/trials": trial,
    }[path]
    before = guarded.dump()
    refused = http.request(method, path, content=padded(body, MAX_BODY + 1))
    assert refused.status_code == 413, refused.text
    assert "--max-body-bytes" in refused.json()["message"]
    assert refused.headers["connection"] == "close"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield padded(body, MAX_BODY)
        yield b" "

    assert http.request(method, path, content=chunks()).status_code == 413
    huge = guarded.raw(
        f"{method} {path} HTTP/1.1\r\nHost: bso\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {10 * 2**30}\r\n\r\n{{".encode()
    )
    assert huge.startswith(b"HTTP/1.1 413 "), huge[:200]  # at once, without the 10 GiB
    # Without the token, the token is what is refused: before any of the body is read.
    anonymous = guarded.raw(
        f"{method} {path} HTTP/1.1\r\nHost: bso\r\nConnection: close\r\n"
        f"Content-Length: {10 * 2**30}\r\n\r\n{{".encode()
    )
    assert anonymous.startswith(b"HTTP/1.1 401 "), anonymous[:200]
    assert guarded.dump() == before
    # A body of exactly the limit is taken.
    accepted = http.request(method, path, content=padded(body, MAX_BODY))
    assert 200 <= accepted.status_code < 300, accepted.text


MALFORMED = [
    b"",
    b"{",
    b"not json",
    b"null",
    b"[]",
    b'"job"',
    b"{}",
    b'{"job_id": }',
    b"\xff\xfe{\x00}",
    b'{"job_id": "x"}' * 50,
    b"[" * 2000 + b"]" * 2000,  # deeper than the JSON parser recurses
    b'{"batch_size": 1e999, "trial_number": NaN, "job_id": Infinity}',
]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_malformed_json_is_a_400_or_422_and_changes_nothing(guarded, http, method, path):
    before = guarded.dump()
    for content in MALFORMED:
        for content_type in (None, "application/json", "text/plain"):
            headers = {} if content_type is None else {"Content-Type": content_type}
            response = http.request(method, path, content=content, headers=headers)
            assert response.status_code in (400, 422), (content[:40], response.text)
            assert guarded.dump() == before, content[:40]
    assert http.get("/health").status_code == 200


HYPOTHESIS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HYPOTHESIS
@given(content=st.binary(max_size=300), route=st.sampled_from(BODY_ROUTES))
def test_any_bytes_as_a_body_are_refused_with_a_4xx(guarded, http, content, route):
    before = guarded.dump()
    response = http.request(*route, content=content)
    assert response.status_code in (400, 422), (content, response.text)
    assert guarded.dump() == before


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)


@HYPOTHESIS
@given(field=st.sampled_from(sorted(job_body("x"))), value=json_values)
def test_a_spec_with_any_value_in_one_field_is_taken_whole_or_refused_whole(
    guarded, http, field, value
):
    """Either a 422 that changes nothing, or a job that is registered as sent and deleted."""
    body = job_body("mut-1", **{field: value})
    before = guarded.dump()
    response = http.post("/jobs", content=json.dumps(body, allow_nan=True))
    if response.status_code in (400, 422):  # 400: JSON Python cannot read (a 5,000-digit number)
        assert guarded.dump() == before
        return
    assert response.status_code == 201, response.text
    registered = response.json()["job_id"]  # a null job_id: the server names the job
    assert http.delete("/jobs", params={"job_id": registered}).status_code == 200
    assert guarded.dump() == before


# -- job ids --------------------------------------------------------------------------------------

ORDINARY_IDS = [
    "'; DROP TABLE bso_jobs;--",
    "x' OR '1'='1",
    'x"; DELETE FROM bso_trials; --',
    "../../etc/passwd",
    "..\\..\\windows\\system32",
    "%2e%2e%2f%2e%2e%2f",
    "%00",
    "a/b?c=d&e#f",
    "<script>alert(1)</script>",
    "{{7*7}} ${jndi:ldap://x}",
    "é-e\u0301-日本語-🙂",  # composed and decomposed é are two ids: compared exactly
    "\u202eevil-rtl",
    "zero\u200bwidth\ufeff",
    " spaced out ",
    "\\",
    "x" * JOB_ID_MAX_LENGTH,
]


def lifecycle(http: httpx.Client, job_id: str) -> None:
    """Register, read, train, end and delete `job_id`; it must come back exactly as sent."""
    registered = http.post("/jobs", json=job_body(job_id, job_id_prefix=job_id[:1]))
    assert registered.status_code == 201, registered.text
    assert registered.json()["job_id"] == job_id
    trial = http.get("/jobs/batch_size", params={"job_id": job_id}).json()
    assert trial["job_id"] == job_id and trial["trial_number"] == 1
    answer = http.post("/report", json=result_body(trial, metric=0.9))
    assert answer.status_code == 200 and answer.json()["converged"] is True
    assert http.patch("/trials", json=trial).status_code == 200
    state = http.get("/jobs", params={"job_id": job_id}).json()
    assert state["job"]["job_id"] == job_id and len(state["trials"]) == 1
    assert http.delete("/jobs", params={"job_id": job_id}).status_code == 200
    assert http.get("/jobs", params={"job_id": job_id}).status_code == 404


@pytest.mark.parametrize("job_id", ORDINARY_IDS)
def test_ids_made_to_break_sql_or_paths_are_ordinary_ids(guarded, http, job_id):
    before = guarded.dump()
    lifecycle(http, job_id)
    assert guarded.dump() == before  # every table still there, every other row untouched


REFUSED_IDS = [
    "nul\x00byte",
    "line\nbreak",
    "carriage\rreturn",
    "esc\x1b[2J",
    "tab\there",
    "del\x7f",
    "nel\x85",
    "line\u2028separator",
    "",
    "x" * (JOB_ID_MAX_LENGTH + 1),
]


def every_route(http: httpx.Client, job_id: str) -> list[httpx.Response]:
    """`job_id` on every route that takes one, in a body (as JSON escapes) or a query."""
    trial = {"job_id": job_id, "batch_size": 1024, "trial_number": 1}
    spec = job_body(job_id, job_id_prefix="")
    return [
        http.post("/jobs", content=json.dumps(spec)),
        http.get("/jobs/batch_size", params={"job_id": job_id}),
        http.post("/report", content=json.dumps(result_body(trial))),
        http.patch("/trials", content=json.dumps(trial)),
        http.get("/jobs", params={"job_id": job_id}),
        http.delete("/jobs", params={"job_id": job_id}),
    ]


@pytest.mark.parametrize("job_id", REFUSED_IDS, ids=lambda i: repr(i[:20]))
def test_ids_with_control_characters_or_too_long_are_422s_everywhere(guarded, http, job_id):
    before = guarded.dump()
    for response in every_route(http, job_id):
        assert response.status_code == 422, (response.request.method, response.text[:300])
        loc = response.json()["detail"][0]["loc"]
        assert loc[-1] == "job_id", loc
    assert guarded.dump() == before


def acceptable(job_id: str) -> bool:
    """The rule the server keeps for ids, written out: free text of 1 to 400 characters without
    NUL, control characters, line or paragraph separators, or lone surrogates."""
    import unicodedata

    return 1 <= len(job_id) <= JOB_ID_MAX_LENGTH and not any(
        unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs") for c in job_id
    )


@HYPOTHESIS
@given(
    job_id=st.text(min_size=1, max_size=420)
    | st.text(st.characters(blacklist_categories=()), max_size=8)  # surrogates too
)
def test_any_id_is_an_ordinary_id_or_a_422_that_changes_nothing(guarded, http, job_id):
    before = guarded.dump()
    if acceptable(job_id):
        lifecycle(http, job_id)
    else:
        spec = job_body(job_id, job_id_prefix="")
        response = http.post("/jobs", content=json.dumps(spec))  # surrogates as \u escapes
        assert response.status_code == 422, response.text[:300]
    assert guarded.dump() == before


def test_an_id_longer_than_any_column_is_refused_before_the_database(guarded, http):
    before = guarded.dump()
    job_id = "x" * 60_000
    for path in ("/jobs/batch_size", "/jobs"):
        assert http.get(path, params={"job_id": job_id}).status_code == 422
    assert http.delete("/jobs", params={"job_id": job_id}).status_code == 422
    spec = job_body(job_id, job_id_prefix="x")
    assert http.post("/jobs", json=spec).status_code == 413  # past the body limit first
    assert guarded.dump() == before


def test_a_path_made_to_climb_out_is_an_unknown_route(guarded):
    answer = guarded.raw(
        f"GET /../../etc/passwd HTTP/1.1\r\nHost: bso\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:200]
    assert b"root:" not in answer
    escaped = guarded.raw(
        f"GET /jobs?job_id=%2e%2e%2f%2e%2e%2fetc%2fpasswd HTTP/1.1\r\nHost: bso\r\n"
        f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n".encode()
    )
    assert escaped.startswith(b"HTTP/1.1 404 ") and b"Unknown job(../../etc/passwd)" in escaped
