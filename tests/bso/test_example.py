"""examples/bso/train_digits.py, run again and again against a real server, as a user would."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.bso.support import ROOT, basht_env
from tests.postgres import free_port

pytest.importorskip("torch")
pytest.importorskip("sklearn")

pytestmark = pytest.mark.integration


def test_the_digits_job_recurs_and_the_server_learns(server):
    outcomes = []
    for seed in range(2):  # two recurrences: the default size, then the next one down
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "bso" / "train_digits.py"),
                "--server",
                server.url,
                "--job-id",
                "digits-example",
                "--seed",
                str(seed),
            ],
            env=basht_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode in (0, 3), proc.stderr[-2000:]
        outcomes.append(proc.returncode)
        assert "batch size" in proc.stdout
    state = httpx.get(f"{server.url}/jobs", params={"job_id": "digits-example"}).json()
    assert [t["batch_size"] for t in state["trials"]][:2] == [32, 16]  # pruning: down from 32
    assert all(t["status"] == "Succeeded" for t in state["trials"])
    assert outcomes[0] == 0  # the first run has no cost bound: it trains to the target


def test_a_server_that_cannot_be_reached_is_one_line():
    port = free_port()  # bound and let go: nothing listens there
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "bso" / "train_digits.py"),
            "--server",
            f"http://127.0.0.1:{port}",
        ],
        env=basht_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: cannot reach the BSO server at http://127.0.0.1:{port}: "
        "[Errno 111] Connection refused"
    )
