"""The monitor finds a worker's children from /proc/<pid>/task/*/children, as psutil would find
them by scanning every process, and counts their CPU."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from basht.energy import monitor
from basht.energy.monitor import live_children, tree_cpu_s

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(60)"


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    yield proc
    proc.kill()
    proc.wait()


def test_the_children_are_psutils(child, monkeypatch) -> None:
    me = psutil.Process()
    found = {p.pid for p in live_children(me)}
    assert child.pid in found
    monkeypatch.setattr(monitor, "_PROC_CHILDREN", False)  # a kernel without the file
    assert {p.pid for p in live_children(me)} == found == {p.pid for p in me.children()}


def test_a_busy_child_counts_in_the_tree(child) -> None:
    me = psutil.Process()
    before = tree_cpu_s(me) - sum(t for t in me.cpu_times()[:2])
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).cpu_times().user < 0.25 and time.monotonic() < deadline:
        time.sleep(0.05)
    after = tree_cpu_s(me) - sum(t for t in me.cpu_times()[:2])
    assert after - before >= 0.2


def test_an_ended_process_has_no_children() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = psutil.Process(proc.pid)
    proc.wait()
    with pytest.raises(psutil.NoSuchProcess):
        live_children(gone)
