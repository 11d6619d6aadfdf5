"""The benchmark pages: one per `benchmarks/results/*.json`, its tables rendered from the file, so the
numbers in the documentation are the numbers the benchmark wrote.

Every benchmark writes its own shape of JSON; the rendering is generic. Top-level numbers and text
are the settings, a list of records (or a mapping of records) is a table, and a record's nested
list of records becomes a table of its own. The raw file is published beside each page with every
digit (the tables round to five significant digits).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .markdown import code, number, table

RESULTS = Path("benchmarks/results")
LONG_TABLE = 25  # rows past which a table is folded away (click to open)
NESTED_ROWS = 50  # a nested list of records longer than this is left to the JSON file
WIDE = 8  # a table of few records with more columns than this is shown transposed


@dataclass(frozen=True)
class Result:
    """One results file and what the page says about it."""

    stem: str  # the file's name without .json; also the page's
    data: Any
    script: str  # benchmarks/<script>.py that writes it
    description: str


#: The hand-written page whose table says what each benchmark script measures.
SCRIPTS_PAGE = "docs/how-to/benchmarks.md"


def script_descriptions(page: str) -> dict[str, str]:
    """{script stem: what it measures} from the table of `SCRIPTS_PAGE`."""
    found = {}
    for line in page.splitlines():
        match = re.match(r"\|\s*`python benchmarks/(\w+)\.py[^`]*`\s*\|(.*)\|\s*$", line)
        if match:  # its links point from the how-to page: the text alone travels
            found[match.group(1)] = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2)).strip()
    return found


def _docstring(script: Path) -> str:
    """A script's docstring's first paragraph: the description when the table has none."""
    match = re.match(r'\s*(?:"""|\'\'\')(.*?)(?:\n\s*\n|"""|\'\'\')', script.read_text(), re.S)
    return " ".join(match.group(1).split()) if match else ""


def results(root: Path) -> list[Result]:
    """Every results file under `root`, with the script that writes it and its description."""
    page = root / SCRIPTS_PAGE
    described = script_descriptions(page.read_text(encoding="utf-8")) if page.exists() else {}
    found = []
    for path in sorted((root / RESULTS).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        named = data.get("benchmark") if isinstance(data, dict) else None
        # The script: the file's own name, the benchmark it names, or the longest prefix
        # (asha_scale_eta3.json is written by asha_scale.py with other options).
        candidates = [path.stem, named] + sorted(
            (s for s in described if path.stem.startswith(s)), key=len, reverse=True
        )
        script = next(
            (c for c in candidates if c and (root / "benchmarks" / f"{c}.py").exists()), ""
        )
        description = described.get(script) or (
            _docstring(root / "benchmarks" / f"{script}.py") if script else ""
        )
        found.append(Result(path.stem, data, script, _sentence(description)))
    return found


def _sentence(text: str) -> str:
    """A table cell as prose: capitalised, with a full stop."""
    text = text.strip()
    if text[:1].isalpha():
        text = text[0].upper() + text[1:]
    return text if not text or text.endswith((".", ")")) else f"{text}."


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence outside a code span."""
    depth = 0
    for i, char in enumerate(text):
        depth ^= char == "`"
        if (
            char == "."
            and not depth
            and text[i + 1 : i + 3].startswith(" ")
            and text[i + 2 : i + 3].isupper()
        ):
            return text[: i + 1]
    return text


# -- values and tables ---------------------------------------------------------------------


def _text(value: str) -> str:
    """Text from a results file, safe in Markdown (it may hold <, *, _ or backticks)."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", html.escape(value, quote=False))


def show(value: Any) -> str:
    """A value in a table cell."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list) and all(_is_scalar(v) for v in value):
        return ", ".join(show(v) for v in value) or "—"
    return _text(json.dumps(value))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def flatten(record: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], dict[str, list]]:
    """A record's values by dotted key, and apart, the lists of records it nests."""
    flat: dict[str, Any] = {}
    nested: dict[str, list] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            inner, deeper = flatten(value, f"{name}.")
            flat.update(inner)
            nested.update(deeper)
        elif _is_records(value):
            nested[name] = value
        else:
            flat[name] = value
    return flat, nested


def _label(record: dict[str, Any]) -> str:
    """What names a record: its first text value (a store, an algorithm, a system)."""
    return next((v for v in record.values() if isinstance(v, str)), "")


def _fold(markdown: str, rows: int) -> str:
    """A long table folded away, opened with a click (pymdownx.details)."""
    if rows <= LONG_TABLE:
        return markdown
    body = "\n".join(f"    {line}" if line else "" for line in markdown.splitlines())
    return f'??? note "{rows} rows"\n\n{body}\n'


