"""The BSO HTTP server: Zeus's routes, status codes and error bodies, over `BSOService`.

A stock Zeus `BatchSizeOptimizer` client works against it unchanged. Our additions: `GET /jobs`
(a job's state, for people and tests), `GET /health`, an optional bearer token, and a limit on
request bodies (413 past it). Because the Zeus client cannot send headers, the token is also
accepted as the password of HTTP basic auth, which httpx sends for a URL like
http://bso:TOKEN@host:8000.

With a token, every request needs it except `GET /health` and the read routes (`GET /jobs` and the
API docs), and those too with `protect_reads`. The rule is checked before routing, by method and
path, and a route is a read only if it is named so here: a route added later needs the token
unless it is added to the reads on purpose.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator
from starlette.datastructures import Headers

from basht.bso.config import ServerSettings
from basht.bso.db.engine import open_engine, redact
from basht.bso.service import BSOService, ServiceError, Unprocessable
from basht.bso.spec import (
    DELETE_JOB_URL,
    GET_NEXT_BATCH_SIZE_URL,
    JOB_ID_MAX_LENGTH,
    POWER_PROFILE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    Assignment,
    JobSpecFromClient,
    PowerLimitChoice,
    PowerProfile,
    ReportResponse,
    TrainingResult,
    TrialId,
    plain,
    storable,
)

log = logging.getLogger(__name__)

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


class JsonWithoutContentType:
    """Treat a request body sent without a Content-Type header as JSON.

    Zeus's client posts `content=model.json()` through httpx, which sends no Content-Type; newer
    FastAPI versions refuse to parse such bodies as JSON.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            headers = scope["headers"]
            if not any(name == b"content-type" for name, _ in headers):
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


async def _answer(
    send: Any, status_code: int, message: str, headers: dict[str, str] | None = None
) -> None:
    """Answer {"message": ...} from a middleware, before the application sees the request."""
    body = json.dumps({"message": message}).encode()
    fields = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        **(headers or {}),
    }
    await send(
        {
            "type": "http.response.start",
            "status": status_code,
            "headers": [(k.encode(), v.encode()) for k, v in fields.items()],
        }
    )
    await send({"type": "http.response.body", "body": body})


class TokenGate:
    """Answer 401 to a request without the server's token, unless its route is open to all.

    `open_routes` and `read_routes` are (method, path) pairs; reads pass without the token unless
    `protect_reads`. Everything else, unknown paths included, needs the token, so a new route is
    guarded from its first line. HEAD counts as GET.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        open_routes: frozenset[tuple[str, str]],
        read_routes: frozenset[tuple[str, str]],
        protect_reads: bool,
    ) -> None:
        self.app = app
        self.token = None if token is None else token.encode()
        self.free = open_routes if protect_reads else open_routes | read_routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.token is not None:
            method = "GET" if scope["method"] == "HEAD" else scope["method"]
            if (method, scope["path"]) not in self.free:
                given = _token_of(Headers(scope=scope))
                if given is None or not secrets.compare_digest(given.encode(), self.token):
                    await _answer(
                        send,
                        status.HTTP_401_UNAUTHORIZED,
                        "this server needs a token: Authorization: Bearer TOKEN",
                        {"www-authenticate": 'Bearer, Basic realm="basht-bso"'},
                    )
                    return
        await self.app(scope, receive, send)


class BodyLimit:
    """Answer 413 to a request whose body is larger than `max_bytes`, reading no more of it than
    that: at once when its Content-Length says so, else (a chunked body) as soon as the bytes
    read pass the limit. A body within the limit is read here and handed on whole."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        handed = False

        async def replay() -> dict[str, Any]:
            nonlocal handed
            if handed:
                return await receive()  # after the body: a disconnect, when it comes
            handed = True
            return whole

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        # The rest of the body is never read, so the connection cannot carry another request.
        await _answer(
            send,
            413,  # Content Too Large (its Starlette name changed across versions)
            f"request body too large: this server takes at most {self.max_bytes} bytes "
            "(basht bso serve --max-body-bytes)",
            {"connection": "close"},
        )


def _service(request: Request) -> BSOService:
    return request.app.state.service


Svc = Annotated[BSOService, Depends(_service)]
# A job id in a query string is checked like one in a body: PostgreSQL fails on a NUL in it.
JobId = Annotated[
    str,
    Query(min_length=1, max_length=JOB_ID_MAX_LENGTH),
    AfterValidator(storable),
    AfterValidator(plain),
]
OPEN_ROUTES = frozenset({("GET", "/health")})
"""Routes that answer without the token, always: a liveness probe tells nothing about jobs."""


def _token_of(headers: Headers) -> str | None:
    header = headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


