"""The latency wrappers: decorator and context manager, aborted flag on exceptions."""

from __future__ import annotations

import asyncio
import threading
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


def test_recursive_calls_and_nested_blocks_each_keep_their_own_start():
    records: list[Timing] = []

    @timed("walk", records.append)
    def walk(n: int) -> int:
        time.sleep(0.01)
        return n if n == 0 else walk(n - 1)

    walk(2)
    inner, middle, outer = (t.duration_s for t in records)
    assert inner < middle < outer and outer >= 0.03

    timer = timed("block")
    with timer:
        time.sleep(0.02)
        with timer:
            pass
    assert timer.history[1].duration_s >= 0.02 > timer.history[0].duration_s


def test_calls_from_threads_are_timed_apart():
    records: list[Timing] = []
    started = threading.Event()

    @timed("call", records.append)
    def call(long: bool) -> None:
        if long:
            started.set()
            time.sleep(0.05)

    worker = threading.Thread(target=call, args=(True,))
    worker.start()
    started.wait()
    time.sleep(0.02)  # the short call starts while the long one runs
    call(False)
    worker.join()
    assert max(t.duration_s for t in records) >= 0.05


def test_an_async_function_is_timed_until_its_result():
    records: list[Timing] = []

    @timed("fetch", records.append)
    async def fetch() -> int:
        await asyncio.sleep(0.02)
        return 7

    assert asyncio.run(fetch()) == 7
    (t,) = records
    assert t.duration_s >= 0.02 and not t.aborted
