"""`basht.run` from a user's script, as a user runs it: `python script.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from basht.store import Store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import json, sys
import basht

spec = json.loads(sys.argv[1])
{call}
"""


def _run_script(tmp_path: Path, spec: dict, call: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "tune.py"
    script.write_text(_SCRIPT.format(call=call))
    return subprocess.run(
        [sys.executable, str(script), json.dumps(spec)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_script_guarded_by_main_runs(spec, tmp_path):
    call = 'if __name__ == "__main__":\n    print(basht.run(spec).best_value)'
    proc = _run_script(tmp_path, spec, call)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = Store(spec["store"]).list_runs()
    assert run.status == "completed"
    assert float(proc.stdout.split()[-1]) == pytest.approx(run.best_value)


def test_an_unguarded_script_is_told_why_and_starts_one_run_not_one_per_worker(spec, tmp_path):
    proc = _run_script(tmp_path, spec, "basht.run(spec)")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "worker 0 exited while starting" in last, proc.stderr[-3000:]
    assert 'put the call of basht.run under `if __name__ == "__main__":`' in last
    (run,) = Store(spec["store"]).list_runs()  # the workers started none of their own
    assert run.status == "failed"