def _json_safe(value: Any) -> Any:
    """`value` (already JSON-like) with every non-finite float as a string ("nan", "inf",
    "-inf"), which JSON cannot carry as numbers, and lone surrogates escaped (not UTF-8)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):  # a lone surrogate from a JSON \u escape cannot be UTF-8
        return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _validation_detail(errors: Any) -> list[Any]:
    """FastAPI's 422 detail, rendered so that no input can break it: a NaN or 1e400 in the body
    comes back as the string "nan" or "inf" (FastAPI's own handler fails on it with a 500)."""
    try:
        return _json_safe(jsonable_encoder(errors))
    except Exception:  # an input jsonable_encoder cannot take: leave the inputs out
        return [
            {
                "type": str(e.get("type")),
                "loc": [str(x) for x in e.get("loc", ())],
                "msg": str(e.get("msg")),
            }
            for e in errors
        ]


def create_app(settings: ServerSettings) -> FastAPI:
    """The FastAPI application for `settings` (database URL, token)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = open_engine(settings.db, echo=settings.echo_sql)
        app.state.service = BSOService(
            engine, trial_timeout_s=settings.trial_timeout, crash_limit=settings.crash_limit
        )
        log.info("BSO server on database %s", redact(settings.db))
        try:
            yield
        finally:
            await engine.dispose()

    app = FastAPI(
        title="Basht batch size optimizer",
        summary="Zeus-compatible batch size optimizer server for recurring training jobs.",
        version="1",
        lifespan=lifespan,
    )
    # The last added runs first: the token before the body is read, the limit before parsing.
    app.add_middleware(JsonWithoutContentType)  # type: ignore[arg-type]
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)  # type: ignore[arg-type]
    # The reads: a job's state and the API docs. (GET /jobs/batch_size opens a trial: a write.)
    docs = (app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
    reads = frozenset([("GET", REGISTER_JOB_URL), *(("GET", url) for url in docs if url)])
    app.add_middleware(
        TokenGate,  # type: ignore[arg-type]
        token=settings.token,
        open_routes=OPEN_ROUTES,
        read_routes=reads,
        protect_reads=settings.protect_reads,
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _validation_detail(err.errors())})

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, err: ServiceError) -> JSONResponse:
        if isinstance(err, Unprocessable):
            detail = {"type": "value_error", "loc": list(err.loc), "msg": err.message}
            detail["input"] = _json_safe(err.value)
            return JSONResponse(status_code=422, content={"detail": [detail]})
        return JSONResponse(status_code=err.status_code, content={"message": err.message})

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, err: Exception) -> JSONResponse:
        # Starlette re-raises after answering, so uvicorn logs the traceback once, and then
        # closes the connection: "Connection: close" keeps clients from sending their next
        # request on it (which would fail with a connection reset).
        return JSONResponse(
            status_code=500, content={"message": str(err)}, headers={"Connection": "close"}
        )

    @app.post(
        REGISTER_JOB_URL,
        status_code=status.HTTP_201_CREATED,
        response_model=JobSpecFromClient,
        responses={200: {"description": "The same spec was already registered"}},
    )
    async def register_job(job: JobSpecFromClient, svc: Svc) -> JSONResponse:
        """Register a recurring job, or confirm it: 201 new, 200 same spec, 409 changed spec."""
        created, is_new = await svc.register(job)
        body = JobSpecFromClient.model_validate(created.model_dump()).model_dump(mode="json")
        if not body["optimize_power_limit"]:
            del body["optimize_power_limit"]  # a Zeus job's answer is Zeus's, field for field
        return JSONResponse(
            body, status_code=status.HTTP_201_CREATED if is_new else status.HTTP_200_OK
        )

    @app.get(GET_NEXT_BATCH_SIZE_URL, response_model=Assignment, response_model_exclude_none=True)
    async def next_batch_size(job_id: JobId, svc: Svc) -> Assignment:
        """Open a trial: the batch size to train with and its trial number (changes state); for
        a job that optimizes the power limit, also the limit or a request to profile it."""
        return await svc.next_trial(job_id)

    @app.post(POWER_PROFILE_URL, response_model=PowerLimitChoice)
    async def power_profile(profile: PowerProfile, svc: Svc) -> PowerLimitChoice:
        """Store a batch size's power-limit profile; answers the limit it trains at from now on
        (Basht's addition, for jobs registered with optimize_power_limit)."""
        return await svc.report_power_profile(profile)

    @app.post(REPORT_RESULT_URL, response_model=ReportResponse)
    async def report(result: TrainingResult, svc: Svc) -> ReportResponse:
        """Report one epoch (cumulative time and energy); the answer says whether to stop.

        Each report also tells the server the trial is alive; an abandoned trial's is a 409."""
        return await svc.report(result)

    @app.patch(REPORT_END_URL)
    async def end_trial(trial: TrialId, svc: Svc) -> None:
        """End a trial; one still running is marked Failed (a crash: no cost is learned)."""
        await svc.end_trial(trial)

    @app.delete(DELETE_JOB_URL)
    async def delete_job(job_id: JobId, svc: Svc) -> None:
        """Delete a job with its trials and arms; 404 if there is no such job."""
        await svc.delete_job(job_id)

    @app.get(REGISTER_JOB_URL)
    async def job_state(job_id: JobId, svc: Svc) -> dict[str, Any]:
        """A job's spec, stage, minimum cost, bandit arms and trials (read only)."""
        return await svc.job_state(job_id)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def app_from_env() -> FastAPI:
    """The app for uvicorn's factory mode: settings come from BASHT_BSO_* (set by `basht bso
    serve`, so every worker process gets the same ones)."""
    return create_app(ServerSettings.from_env())
