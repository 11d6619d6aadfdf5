"""The dashboard's web app: one page that lists the runs and draws one run live, and the JSON it
polls, all read from a store opened read-only.

Everything the page loads comes from this app (the charting library is shipped in the package), and
a Content-Security-Policy holds the page to that: it makes no request anywhere else. Bound to a
loopback address, the app answers only requests addressed to one, so a web page elsewhere cannot
read the store through the browser (DNS rebinding).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles

from basht.dashboard.data import comparison_detail, comparisons, run_detail, runs_list
from basht.errors import BashtError
from basht.store import Store
from basht.store.urls import shown_url

#: The addresses that keep the dashboard to this machine, and the names it then answers to.
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def _host_name(header: str) -> str:
    """The name in a Host header, without its port (`[::1]:8765` is `[::1]`)."""
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.split(":", 1)[0].lower()


def static_folder(package: str) -> Path:
    """A package's `static/` folder on disk (the packages are installed as files)."""
    return Path(str(resources.files(package) / "static"))


def create_app(store: Store, results: Path, *, host: str = "127.0.0.1") -> FastAPI:
    """The app over `store` (opened read-only by the caller); comparisons are read from the
    `results` folder, as `basht report compare-…` reads them."""
    app = FastAPI(title="Basht dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    local = host in LOOPBACK
    shown = shown_url(store.url)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Any:
        if local and _host_name(request.headers.get("host", "")) not in _LOOPBACK_NAMES:
            return PlainTextResponse("Invalid host header", status_code=400)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        if request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.exception_handler(BashtError)
    async def not_found(_request: Request, err: BashtError) -> JSONResponse:
        # Unknown or ambiguous run ids and comparisons; the store's URL without its password.
        return JSONResponse({"detail": str(err).replace(store.url, shown)}, status_code=404)

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        return {"store": shown, "read_only": True, "results": str(results)}

    @app.get("/api/runs")
    def runs(limit: int = Query(200, ge=1, le=100_000)) -> list[dict[str, Any]]:
        return runs_list(store, limit)

    @app.get("/api/runs/{run_id}")
    def run(run_id: str) -> dict[str, Any]:
        return run_detail(store, run_id)

    @app.get("/api/comparisons")
    def comparison_list() -> list[dict[str, Any]]:
        return comparisons(results, store)

    @app.get("/api/comparisons/{ref}")
    def comparison(ref: str) -> dict[str, Any]:
        return comparison_detail(results, store, ref)

    @app.get("/api/{rest:path}", include_in_schema=False)
    def unknown(rest: str) -> JSONResponse:
        return JSONResponse({"detail": f"no such endpoint: /api/{rest}"}, status_code=404)

    page = static_folder("basht.dashboard") / "index.html"

    @app.get("/", include_in_schema=False)
    @app.get("/runs/{_run_id}", include_in_schema=False)
    @app.get("/comparisons/{_ref}", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(page, media_type="text/html", headers={"Cache-Control": "no-cache"})

    # The charts' script and library, shared with the HTML report, then the page's own files.
    app.mount("/static/charts", StaticFiles(directory=static_folder("basht.report")))
    app.mount("/static", StaticFiles(directory=static_folder("basht.dashboard")))
    return app
