"""The `basht` command line run in a subprocess, as a user runs it, for the tests that need it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_env(**extra: str) -> dict[str, str]:
    """This environment, with Basht importable from the checkout and wide tables (no wrapping)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **extra}


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
