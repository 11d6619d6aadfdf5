"""The `basht` command line run in a subprocess, as a user runs it, for the tests that need it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from basht.store import Store

ROOT = Path(__file__).resolve().parents[1]


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cli_env(**extra: str) -> dict[str, str]:
    """This environment, with Basht importable from the checkout, wide tables (no wrapping) and
    no plots after `basht run` (the tests that look at plots ask for them)."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
        "BASHT_PLOTS": "0",
        **extra,
    }


def basht(
    *args: str,
    cwd: Path | str = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "basht.cli", *args],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_in_background(path: Path, cwd: Path) -> subprocess.Popen[str]:
    """`basht run -q PATH` as a child that takes Ctrl-C like a terminal's foreground job."""
    return subprocess.Popen(
        [sys.executable, "-m", "basht.cli", "run", "-q", str(path)],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell that starts jobs in the background ignores SIGINT for them; undo that here.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_trials(
    store_url: str, db: Path, enough: Callable[[Store, Any], bool], timeout_s: float = 120.0
) -> None:
    """Poll the store until `enough(store, run)` holds for the first run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if db.exists():
            store = Store(store_url)
            runs = store.list_runs()
            if runs and enough(store, runs[0]):
                return
    raise AssertionError(f"the run in {store_url} did not get that far in {timeout_s:.0f} s")
