"""The carbon gate: how the Tuner's measurements become the shifter's work estimate."""

from __future__ import annotations

import logging

import pytest

from basht.energy.carbon import TimeSeriesIntensity
from basht.energy.shifting import CarbonShifter, PerfectForecast
from basht.tune.carbon_gate import FULL_SPEED, CarbonGate

T0 = 1_700_006_400.0  # a whole hour
H = 3600.0
HELD = "dirty: held"


def dirty_then_clean(clean_after_s: float) -> TimeSeriesIntensity:
    return TimeSeriesIntensity(
        [T0 - 86400, T0, T0 + clean_after_s, T0 + 86400], [500, 500, 50, 50], source="test"
    )


def gate(deadline_s: float, total_epochs: float, chain_epochs: float | None = None) -> CarbonGate:
    shifter = CarbonShifter(
        PerfectForecast(dirty_then_clean(2 * H)), T0 + deadline_s, 2, step_s=900.0
    )
    return CarbonGate(shifter, 2, total_epochs, chain_epochs=chain_epochs)


def test_every_worker_runs_until_an_epoch_is_measured() -> None:
    g = gate(10 * H, 100)
    assert g.allowed(T0, 0, None)[0] == 2
    assert g.log[-1]["reason"] == "measuring an epoch"


def test_a_measured_job_with_slack_waits_for_the_clean_hours() -> None:
    g = gate(10 * H, 100)
    g.allowed(T0, 0, None)
    workers, until = g.allowed(T0 + 60, 2, 30.0)  # 98 epochs of ~30 s: under an hour of work
    assert workers == 0 and g.log[-1]["reason"] == HELD and until == T0 + 900


def test_a_trial_chain_is_timed_at_the_longest_epoch_measured() -> None:
    # Fifty epochs measured, mean 88.8 s, ten left for the last trial. One epoch took 1,500 s:
    # if the last trial's ten are that slow they need over four hours in sequence, which only
    # starting now fits before the deadline.
    g = gate(4.5 * H, 60, chain_epochs=10)
    g.allowed(T0, 0, None)
    g.allowed(T0 + 1, 1, 1500.0)
    workers, _ = g.allowed(T0 + 2, 50, 88.8)  # 49 more, of 60 s each
    assert workers == 2 and g.log[-1]["reason"] == FULL_SPEED
    # The same mean with no long epoch waits for the clean hours.
    even = gate(4.5 * H, 60, chain_epochs=10)
    even.allowed(T0, 0, None)
    assert even.allowed(T0 + 2, 50, 88.8)[0] == 0 and even.log[-1]["reason"] == HELD


def test_a_deadline_the_measured_work_cannot_meet_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    g = gate(1 * H, 1000)
    g.allowed(T0, 0, None)
    with caplog.at_level(logging.WARNING, logger="basht.tune.carbon_gate"):
        assert g.allowed(T0 + 10, 2, 30.0)[0] == 2  # 998 epochs x 30 s on 2 workers: 4 h
        g.allowed(T0 + 900, 40, 30.0)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "schedule.deadline cannot be met" in lines[0], lines
    assert "at the earliest at full width" in lines[0]


def test_a_feasible_deadline_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    g = gate(10 * H, 100)
    g.allowed(T0, 0, None)
    with caplog.at_level(logging.WARNING, logger="basht.tune.carbon_gate"):
        g.allowed(T0 + 60, 2, 30.0)
    assert not caplog.records


def test_the_cautious_bound_runs_full_width_but_only_the_mean_says_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two workers allowed for 1,000 s that ended two epochs of 30 s: the guard's bound prices an
    # epoch at the 1,000 s the workers were allowed per epoch (98 left: over 13 h), and runs at
    # full width; the mean (98 x 30 s on 2 workers: 25 minutes) fits the 2 h, so nothing is said.
    g = gate(2 * H, 100)
    g.allowed(T0, 0, None)
    with caplog.at_level(logging.WARNING, logger="basht.tune.carbon_gate"):
        assert g.allowed(T0 + 1000, 2, 30.0)[0] == 2 and g.log[-1]["reason"] == FULL_SPEED
    assert not caplog.records
