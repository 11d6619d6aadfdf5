"""`python -m basht ...` is the same CLI as `basht ...`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli import ROOT, cli_env

pytestmark = pytest.mark.integration


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "basht", *args],
        cwd=ROOT,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_basht_validates_like_the_basht_command():
    proc = _module("validate", "examples/digits-asha.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "digits-asha" in proc.stdout


def test_python_m_basht_reports_bad_input_in_one_line_with_exit_code_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsearch: {metric: accuracy, mode: sideways}\n")
    proc = _module("validate", str(bad))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
