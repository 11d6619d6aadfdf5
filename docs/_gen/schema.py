"""JSON schema nodes in words (a type, its allowed values and bounds), for the pages generated from
the experiment's pydantic models and from the BSO server's OpenAPI document."""

from __future__ import annotations

from typing import Any

from .markdown import code, yaml_value


def _number(value: Any) -> str:
    """A bound as written: 0.5, 65535, 1,000,000,000 (JSON schema may give 1e9 as a float)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100_000 else str(value)
    return f"{value:g}"


def constraints(node: dict[str, Any]) -> list[str]:
    """The allowed values and bounds a schema node states, in words."""
    said: list[str] = []
    if "enum" in node:
        said.append(", ".join(code(yaml_value(v)) for v in node["enum"]))
    if "const" in node:
        said.append(code(yaml_value(node["const"])))
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            said.append(f"{sign} {_number(node[key])}")
    for key, words in (
        ("minLength", "at least {} character"),
        ("maxLength", "at most {} character"),
        ("minItems", "at least {} item"),
        ("maxItems", "at most {} item"),
        ("minProperties", "at least {} entry"),
        ("maxProperties", "at most {} entry"),
    ):
        if key in node:
            count = node[key]
            words = words if count == 1 else words.replace("entry", "entrie") + "s"
            said.append(words.format(count))
    if "pattern" in node:
        said.append(f"matches {code(node['pattern'])}")
    if isinstance(node.get("propertyNames"), dict):
        said.append(f"keys: {describe(node['propertyNames'])}")
    return said


def describe(node: Any, links: dict[str, str] | None = None) -> str:
    """A schema node's type in words, with the bounds of what it nests."""
    bounds = constraints(node) if isinstance(node, dict) else []
    text = type_of(node, links)
    if text == "any" and isinstance(node, dict) and {"enum", "const"} & set(node):
        return "; ".join(bounds)  # the values say it all: `idle`, `busy`
    return f"{text} ({'; '.join(bounds)})" if bounds else text


def type_of(node: Any, links: dict[str, str] | None = None) -> str:
    """A schema node's type in words; a model is a link to its section (`links`: name -> link)."""
    links = links or {}
    if node is True or not isinstance(node, dict):
        return "any"
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return links.get(name, name)
    for key in ("anyOf", "oneOf"):
        if key in node:
            members = [m for m in node[key] if m.get("type") != "null"]
            words = [describe(m, links) for m in members]
            if len(members) < len(node[key]):
                words.append("null")
            return " or ".join(words)
    kind = node.get("type")
    if kind == "array":
        return f"list of {describe(node.get('items', True), links)}"
    if kind == "object" or "additionalProperties" in node:
        values = node.get("additionalProperties", True)
        return "mapping" if values is True else f"mapping to {describe(values, links)}"
    if kind is None:
        return "any"
    return {"number": "number", "integer": "integer", "boolean": "boolean"}.get(kind, kind)


def type_and_bounds(prop: dict[str, Any], links: dict[str, str] | None = None) -> tuple[str, str]:
    """A property's type and, apart, its allowed values and bounds (for `X or null`, X's)."""
    inner = [m for m in prop.get("anyOf", [prop]) if m.get("type") != "null"]
    if len(inner) == 1:
        kind = type_of(inner[0], links) + ("" if inner[0] is prop else " or null")
        return kind, "; ".join(constraints(inner[0]))
    return type_of(prop, links), "; ".join(constraints(prop))
