"""The experiment-file reference, from the pydantic models' JSON schema (field docstrings are the
descriptions), so a key added to `basht.experiment` is documented by the next build."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from .markdown import anchor, code, table, yaml_value
from .schema import type_and_bounds

ROOT = "(top level)"
EXAMPLE = "examples/digits-asha.yaml"


class _FactoryDefaults(GenerateJsonSchema):
    """Also shows the defaults made by a `default_factory` (pydantic leaves them out, as a factory
    may depend on the other fields; none of the experiment's does)."""

    def get_default_value(self, schema: Any) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()
        return super().get_default_value(schema)


def experiment_schema() -> dict[str, Any]:
    """The experiment file's JSON schema, nested models under `$defs`."""
    from basht.experiment import Experiment

    return Experiment.model_json_schema(schema_generator=_FactoryDefaults)


@dataclass
class Section:
    """One model of the schema, documented once under every key path it appears at."""

    name: str  # its `$defs` name ("" for the experiment itself)
    schema: dict[str, Any]
    paths: list[str] = field(default_factory=list)
    depth: int = 0

    @property
    def id(self) -> str:
        """The heading's id: its first path, and the discriminator value of a variant."""
        variant = _variant(self.schema)
        return anchor(self.paths[0] + (f"-{variant[1]}" if variant else ""))


def _variant(schema: dict[str, Any]) -> tuple[str, Any] | None:
    """(key, value) of a constant key (`type: float`): what picks this model among others."""
    for key, prop in schema.get("properties", {}).items():
        if "const" in prop:
            return key, prop["const"]
    return None


def _child_refs(node: Any, path: str) -> list[tuple[str, str]]:
    """(key path, `$defs` name) of each model a property's schema refers to."""
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        return [(path, node["$ref"].rsplit("/", 1)[-1])]
    found: list[tuple[str, str]] = []
    for key in ("anyOf", "oneOf", "allOf"):
        for member in node.get(key, []):
            found += _child_refs(member, path)
    found += _child_refs(node.get("items"), f"{path}[]")
    found += _child_refs(node.get("additionalProperties"), f"{path}.<name>")
    return found


def sections(schema: dict[str, Any]) -> list[Section]:
    """Every model in the schema, depth first from the top level (a block's sub-blocks follow it)."""
    defs = schema.get("$defs", {})
    seen: dict[str, Section] = {}
    order: list[Section] = []

    def visit(name: str, model: dict[str, Any], path: str, depth: int) -> None:
        if name in seen:
            seen[name].paths.append(path)
            return
        section = Section(name, model, [path], depth)
        seen[name] = section
        order.append(section)
        for key, prop in model.get("properties", {}).items():
            child_path = key if path == ROOT else f"{path}.{key}"
            for ref_path, ref in _child_refs(prop, child_path):
                visit(ref, defs[ref], ref_path, depth + 1)

    visit("", schema, ROOT, 0)
    return order


# -- one key's row -------------------------------------------------------------------------


def _default(prop: dict[str, Any], required: bool, defs: dict[str, Any]) -> str:
    if required:
        return "required"
    if "default" not in prop:
        return "—"
    value = prop["default"]
    ref = next((r for _, r in _child_refs(prop, "")), None)
    if isinstance(value, dict) and ref is not None:
        # A block's default: only what differs from its own keys' defaults ({region: DE}).
        own = defs[ref].get("properties", {})
        value = {
            k: v for k, v in value.items() if v is not None and own.get(k, {}).get("default") != v
        }
        if not value:
            return "its keys' defaults"
    return code(yaml_value(value))


def _row(
    key: str, prop: dict[str, Any], required: bool, links: dict[str, str], defs: dict[str, Any]
) -> list[str]:
    kind, bounds = type_and_bounds(prop, links)
    return [
        code(key),
        kind,
        _default(prop, required, defs),
        bounds,
        prop.get("description", ""),
    ]


# -- the page ------------------------------------------------------------------------------


def _heading(section: Section) -> str:
    if not section.name:
        return "The top level"
    variant = _variant(section.schema)
    where = ", ".join(code(p) for p in section.paths)
    return f"{where} with {code(f'{variant[0]}: {variant[1]}')}" if variant else where


def _intro(section: Section) -> str:
    """What a section says above its table: the model's docstring, and how it is written."""
    lines = []
    if section.name and section.schema.get("description"):
        lines.append(" ".join(section.schema["description"].split()))
    if any(p.endswith("<name>") for p in section.paths):
        lines.append("One entry per name, which is the user's own.")
    if any(p.endswith("[]") for p in section.paths):
        lines.append("A list; each item has these keys.")
    return "\n\n".join(lines)


def experiment_file_page(schema: dict[str, Any] | None = None, root: Path | None = None) -> str:
    """The Markdown of `reference/experiment-file.md`."""
    schema = schema or experiment_schema()
    defs = schema.get("$defs", {})
    found = sections(schema)
    links = {s.name: f"[{code(s.paths[0])}](#{s.id})" for s in found if s.name}
    variants = [s for s in found if _variant(s.schema)]
    for s in variants:  # a variant is named by what picks it: `float` (space.<name>)
        links[s.name] = f"[{code(_variant(s.schema)[1])}](#{s.id})"
    parts = [
        "# Experiment file\n",
        "An experiment is one YAML or JSON file. Unknown keys are errors, and every problem is "
        "reported as one line naming the file, the key path and what was expected (exit code 2); "
        "`basht validate FILE` checks a file without running it.\n",
        "This page is generated from the schema Basht validates files with, so it lists every "
        "key there is. A key path such as `measure.carbon.region` is written nested:\n",
        "```yaml\nmeasure:\n  carbon:\n    region: DE\n```\n",
    ]
    if root is not None and (root / EXAMPLE).is_file():
        example = (root / EXAMPLE).read_text(encoding="utf-8").rstrip()
        parts.append(
            f'A whole file ({code(EXAMPLE)}):\n\n```yaml title="{EXAMPLE}"\n{example}\n```\n'
        )
    for section in found:
        # The top level and its blocks are siblings (##); what a block nests goes under it.
        level = "#" * min(max(section.depth, 1) + 1, 4)
        parts.append(f"{level} {_heading(section)} {{ #{section.id} }}\n")
        intro = _intro(section)
        if intro:
            parts.append(intro + "\n")
        required = set(section.schema.get("required", []))
        rows = [
            _row(key, prop, key in required, links, defs)
            for key, prop in section.schema.get("properties", {}).items()
        ]
        parts.append(table(["key", "type", "default", "allowed", "description"], rows))
    return "\n".join(parts)
