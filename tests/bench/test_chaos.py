"""Crash consistency in the suite: `benchmarks/chaos.py` run short. A deterministic ASHA run
SIGKILLed at failpoints and at random moments, resumed each time without `--store`, ends as an
uninterrupted run does, with nothing it had stored lost or changed; trials that kill, abort or
starve their worker fail with their reason while the run goes on; on SQLite and on PostgreSQL,
whose server is also stopped and started again under a run."""

from __future__ import annotations

import sys

import pytest

from tests.cli import ROOT
from tests.postgres import postgres_server

sys.path.insert(0, str(ROOT / "benchmarks"))
import chaos  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

pytestmark = pytest.mark.integration


def test_a_run_killed_again_and_again_ends_as_an_uninterrupted_one(tmp_path):
    outcome = chaos.killed_run(
        f"sqlite:///{tmp_path / 'stores' / 'chaos.db'}",
        tmp_path / "killed",
        trials=24,
        kills=6,
        seed=3,
        say=lambda _: None,
    )
    assert outcome.kills == 6 and outcome.same_result and outcome.leftovers == 0
    assert outcome.checkpoints_checked > 0 and outcome.replayed > 0


def test_trials_that_kill_abort_or_starve_their_worker_fail_with_their_reason(tmp_path):
    outcome = chaos.faulty_run(
        f"sqlite:///{tmp_path / 'stores' / 'faults.db'}",
        tmp_path / "faults",
        trials=24,
        fault_every=2,
    )
    assert set(outcome.faults) == set(chaos.FAULT_REASONS), outcome.faults
    assert outcome.completed + sum(outcome.faults.values()) == outcome.trials == 24
    assert outcome.leftovers == 0


def test_on_postgres_with_its_server_restarted_under_the_run(tmp_path):
    with postgres_server() as server:
        outcome = chaos.killed_run(
            server.create_database("chaos"),
            tmp_path / "killed",
            trials=24,
            kills=3,
            seed=5,
            restart_server=server.restart,
            say=lambda _: None,
        )
    assert outcome.kills == 3 and outcome.server_restarts == 1 and outcome.same_result
