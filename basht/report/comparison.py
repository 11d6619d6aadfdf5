"""A comparison: which runs of one experiment, on which systems and seeds, belong together.

Kept as `results/compare-<id>/comparison.json` beside the runs' own folders; the runs themselves
are in the store, so the comparison can be reported (`basht report compare-<id>`) at any time.
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


@dataclass
class ComparedRun:
    system: str
    seed: int
    run_id: str | None
    status: str
    error: str | None = None


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

    @classmethod
    def new(
        cls,
        experiment: str,
        systems: list[str],
        seeds: list[int],
        store: str,
        target: float | None,
        results_root: Path,
    ) -> Comparison:
        now = datetime.now(UTC)
        ident = f"{PREFIX}{experiment}-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
        folder = (Path(results_root) / ident).resolve()
        return cls(ident, experiment, systems, seeds, store, target, str(folder), now.isoformat())

    def pairs(self) -> list[tuple[str, str]]:
        """(system, run id) of every run that got as far as the store, in run order."""
        return [(r.system, r.run_id) for r in self.runs if r.run_id is not None]

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
        found = sorted(root.glob(f"{ref}*/{FILENAME}")) if root.is_dir() else []
        if len(found) != 1:
            what = "no comparison" if not found else f"{len(found)} comparisons"
            raise BashtError(f"{what} matching {str(ref)!r} in {root}/")
        path = found[0]
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        runs = [ComparedRun(**r) for r in data.pop("runs", [])]
        return Comparison(**data, runs=runs)
    except (OSError, ValueError, TypeError) as err:
        raise BashtError(f"{path}: not a Basht comparison ({err})") from None


def is_comparison_ref(ref: str) -> bool:
    return ref.startswith(PREFIX) or Path(ref).is_dir() or Path(ref).name == FILENAME
