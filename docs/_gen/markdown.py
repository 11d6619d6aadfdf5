"""Markdown pieces the generated pages share: tables, code spans and value formatting."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any


def cell(text: object) -> str:
    """`text` fit for a table cell: one line, pipes escaped (a `|` would end the cell)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    """`text` as an inline code span, with enough backticks around any it holds."""
    text = str(text)
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table; every cell goes through `cell`."""
    lines = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def yaml_value(value: Any) -> str:
    """A value as an experiment file writes it (YAML flow style): null, true, [a, b], {k: v}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and re.fullmatch(r"[\w./:+@-]+", value) else json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    return str(value)


def number(value: float) -> str:
    """A measured number as a results table shows it: 5 significant digits, large ones with
    thousands separators; the JSON file beside the page keeps every digit."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e5:
        return f"{value:,.0f}"
    if abs(value) >= 1e-4:
        return f"{value:.5g}"
    return f"{value:.3e}"


def anchor(path: str) -> str:
    """The id of a key path's heading (`measure.carbon` -> `measure-carbon`): attr_list ids,
    so links do not depend on how the toc extension slugifies code spans."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top"
