"""The dashboard started as a user starts it (`basht dashboard --port 0`), and waiting for what
a test needs without racing the machine's speed."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli import cli_env

#: A hung step fails the test after this long (it never bounds how fast anything must be).
HANG_S = 180.0


def wait_for(what: str, check: Any) -> Any:
    """What `check()` returns once it is true; fails the test if it never is."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def start_dashboard(cwd: Path, store_url: str) -> tuple[subprocess.Popen[str], str]:
    """`basht dashboard` on a free port, and the address it says it serves at."""
    log = cwd / "dashboard.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", "dashboard", "--store", store_url, "--port", "0"],
        cwd=cwd,
        env=cli_env(),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )

    def url() -> str | None:
        if proc.poll() is not None:
            raise AssertionError(f"the dashboard ended: {log.read_text()}")
        found = re.search(r"http://127\.0\.0\.1:\d+/", log.read_text())
        return found.group(0) if found else None

    return proc, wait_for("the dashboard says where it serves", url)
