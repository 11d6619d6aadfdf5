"""Generated bad input for the tests that feed it to each reader: values a file may hold instead
of the right one, valid documents mutated the ways files go wrong, the CLI run in-process, and
the promise every such test checks: exit 0, or exit 2 with one line naming the file, never a
traceback.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from basht.cli import main
from basht.experiment import ShaJob
from basht.plan import plan_job
from basht.plan.profile import profile_from_dict
from basht.report.plan import plan_json

#: Values a file may hold instead of the right one.
ODD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 0, -1, 10**30, 10**400, 1e-300, "", "-1", "nan", "1e400"]
    ),
    st.text(max_size=20),
)
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


#: A SHA job of two stages (3 trials for 1 epoch, then 1 for 2 more) on `sleep` epochs: what
#: `basht plan` plans, and `basht run --plan` runs, in milliseconds.
TINY_SHA: dict[str, Any] = {
    "name": "tiny-sha",
    "workload": {"name": "sleep", "params": {"epoch_s": 0.001}},
    "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
    "search": {"pruner": "sha", "metric": "accuracy", "min_budget": 1, "max_budget": 3},
    "resources": {"workers": 1},
}
#: A profile for it: one GPU per instance, epochs of 10 to 20 ms.
TINY_PROFILE: dict[str, Any] = {
    "instance": {"usd_per_hour": 1.0, "gpus": 1},
    "epoch_s": {1: [0.01, 0.02]},
    "startup_s": [0.01],
    "power_w": {"idle": 10, "busy": 20},
}


@functools.cache
def tiny_plan() -> dict[str, Any]:
    """The plan `basht plan --json` writes for TINY_SHA and TINY_PROFILE."""
    job = ShaJob(3, 1, 3, 3)
    profile = profile_from_dict(TINY_PROFILE)
    return plan_json(plan_job(job, profile, 600.0, runs=5), job, profile)


def fuzz_settings(max_examples: int) -> settings:
    """Hypothesis settings for a test that writes files and runs a reader or the CLI: no
    deadline (the machine is shared), the tmp_path of the test reused by its examples."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def mostly(
    good: st.SearchStrategy[Any], odd: st.SearchStrategy[Any], times: int = 3
) -> st.SearchStrategy[Any]:
    """`good` `times` times for each `odd`: input with one wrong part among right ones.
    (`one_of` the same strategy several times draws it no more often: it keeps one of them.)"""
    return st.sampled_from([good] * times + [odd]).flatmap(lambda chosen: chosen)


def key_paths(
    data: Any, prefix: tuple[Any, ...] = (), *, lists: bool = False
) -> list[tuple[Any, ...]]:
    """Every key path in a nested mapping; with `lists`, every item of a list too (its index)."""
    items: list[tuple[Any, Any]] = []
    if isinstance(data, dict):
        items = list(data.items())
    elif lists and isinstance(data, list):
        items = list(enumerate(data))
    found = []
    for key, value in items:
        found.append((*prefix, key))
        found.extend(key_paths(value, (*prefix, key), lists=lists))
    return found


def mutated(
    draw: st.DrawFn,
    example: Any,
    *,
    lists: bool = False,
    values: st.SearchStrategy[Any] = ODD_VALUES,
) -> Any:
    """A copy of `example` with one to three changes: a key (or, with `lists`, an item) removed,
    its value replaced by one of `values`, or a key added."""
    data = copy.deepcopy(example)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = key_paths(data, lists=lists)
        if not paths:
            return data
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["remove", "replace", "add"]))
        if how == "remove":
            del parent[path[-1]]
        elif how == "replace":
            parent[path[-1]] = draw(values)
        elif isinstance(parent, list):
            parent.append(draw(values))
        else:
            parent[draw(st.text(min_size=1, max_size=10))] = draw(values)
    return data


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: Any, *args: str) -> tuple[int, str]:
    """`basht ARGS` in this process: its exit code and what it wrote to stderr, warnings logged
    included (as the CLI's own logging prints them; under pytest they would be captured)."""
    capsys.readouterr()  # what came before is not this command's
    monkeypatch.setattr("sys.argv", ["basht", *args])
    logged = logging.StreamHandler(sys.stderr)
    logged.setLevel(logging.WARNING)
    logged.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(logged)
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        logging.getLogger().removeHandler(logged)
    return code, capsys.readouterr().err


def check_outcome(
    code: int, err: str, *named: str | Path, starts: str | Path | None = None
) -> None:
    """Exit 0, or exit 2 with one line (`error: ...`, starting with `error: <starts>` when given)
    that holds each of `named`; never a traceback."""
    assert code in (0, 2), f"exit {code}: {err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        prefix = "error: " if starts is None else f"error: {starts}"
        assert lines[0].startswith(prefix), lines[0]
        for name in named:
            assert str(name) in lines[0], (name, lines[0])


def files_in(folder: Path) -> dict[str, int]:
    """The files under `folder` and their sizes: what a refused command must leave as it was.
    SQLite's `-wal` and `-shm` files are left out: a store read in this process keeps them
    until it is collected (the CLI's process ends, and they go)."""
    return {
        str(p.relative_to(folder)): p.stat().st_size
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm")) and ".hypothesis" not in p.parts
    }
