"""The outside tools some tests need, looked for in one place.

`requires_tool(name)` marks a test that skips, saying what is missing and how to get it, where
the tool is not there; `need_tool(name)` does the same from inside a fixture or helper and returns
where the tool is. A tool is looked for once, when the first test that needs it starts (so a
lane that deselects those tests never looks).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[1]


def _which(*names: str) -> str | None:
    return next((path for name in names if (path := shutil.which(name))), None)


def _pg_bindir() -> str | None:
    """Where initdb and pg_ctl are: on PATH (links followed, to the folder with the other
    tools), or the newest /usr/lib/postgresql/*/bin (Debian)."""
    if shutil.which("initdb") and (pg_ctl := shutil.which("pg_ctl")):
        return str(Path(pg_ctl).resolve().parent)
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for bindir in reversed(candidates):
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            return str(bindir)
    return None


def _cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return "cuda:0" if torch.cuda.device_count() > 0 else None


def _zeus_venv() -> str | None:
    """The Zeus client's virtual environment (benchmarks/zeus_venv.py), where it already exists."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from zeus_venv import zeus_python
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    try:
        return str(zeus_python("client", create=False))
    except (FileNotFoundError, subprocess.SubprocessError):
        return None


@dataclass(frozen=True)
class Tool:
    find: Callable[[], str | None]  # where the tool is, or None
    missing: str  # the skip reason where it is not


TOOLS: dict[str, Tool] = {
    "prometheus": Tool(
        lambda: _which("prometheus"), "prometheus is not installed (apt-get install prometheus)"
    ),
    "postgresql": Tool(
        _pg_bindir, "PostgreSQL binaries (initdb, pg_ctl) not found (apt-get install postgresql)"
    ),
    "chromium": Tool(
        lambda: _which("chromium", "chromium-browser"),
        "headless Chromium is not installed (apt-get install chromium)",
    ),
    "ip": Tool(lambda: _which("ip"), "`ip` is not installed (apt-get install iproute2)"),
    "cuda": Tool(_cuda, "needs a CUDA GPU"),
    "zeus-venv": Tool(
        _zeus_venv,
        "no Zeus client virtualenv: run `python benchmarks/zeus_client_compat.py` once "
        "(or point BASHT_ZEUS_VENVS at a folder holding one)",
    ),
}


@functools.cache
def find_tool(name: str) -> str | None:
    """Where tool `name` (a key of TOOLS) is, or None."""
    return TOOLS[name].find()


class _Missing:
    """True where the tool is missing; asked only when a test that needs it is set up."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __bool__(self) -> bool:
        return find_tool(self.name) is None


def requires_tool(name: str) -> pytest.MarkDecorator:
    """Skip the marked test (or module, as `pytestmark`) where tool `name` is missing."""
    import pytest

    return pytest.mark.skipif(_Missing(name), reason=TOOLS[name].missing)


def need_tool(name: str) -> str:
    """Where tool `name` is; skips the test (or the fixture's tests) where it is missing."""
    where = find_tool(name)
    if where is None:
        skip(TOOLS[name].missing)
    return where


def skip(reason: str) -> NoReturn:
    """Skip the test; outside pytest (a benchmark reusing these helpers, which import pytest
    nowhere) fail with the reason instead."""
    if "pytest" in sys.modules:
        import pytest

        pytest.skip(reason)
    raise RuntimeError(reason)


def is_root() -> bool:
    return os.geteuid() == 0
