"""Generated command lines: every option of the main commands given right values, odd ones
(not numbers, negative, huge, NaN, empty, paths that are folders or not there) or none; each
command exits 0, or 2 with one line, never a traceback, and a refused one writes no file.

Each invocation is cheap: the commands that would run trials get a store they cannot open, or
an instance that is not in the price sheet, so they are refused before anything runs;
`plan` and `simulate` are given a tiny job and do their (milliseconds of) work.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from basht.engine.recorded import RecordedCurves
from basht.store import Store
from tests.bad_input import (
    TINY_PROFILE,
    TINY_SHA,
    check_outcome,
    files_in,
    fuzz_settings,
    mostly,
    run_cli,
    tiny_plan,
)

#: Options a command takes, besides the ones it is given here.
ODD_INTS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["-1", "0", str(2**31), str(2**63), "1" + "0" * 400, "1.5", "1e3", "x", ""]),
)
ODD_FLOATS = st.one_of(
    st.floats().map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-1e400", "1e-400", "0", "-1", "", "x"]),
)
ODD_WORDS = st.one_of(
    st.text(max_size=12).filter(lambda w: not w.startswith("-")),
    st.sampled_from(["", " ", "latest", "compare-x", "ça", "a\nb", "[red]x", "%s", "{}", "1e400"]),
)
#: Store URLs that are refused before a run starts (never one that opens: the run would start).
ODD_STORES = st.one_of(
    st.sampled_from(["", "nosuch://x", "sqlite:", "://", "sqlite:////dev/null/x.db"]),
    st.text(max_size=10).filter(lambda u: "://" not in u and not u.startswith("-")),
)
FLAGS = st.sampled_from([[], ["--json"], ["--html"], ["--json", "--html"]])


def _option(name: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    """`[name, value]`, or nothing (the default) one time in four."""
    return mostly(value.map(lambda v: [name, v]), st.just([]))


def _paths(work: Path) -> st.SearchStrategy[str]:
    """Paths a user may mistype: a folder, a file where a folder is needed, nothing there."""
    return st.one_of(
        st.sampled_from(
            ["", ".", "/", "/dev/null", "/dev/null/x", str(work), str(work / "nowhere" / "x"),
             "a" * 300, str(work / "out.json")]
        ),
        st.text(max_size=8).filter(lambda p: not p.startswith("-")),
    )  # fmt: skip


@functools.cache
def _curves() -> RecordedCurves:
    return RecordedCurves(
        metric="accuracy",
        mode="max",
        configs=[{"x": 0.1}, {"x": 0.5}, {"x": -0.2}],
        values=[[0.1, 0.2, 0.3], [0.2, 0.4, 0.5], [0.05, 0.1, 0.1]],
        seconds=[[0.1, 0.2, 0.3]] * 3,
    )


def _setup(tmp_path: Path) -> dict[str, Path]:
    """The files the commands are given, written once per test: the tiny SHA job, its profile
    and plan, an ASHA job and recorded curves for `simulate`, an empty store."""
    given_ = tmp_path / "given"
    if not given_.exists():
        given_.mkdir()
        (given_ / "sha.yaml").write_text(yaml.safe_dump(TINY_SHA))
        (given_ / "profile.yaml").write_text(yaml.safe_dump(TINY_PROFILE))
        (given_ / "plan.json").write_text(json.dumps(tiny_plan()))
        asha = TINY_SHA | {"search": TINY_SHA["search"] | {"pruner": "asha", "max_trials": 9}}
        (given_ / "asha.yaml").write_text(yaml.safe_dump(asha))
        _curves().save(given_ / "curves.json")
        Store(f"sqlite:///{given_ / 'empty.db'}").close()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    names = ("sha.yaml", "profile.yaml", "plan.json", "asha.yaml", "curves.json", "empty.db")
    return {name.split(".")[0]: given_ / name for name in names} | {"work": work}


def _commands(files: dict[str, Path]) -> dict[str, st.SearchStrategy[list[str]]]:
    """For each command, its command lines: right values three times in four per option."""
    paths, sha, store = _paths(files["work"]), str(files["sha"]), f"sqlite:///{files['empty']}"
    stores = mostly(st.just(store), ODD_STORES)
    out = str(files["work"] / "out.json")

    def line(*parts: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
        return st.tuples(*parts).map(lambda chosen: [arg for part in chosen for arg in part])

    return {
        "plan": line(
            st.just(["plan", sha]),
            _option("--profile", mostly(st.just(str(files["profile"])), paths)),
            _option("--deadline", mostly(st.sampled_from(["1h", "90m", "5400", "1h30m", "2.5"]), ODD_WORDS)),
            _option("--runs", mostly(st.integers(1, 20).map(str), ODD_INTS)),
            _option("--seed", mostly(st.integers(0, 2**63).map(str), ODD_INTS)),
            _option("--max-instances", mostly(st.integers(1, 5).map(str), ODD_INTS)),
            _option("--confidence", mostly(st.sampled_from(["p95", "mean"]), ODD_WORDS)),
            _option("--preprovision", mostly(st.sampled_from(["off", "on", "auto"]), ODD_WORDS)),
            _option("--objective", mostly(st.sampled_from(["cost", "energy"]), ODD_WORDS)),
            _option("--json", mostly(st.just(out), paths)),
        ),
        "plan --from-run": line(
            st.just(["plan", sha, "--deadline", "1h"]),
            _option("--from-run", ODD_WORDS),
            _option("--instance", mostly(st.just("aws:p3.8xlarge"), ODD_WORDS)),
            _option("--scaling", mostly(st.floats(0.1, 1).map(repr), ODD_FLOATS)),
            _option("--startup", mostly(st.floats(0, 300).map(repr), ODD_FLOATS)),
            _option("--store", stores),
        ),
        "simulate": line(
            st.just(["simulate", str(files["asha"])]),
            _option("--curves", mostly(st.just(str(files["curves"])), paths)),
            _option("--workers", mostly(st.integers(1, 50).map(str), ODD_INTS)),
            _option("--seeds", mostly(st.integers(1, 3).map(str), ODD_INTS)),
            _option("--target", mostly(st.floats(0, 1).map(repr), ODD_FLOATS)),
            _option("--target-top", mostly(st.floats(0, 1).map(repr), ODD_FLOATS)),
            _option("--pruners", mostly(st.sampled_from(["sha,asha", "asha", "hyperband"]), ODD_WORDS)),
            st.sampled_from([[], ["--json"]]),
        ),
        "compare": line(
            st.just(["compare", "-q", sha]),
            st.just(["--store"]),
            # A store URL that resolves but cannot be made fails each run in turn: not here.
            ODD_STORES.filter(lambda u: not u.startswith("sqlite:///")).map(lambda u: [u]),
            _option("--systems", mostly(st.sampled_from(["native", "native,optuna"]), ODD_WORDS)),
            _option("--repeat", mostly(st.integers(1, 3).map(str), ODD_INTS)),
            _option("--target", mostly(st.floats(0, 1).map(repr), ODD_FLOATS)),
            _option("--results", paths),
        ),
        "run": line(
            st.just(["run", "-q", "--no-plots"]),
            st.just(["--store"]),
            ODD_STORES.map(lambda u: [u]),
            _option("--results", paths),
            _option("--plan", mostly(st.just(str(files["plan"])), paths)),
            st.sampled_from([[], ["--replan"]]),
            mostly(st.just(sha), paths).map(lambda p: [p]),
        ),
        "resume": line(st.just(["resume", "-q", "--no-plots"]), ODD_WORDS.map(lambda r: [r]), _option("--store", stores)),
        "runs": line(st.just(["runs"]), _option("--limit", mostly(st.integers(1, 99).map(str), ODD_INTS)), _option("--store", stores)),
        "report": line(
            st.just(["report"]),
            ODD_WORDS.map(lambda r: [r]),
            _option("--store", stores),
            FLAGS,
            _option("--out", paths),
            _option("--results", paths),
        ),
        "curves": line(st.just(["curves"]), ODD_WORDS.map(lambda r: [r]), _option("--out", paths), _option("--store", stores)),
        # An instance that is not in the price sheet: refused before minutes of measuring.
        "profile": line(
            st.just(["profile", sha, "--instance"]),
            ODD_WORDS.filter(lambda w: ":" not in w).map(lambda w: [w]),
            _option("--gpus", mostly(st.sampled_from(["1", "1,2", "2,1,1"]), ODD_WORDS)),
            _option("--epochs", mostly(st.integers(1, 9).map(str), ODD_INTS)),
            _option("--startups", mostly(st.integers(1, 9).map(str), ODD_INTS)),
            _option("--scaling", mostly(st.floats(0.1, 1).map(repr), ODD_FLOATS)),
            _option("--out", paths),
        ),
        "validate": line(st.just(["validate"]), mostly(st.just(sha), paths).map(lambda p: [p])),
        # A workload that is not in the trace: refused before a server starts.
        "bso simulate": line(
            st.just(["bso", "simulate", "--workload", "nosuch"]),
            _option("--recurrences", mostly(st.integers(1, 9).map(str), ODD_INTS)),
            _option("--seed", mostly(st.integers(0, 2**63 - 1).map(str), ODD_INTS)),
            _option("--eta", mostly(st.floats(0, 1).map(repr), ODD_FLOATS)),
            _option("--beta", mostly(st.floats(1, 5).map(repr), ODD_FLOATS)),
            _option("--protocol", mostly(st.sampled_from(["epoch", "zeus"]), ODD_WORDS)),
            _option("--gpu", mostly(st.sampled_from(["v100", "a40"]), ODD_WORDS)),
        ),
        # Any words at all (but those that start a server, or wait for one).
        "anything": st.lists(
            st.sampled_from(["run", "runs", "report", "validate", "plan", "curves", "bso", "--help", "-q", "x"])
            | ODD_WORDS.filter(lambda w: w.strip() not in ("serve", "migrate")),
            max_size=4,
        ),
    }  # fmt: skip


def _check(files: dict[str, Path], args: list[str], monkeypatch: Any, capsys: Any) -> None:
    work = files["work"]
    monkeypatch.chdir(work)  # where a default results/ or basht.db would go
    before = files_in(work.parent)
    code, err = run_cli(monkeypatch, capsys, *args)
    check_outcome(code, err)
    if code == 2:  # nothing written, no store made or changed
        assert files_in(work.parent) == before, args


COMMANDS = ["plan", "plan --from-run", "simulate", "compare", "run", "resume", "runs", "report",
            "curves", "profile", "validate", "bso simulate", "anything"]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
@fuzz_settings(20)
@given(data=st.data())
def test_any_command_line_exits_0_or_2_in_one_line(
    command: str,
    data: st.DataObject,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    files = _setup(tmp_path)
    args = data.draw(_commands(files)[command], label="args")
    assume(args not in ([], ["bso"]))  # a command group given no command shows its help
    _check(files, args, monkeypatch, capsys)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # Usage errors were click's four lines (usage, hint, blank, error).
        (["plan", "x.yaml", "--runs", "0", "--deadline", "1h"], "Invalid value for '--runs'"),
        (["runs", "--limit", "x"], "Invalid value for '--limit'"),
        (["run"], "Missing argument"),
        (["nosuch"], "No such command 'nosuch'"),
        # These took minutes and gigabytes (a billion simulated workers, a list of 2**63 seeds).
        (["simulate", "x.yaml", "--curves", "c.json", "--workers", "1000000000"], "--workers"),
        (["simulate", "x.yaml", "--curves", "c.json", "--seeds", "1000000000"], "--seeds"),
        (["compare", "x.yaml", "--repeat", str(2**63)], "--repeat"),
        # Past a database's 64-bit LIMIT: a traceback from the driver.
        (["runs", "--limit", str(2**63)], "--limit"),
    ],
    ids=["range", "not-a-number", "missing-argument", "unknown-command", "workers", "seeds",
         "repeat", "limit"],
)  # fmt: skip
def test_a_bad_option_is_one_line_that_names_it(
    args: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, err = run_cli(monkeypatch, capsys, *args)
    check_outcome(code, err)
    assert code == 2 and said in err and "--help" in err, err


@pytest.mark.parametrize("option", ["--runs", "--max-instances"])
def test_a_plan_too_large_to_say_in_a_float_is_one_line(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """A 401-digit count once overflowed the float its message was written with."""
    files = _setup(tmp_path)
    code, err = run_cli(
        monkeypatch, capsys, "plan", str(files["sha"]), "--profile", str(files["profile"]),
        "--deadline", "1h", option, "1" + "0" * 400,
    )  # fmt: skip
    check_outcome(code, err)
    assert code == 2 and "job too large to plan" in err and "a 401-digit number of" in err, err
