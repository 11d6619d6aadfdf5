"""The latency wrappers: decorator and context manager, aborted flag on exceptions."""

from __future__ import annotations

import time

import pytest

from basht.bench import Timing, timed


def test_context_manager_records_duration_and_wall_clock():
    records: list[Timing] = []
    before = time.time()
    with timed("load", records.append):
        time.sleep(0.02)
    (t,) = records
    assert t.name == "load" and not t.aborted
    assert 0.02 <= t.duration_s < 1.0
    assert before <= t.start <= t.end <= time.time() + 1e-3


def test_decorator_times_every_call():
    timer = timed("train")

    @timer
    def train(n: int) -> int:
        return n * 2

    assert train(2) == 4 and train(3) == 6
    assert len(timer.history) == 2


def test_exception_is_recorded_as_aborted_and_passes_through():
    records: list[Timing] = []
    with pytest.raises(KeyboardInterrupt), timed("run", records.append):
        raise KeyboardInterrupt
    assert records[0].aborted and records[0].error == "KeyboardInterrupt"