def records_table(rows: list[dict[str, Any]], labels: list[str]) -> str:
    """Records as a table, a row each; transposed when there are few and they are wide."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    if len(rows) <= 4 and len(columns) > WIDE:
        columns = [c for c in columns if c]  # the records' names are the header now
        header = ["", *(_text(label) for label in labels)]
        body = [[code(c), *(show(row.get(c)) for row in rows)] for c in columns]
        return table(header, body)
    header = [_text(c) for c in columns]
    return _fold(table(header, [[show(row.get(c)) for c in columns] for row in rows]), len(rows))


@dataclass(frozen=True)
class Block:
    """A titled part of the page: a heading, and what goes under it."""

    title: str
    level: int
    body: str


def _record_blocks(
    path: str, title: str, records: list[dict[str, Any]], level: int, names: list[str] | None = None
) -> Iterator[Block]:
    """A table of records (named by `names` when they come from a mapping), then the tables that
    their nested lists of records make, each under its own heading."""
    flat_rows, nested_rows = zip(*(flatten(r) for r in records), strict=True)
    labels = names or [_label(r) or str(i) for i, r in enumerate(records)]
    rows = [({"": names[i]} if names else {}) | row for i, row in enumerate(flat_rows)]
    inner_blocks: list[tuple[str, str, list[dict[str, Any]]]] = []
    left_out: list[str] = []
    for i, nested in enumerate(nested_rows):
        for key, inner in nested.items():
            where = f"{path}.{names[i]}.{key}" if names else f"{path}[{i}].{key}"
            if len(inner) > NESTED_ROWS:
                left_out.append(f"{code(where)} ({len(inner)} records)")
                continue
            named = not names and _label(records[i])
            inner_blocks.append(
                (where, code(where) + (f" ({_text(labels[i])})" if named else ""), inner)
            )
    body = records_table(rows, labels)
    if left_out:
        body += f"\nLeft to the JSON file: {', '.join(left_out)}.\n"
    yield Block(title, level, body)
    for where, sub, inner in inner_blocks:
        yield from _record_blocks(where, sub, inner, level + 1)


def blocks(key: str, value: Any) -> Iterator[Block]:
    """The page's parts for one top-level key of a results file."""
    if _is_records(value):
        yield from _record_blocks(key, code(key), value, 2)
    elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        yield from _record_blocks(key, code(key), list(value.values()), 2, [str(k) for k in value])
    elif isinstance(value, dict):
        flat, nested = flatten(value)
        rows = [[code(k), show(v)] for k, v in flat.items()]
        yield Block(code(key), 2, _fold(table(["key", "value"], rows), len(rows)))
        for inner_key, inner in nested.items():
            where = f"{key}.{inner_key}"
            if len(inner) > NESTED_ROWS:
                yield Block(code(where), 3, f"{len(inner)} records: left to the JSON file.\n")
            else:
                yield from _record_blocks(where, code(where), inner, 3)
    else:
        yield Block(code(key), 2, f"```json\n{json.dumps(value, indent=1)}\n```\n")


def _settings(data: dict[str, Any]) -> dict[str, Any]:
    """The top-level numbers and text (and lists of them): how the benchmark was run."""
    return {
        k: v
        for k, v in data.items()
        if k not in ("benchmark", "machine")
        and (_is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v)))
    }


def result_page(result: Result) -> str:
    """The Markdown of `benchmarks/<stem>.md`."""
    data = result.data
    parts = [f"# {result.stem}\n"]
    if result.description:
        parts.append(result.description + "\n")
    source = f"benchmarks/results/{result.stem}.json"
    command = f"python benchmarks/{result.script}.py" if result.script else "its benchmark"
    parts.append(
        f"Written by {code(command)} to {code(source)}; the tables below are rendered from that "
        f"file when the documentation is built ([the file itself]({result.stem}.json), every "
        "digit).\n"
    )
    if not isinstance(data, dict):
        parts += [b.body for b in blocks("results", data)]
        return "\n".join(parts)
    machine = data.get("machine")
    if isinstance(machine, dict):
        flat = flatten(machine)[0]
        parts += [
            "## Machine\n",
            table(["key", "value"], [[code(k), show(v)] for k, v in flat.items()]),
        ]
    elif machine is not None:
        parts += ["## Machine\n", show(machine) + "\n"]
    settings = _settings(data)
    if settings:
        parts += [
            "## Settings\n",
            table(["setting", "value"], [[code(k), show(v)] for k, v in settings.items()]),
        ]
    for key, value in data.items():
        if key in ("benchmark", "machine") or key in settings:
            continue
        for block in blocks(key, value):
            parts += [f"{'#' * min(block.level, 4)} {block.title}\n", block.body]
    return "\n".join(parts)


def index_page(found: list[Result]) -> str:
    """The Markdown of `benchmarks/index.md`: every results file with what it measures."""
    pages = {r.stem for r in found}
    rows = []
    for r in found:
        about = first_sentence(r.description)
        if r.script and r.stem != r.script and r.script in pages:
            # Another run of a script that has a page of its own (asha_scale_eta3.json).
            about = f"Like [{r.script}]({r.script}.md), with other options (its page lists them)."
        script = code(f"benchmarks/{r.script}.py") if r.script else "—"
        rows.append([f"[{r.stem}]({r.stem}.md)", script, about])
    return "\n".join(
        [
            "# Benchmarks\n",
            "`benchmarks/` measures Basht: each script prints a table and writes JSON to "
            "`benchmarks/results/`. A page per results file follows, its tables rendered from the "
            "file when this site is built, so the numbers here are the numbers in the files. "
            "Each page says which script wrote it and with what settings, and on which machine.\n",
            table(["results", "script", "what it measures"], rows),
        ]
    )


def benchmark_pages(root: Path) -> dict[str, str]:
    """{site path: content} of the benchmark pages, and a copy of each results file."""
    found = results(root)
    pages = {"benchmarks/index.md": index_page(found)}
    for result in found:
        pages[f"benchmarks/{result.stem}.md"] = result_page(result)
        pages[f"benchmarks/{result.stem}.json"] = (
            root / RESULTS / f"{result.stem}.json"
        ).read_text(encoding="utf-8")
    return pages
