"""The monitor finds a worker's children from /proc/<pid>/task/*/children, as psutil would find
them by scanning every process, and counts their CPU."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from basht.energy import monitor
from basht.energy.monitor import live_children, own_cpu_s, tree_cpu_s

pytestmark = pytest.mark.integration  # real processes

#: Half a second of CPU, a line to say so, then asleep until killed.
BUSY = (
    "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"
    "print('busy', flush=True)\ntime.sleep(60)"
)


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE)
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
    assert child.stdout is not None and child.stdout.readline() == b"busy\n"
    me = psutil.Process()
    own = sum(me.cpu_times()[:4])  # its own, and its children's that ended (reaped)
    assert tree_cpu_s(me) - own >= 0.45  # the live child's half second, at least


def test_an_ended_process_has_no_children() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = psutil.Process(proc.pid)
    proc.wait()
    with pytest.raises(psutil.NoSuchProcess):
        live_children(gone)


#: A short burst of CPU, then its own CPU seconds as it reads them, then asleep until killed.
BURST = (
    "import time\nend = time.process_time() + 0.033\nwhile time.process_time() < end: pass\n"
    "print(time.process_time(), flush=True)\ntime.sleep(60)"
)


@pytest.mark.skipif(not monitor._CPU_CLOCKS, reason="reads another process's CPU clock (Linux)")
def test_a_process_cpu_time_is_read_finer_than_the_tick() -> None:
    """/proc/<pid>/stat counts 10 ms ticks; a trial's few-millisecond epochs must not book 0 J
    at one report and a whole tick at the next."""
    proc = subprocess.Popen([sys.executable, "-c", BURST], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        says = float(proc.stdout.readline())
        read = own_cpu_s(proc.pid, ticks_s=-1.0)
        assert says <= read < says + 0.005
    finally:
        proc.kill()
        proc.wait()
    assert own_cpu_s(proc.pid, ticks_s=-1.0) == -1.0  # ended and reaped: the ticks' answer
