"""The unmodified Zeus client (zeus[bso], pydantic 1, in its own venv) against `basht bso serve`.

Creating that venv takes about 40 s, too slow for every CI run, so this test runs
benchmarks/zeus_client_compat.py only where the venv already exists (make it with
`python benchmarks/zeus_client_compat.py`, or point BASHT_ZEUS_VENVS at a folder holding one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.bso.support import ROOT, basht_env
from tests.tools import requires_tool

pytestmark = pytest.mark.integration


@requires_tool("zeus-venv")
def test_zeus_client_completes_a_recurring_job(tmp_path):
    out = tmp_path / "compat.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "zeus_client_compat.py"),
            "--recurrences",
            "4",
            "--out",
            str(out),
        ],
        env=basht_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert all(result["checks"].values()), result["checks"]
    runs = result["runs"]
    assert [r["recurrence"] for r in runs if r["converged"]] == [1, 2, 3, 4]
    assert any(not r["converged"] for r in runs)  # imagenet's 64 fails: the client relaunched
