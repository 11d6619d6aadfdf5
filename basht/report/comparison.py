"""A comparison: which runs of one or more experiments, on which systems and seeds, belong
together. Its columns are the systems (one file), the files (one system), or each file on each
system.

Kept as `results/compare-<id>/comparison.json` beside the runs' own folders; the runs themselves
are in the store, so the comparison can be reported (`basht report compare-<id>`) at any time, from
any folder: a SQLite store is kept by its absolute path.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from basht.errors import BashtError

PREFIX = "compare-"
FILENAME = "comparison.json"
#: How many ids an ambiguous prefix's error names before "and N more".
_SHOWN = 5
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_KINDS[type(None)] = "null"


@dataclass
class ComparedRun:
    system: str
    seed: int
    run_id: str | None
    status: str
    error: str | None = None
    column: str | None = None  # the comparison's column; None (saved before files): the system

    @property
    def label(self) -> str:
        return self.column or self.system


@dataclass
class Comparison:
    id: str
    experiment: str
    systems: list[str]
    seeds: list[int]
    store: str
    target: float | None  # the value time-to-target is measured against (None: not measured)
    folder: str
    created_at: str
    runs: list[ComparedRun] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # saved before files: the systems

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = list(self.systems)

    @classmethod
    def new(
        cls,
        experiment: str,
        systems: list[str],
        seeds: list[int],
        store: str,
        target: float | None,
        results_root: Path,
        columns: list[str] | None = None,
    ) -> Comparison:
        now = datetime.now(UTC)
        name = experiment.replace(" ", "-")  # "a vs b": compare-a-vs-b-...
        ident = f"{PREFIX}{name}-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
        folder = (Path(results_root) / ident).resolve()
        return cls(
            ident,
            experiment,
            systems,
            seeds,
            absolute_store_url(store),
            target,
            str(folder),
            now.isoformat(),
            columns=list(columns or systems),
        )

    def pairs(self) -> list[tuple[str, str]]:
        """(column, run id) of every run that got as far as the store, in run order."""
        return [(r.label, r.run_id) for r in self.runs if r.run_id is not None]

    def save(self) -> Path:
        folder = Path(self.folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / FILENAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)
        return path


def load_comparison(ref: str | Path, results_root: Path | str = "results") -> Comparison:
    """A comparison by id (or a unique prefix of it), by its folder, or by its comparison.json."""
    path = Path(ref)
    if path.is_dir():
        path = path / FILENAME
    if not path.is_file():
        root = Path(results_root)
        exact = root / str(ref) / FILENAME
        if exact.is_file():
            found = [exact]
        else:
            found = sorted(root.glob(f"{ref}*/{FILENAME}")) if root.is_dir() else []
        if len(found) != 1:
            raise BashtError(_no_single_match(str(ref), root, [p.parent.name for p in found]))
        path = found[0]
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        if not isinstance(data, dict):  # valid JSON, but not the object `save` writes
            raise ValueError(f"a JSON {_JSON_KINDS.get(type(data), 'value')}, not an object")
        runs = [ComparedRun(**r) for r in data.pop("runs", [])]
        comparison = Comparison(**data, runs=runs)
    except (OSError, ValueError, TypeError) as err:
        raise BashtError(f"{path}: not a Basht comparison ({err})") from None
    comparison.store = _old_relative_store(comparison.store, path.resolve().parent)
    return comparison


def _no_single_match(ref: str, root: Path, ids: list[str]) -> str:
    if not ids:
        return f"no comparison matching {ref!r} in {root}/"
    shown = ", ".join(ids[:_SHOWN])
    more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return f"{len(ids)} comparisons matching {ref!r} in {root}/: {shown}{more}; give more of the id"


def _sqlite_file(url: str) -> Any:
    """The parsed URL when it names a SQLite file by a relative path, else None."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    database = parsed.database
    if (
        not parsed.drivername.startswith("sqlite")
        or not database
        or database == ":memory:"
        or database.startswith("file:")  # a URI filename (uri=true): left as given
        or Path(database).is_absolute()
    ):
        return None
    return parsed


def absolute_store_url(url: str) -> str:
    """A SQLite URL with a relative path made absolute (from the current folder), so the
    comparison finds its runs from any folder; any other URL exactly as given."""
    parsed = _sqlite_file(url)
    if parsed is None:
        return url
    return parsed.set(database=str(Path(parsed.database).resolve())).render_as_string(
        hide_password=False
    )


def _old_relative_store(url: str, folder: Path) -> str:
    """A comparison saved before stores were kept absolute: its relative SQLite file is where it
    was (the current folder), or else beside the results folder that holds `folder`, the
    comparison's own (where `basht compare` ran, with the default --results)."""
    parsed = _sqlite_file(url)
    if parsed is None or Path(parsed.database).exists():
        return url
    beside = folder.parent.parent / parsed.database
    if not beside.is_file():
        return url
    return parsed.set(database=str(beside.resolve())).render_as_string(hide_password=False)


def is_comparison_ref(ref: str) -> bool:
    """A comparison's id, folder or file; a folder without a comparison in it (a run's own
    `results/<run-id>/`, named as its run) is not one, so its name is looked up as a run."""
    path = Path(ref)
    return ref.startswith(PREFIX) or (path / FILENAME).is_file() or path.name == FILENAME
