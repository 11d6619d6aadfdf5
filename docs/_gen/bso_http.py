"""The BSO HTTP API reference, from the server's own OpenAPI document (`basht.bso.server`), and which
routes need the token, from the token gate the app is built with."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .markdown import anchor, code, table
from .schema import type_and_bounds, type_of

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Api:
    """What the page is made from: the OpenAPI document and the token gate's route sets."""

    openapi: dict[str, Any]
    open_routes: frozenset[tuple[str, str]]  # never need the token
    read_routes: frozenset[tuple[str, str]]  # need it only with --protect-reads


def server_api() -> Api:
    """The API of the app `basht bso serve` runs, built as the tests build it (its database, a
    throwaway SQLite file, is never opened: that happens when the app starts serving)."""
    from basht.bso.config import ServerSettings
    from basht.bso.server import create_app

    with tempfile.TemporaryDirectory() as folder:
        db = f"sqlite:///{Path(folder) / 'docs.db'}"
        app = create_app(ServerSettings(db=db, token="docs"))
        openapi = app.openapi()
    gate = next(m for m in app.user_middleware if "read_routes" in m.kwargs)
    return Api(
        openapi, frozenset(gate.kwargs["open_routes"]), frozenset(gate.kwargs["read_routes"])
    )


def routes(api: Api) -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) of every route in the OpenAPI document, in its order."""
    return [
        (method.upper(), path, operation)
        for path, item in api.openapi.get("paths", {}).items()
        for method, operation in item.items()
        if method in METHODS
    ]


def token_rule(api: Api, method: str, path: str) -> str:
    if (method, path) in api.open_routes:
        return "never"
    if (method, path) in api.read_routes:
        return "with `--protect-reads`"
    return "when the server has one"


def _links(api: Api) -> dict[str, str]:
    schemas = api.openapi.get("components", {}).get("schemas", {})
    return {name: f"[{code(name)}](#schema-{anchor(name)})" for name in schemas}


def _body(content: dict[str, Any], links: dict[str, str]) -> str:
    """A request or response body: its media types and schema."""
    said = []
    for media, spec in content.items():
        schema = spec.get("schema", {})
        said.append(f"{type_of(schema, links) if schema else 'any'} ({code(media)})")
    return "; ".join(said) or "—"


def _route(api: Api, method: str, path: str, operation: dict[str, Any]) -> str:
    links = _links(api)
    parts = [f"## `{method} {path}` {{ #{anchor(f'{method} {path}')} }}\n"]
    if operation.get("description"):
        parts.append(" ".join(operation["description"].split()) + "\n")
    parts.append(f"**Token:** {token_rule(api, method, path)}.\n")
    parameters = operation.get("parameters", [])
    if parameters:
        rows = []
        for p in parameters:
            kind, bounds = type_and_bounds(p.get("schema", {}), links)
            required = "required" if p.get("required") else "optional"
            rows.append([code(p["name"]), p.get("in", ""), kind, required, bounds])
        parts.append(table(["parameter", "in", "type", "required", "allowed"], rows))
    body = operation.get("requestBody")
    if body:
        required = "required" if body.get("required") else "optional"
        parts.append(f"**Request body** ({required}): {_body(body.get('content', {}), links)}\n")
    responses = operation.get("responses", {})
    rows = [
        [code(status), answer.get("description", ""), _body(answer.get("content", {}), links)]
        for status, answer in responses.items()
    ]
    parts.append(table(["status", "meaning", "body"], rows))
    return "\n".join(parts)


def _schema(name: str, schema: dict[str, Any], links: dict[str, str]) -> str:
    parts = [f"### `{name}` {{ #schema-{anchor(name)} }}\n"]
    if schema.get("description"):
        parts.append(" ".join(schema["description"].split()) + "\n")
    required = set(schema.get("required", []))
    properties = schema.get("properties", {})
    described = any(prop.get("description") for prop in properties.values())
    rows = []
    for key, prop in properties.items():
        kind, bounds = type_and_bounds(prop, links)
        default = code(json.dumps(prop["default"])) if "default" in prop else "—"
        row = [code(key), kind, "required" if key in required else default, bounds]
        rows.append([*row, prop.get("description", "")] if described else row)
    header = ["key", "type", "default", "allowed"] + (["description"] if described else [])
    parts.append(table(header, rows))
    return "\n".join(parts)


def bso_http_page(api: Api | None = None) -> str:
    """The Markdown of `reference/bso-http-api.md`."""
    api = api or server_api()
    info = api.openapi.get("info", {})
    found = routes(api)
    listed = {(m, p) for m, p, _ in found}
    unlisted = sorted(r for r in api.read_routes | api.open_routes if r not in listed)
    parts = [
        "# BSO HTTP API\n",
        f"The routes of `basht bso serve`, the {info.get('title', 'server')}: "
        f"{info.get('summary', '')} A stock Zeus `BatchSizeOptimizer` client works against it "
        "unchanged.\n",
        "With a token (`--token` or `BASHT_BSO_TOKEN`), a request needs `Authorization: Bearer "
        "TOKEN`, or the token as the password of HTTP basic auth (the Zeus client cannot send "
        "headers, but a URL like `http://bso:TOKEN@host:8000` makes it send basic auth). The "
        "*token* column says which routes need it; a request without it is answered 401. A "
        "route added later needs the token unless it is made a read on purpose.\n",
        "This page is generated from the server's OpenAPI document "
        f"({info.get('title', '')}, version {info.get('version', '')}) when the documentation is "
        "built.\n",
        table(
            ["method", "path", "summary", "token"],
            [
                [
                    code(m),
                    f"[{code(p)}](#{anchor(f'{m} {p}')})",
                    o.get("summary", ""),
                    token_rule(api, m, p),
                ]
                for m, p, o in found
            ],
        ),
    ]
    if unlisted:  # the API's own documentation: routes the token gate knows, OpenAPI does not
        served = "; ".join(
            f"{code(f'{m} {p}')} (token: {token_rule(api, m, p)})" for m, p in unlisted
        )
        parts.append(f"The server also serves its API documentation: {served}.\n")
    parts += [_route(api, m, p, o) for m, p, o in found]
    schemas = api.openapi.get("components", {}).get("schemas", {})
    if schemas:
        parts.append("## Schemas\n")
        parts += [_schema(name, schema, _links(api)) for name, schema in schemas.items()]
    return "\n".join(parts)
