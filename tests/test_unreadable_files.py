"""A file the user may not read (mode 000) is one line naming it and saying permission denied,
exit code 2, whatever kind of input it is, and nothing is stored.

Root reads any file whatever its mode, so as root the CLI runs without the capabilities that
let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), by `setpriv`; an unprivileged user's Python
could not be run from root's home, where it often lives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bad_input import TINY_PROFILE, TINY_SHA, check_outcome, run_cli, tiny_plan
from tests.cli import ROOT, cli_env

#: What each kind of input is given to, and the file made unreadable: (command line, file).
KINDS = [
    "experiment",
    "plan in the file",
    "plan given to run",
    "profile",
    "carbon series",
    "curves",
]
DROP_READ_ANY = "-dac_override,-dac_read_search"


@pytest.fixture
def files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    store = {"store": f"sqlite:///{tmp_path / 'refused.db'}"}
    written = {
        "bare": (tmp_path / "bare.yaml", yaml.safe_dump(TINY_SHA | store)),
        "named": (tmp_path / "named.yaml", yaml.safe_dump(TINY_SHA | store | {"plan": "p.json"})),
        "plan": (tmp_path / "p.json", json.dumps(tiny_plan())),
        "profile": (tmp_path / "profile.yaml", yaml.safe_dump(TINY_PROFILE)),
        "csv": (tmp_path / "c.csv", "timestamp,g_per_kwh\n0,380\n"),
        "carbon": (
            tmp_path / "carbon.yaml",
            yaml.safe_dump(TINY_SHA | store | {"measure": {"carbon": {"csv": "c.csv"}}}),
        ),
        "curves": (tmp_path / "curves.json", "{}"),
    }
    for path, text in written.values():
        path.write_text(text)
    paths = {name: path for name, (path, _) in written.items()}
    yield paths
    for path in paths.values():
        path.chmod(0o644)  # so that the folder can be removed


def _case(kind: str, files: dict[str, Path]) -> tuple[list[str], Path]:
    """The command line that reads the `kind` of input, and the file it reads."""
    bare, plan = str(files["bare"]), str(files["plan"])
    return {
        "experiment": (["validate", bare], files["bare"]),
        "plan in the file": (["validate", str(files["named"])], files["plan"]),
        "plan given to run": (["run", "-q", "--no-plots", "--plan", plan, bare], files["plan"]),
        "profile": (
            ["plan", bare, "--profile", str(files["profile"]), "--deadline", "1h"],
            files["profile"],
        ),
        "carbon series": (["run", "-q", "--no-plots", str(files["carbon"])], files["csv"]),
        "curves": (["simulate", bare, "--curves", str(files["curves"])], files["curves"]),
    }[kind]


def _check(code: int, err: str, unreadable: Path) -> None:
    check_outcome(code, err, unreadable)
    said = err.lower()  # typer checks an option's path itself: "... is not readable"
    assert code == 2 and ("permission denied" in said or "is not readable" in said), err
    assert not (unreadable.parent / "refused.db").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file (see the other test)")
@pytest.mark.parametrize("kind", KINDS)
def test_an_unreadable_file_is_one_line_saying_permission_denied(
    kind: str, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    args, unreadable = _case(kind, files)
    unreadable.chmod(0)
    _check(*run_cli(monkeypatch, capsys, *args), unreadable)


@pytest.mark.integration
@pytest.mark.parametrize("kind", KINDS)
def test_an_unreadable_file_is_one_line_saying_permission_denied_as_a_user_runs_basht(
    kind: str, files: dict[str, Path]
) -> None:
    args, unreadable = _case(kind, files)
    unreadable.chmod(0)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root needs setpriv (util-linux) to give up reading any file")
        prefix = [setpriv, f"--inh-caps={DROP_READ_ANY}", f"--bounding-set={DROP_READ_ANY}"]
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "basht.cli", *args],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    _check(proc.returncode, proc.stderr, unreadable)
