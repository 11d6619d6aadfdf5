"""Separate virtual environments that hold the unmodified Zeus package (it needs pydantic 1).

Created on first use under ~/.cache/basht/ (or $BASHT_ZEUS_VENVS) with `python -m venv` and pip,
never installed into the Python that runs Basht. About 40 s each the first time.

* `client`: `zeus[bso]`, the stock client and the legacy simulator, and nothing else.
* `server`: also Zeus's BSO server (`bso-server` extra) with aiosqlite and greenlet, to run
  Zeus's own server code as the reference for the golden data.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ZEUS_VERSION = "0.16.0"  # the release studied in the research brief (2026-07-07)
KINDS = {
    "client": (
        "zeus-venv",
        [f"zeus[bso]=={ZEUS_VERSION}"],
        "import zeus.optimizer.batch_size.client, zeus._legacy.simulate",
    ),
    "server": (
        "zeus-server-venv",
        [f"zeus[bso,bso-server]=={ZEUS_VERSION}", "aiosqlite", "greenlet"],
        "import zeus._legacy.simulate, fastapi, aiosqlite, greenlet",
    ),
}
ROOT = Path(os.environ.get("BASHT_ZEUS_VENVS", Path.home() / ".cache" / "basht"))


def venv_path(kind: str = "client") -> Path:
    return ROOT / KINDS[kind][0]


def zeus_python(kind: str = "client", create: bool = True) -> Path:
    """The venv's python, with Zeus importable; built first if missing and `create`."""
    _, requirements, probe = KINDS[kind]
    venv = venv_path(kind)
    python = venv / "bin" / "python"
    if python.exists() and _works(python, probe):
        return python
    if not create:
        raise FileNotFoundError(f"no Zeus {kind} virtual environment at {venv}")
    print(f"creating {venv} with {' '.join(requirements)} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        + requirements,
        check=True,
    )
    if not _works(python, probe):
        raise RuntimeError(f"Zeus does not import in {venv}")
    return python


def _works(python: Path, probe: str) -> bool:
    check = f"{probe}; import pydantic; print(pydantic.VERSION)"
    result = subprocess.run([str(python), "-c", check], capture_output=True, text=True)
    return result.returncode == 0 and result.stdout.strip().startswith("1.")
