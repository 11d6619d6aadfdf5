"""The estimate model, the monitor's windows, and energy attribution that adds up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from basht.energy import CombinedSource, EnergyMonitor, EstimateModel, EstimateSource, Reading
from basht.energy import estimate as estimate_module
from basht.energy.monitor import UNMEASURED


class CountingSource:
    """A meter that gains `watts` joules per second of wall time."""

    name = "estimate"

    def __init__(self, watts: float = 100.0):
        self.watts, self.start = watts, time.time()

    def read(self) -> Reading:
        now = time.time()
        return Reading(now, {"cpu": (now - self.start) * self.watts})

    def max_interval_s(self):
        return None

    def describe(self) -> str:
        return "counting"

    def close(self) -> None:
        pass


def test_the_estimate_model_has_an_idle_floor_and_a_linear_rise():
    m = EstimateModel(
        vcpus=4, memory_gb=8, idle_w_per_vcpu=1.0, max_w_per_vcpu=4.0, memory_w_per_gb=0.5
    )
    assert m.cpu_power_w(0.0) == 4.0
    assert m.cpu_power_w(0.5) == pytest.approx(10.0)
    assert m.cpu_power_w(2.0) == 16.0  # clamped
    assert m.memory_power_w() == 4.0 and m.max_power_w == 20.0


def test_the_estimate_integrates_model_power_over_measured_utilisation(monkeypatch):
    times = iter([(0.0, 100.0), (50.0, 200.0)])  # busy, total CPU seconds: u = 0.5
    monkeypatch.setattr(estimate_module, "busy_and_total_s", lambda: next(times))
    clock = iter([1000.0, 1010.0])
    monkeypatch.setattr(estimate_module.time, "time", lambda: next(clock))
    model = EstimateModel(
        vcpus=2, memory_gb=10, idle_w_per_vcpu=1.0, max_w_per_vcpu=3.0, memory_w_per_gb=0.1
    )
    source = EstimateSource(model)
    reading = source.read()
    assert reading.energy_j == pytest.approx({"cpu": 2 * (1 + 2 * 0.5) * 10, "memory": 10.0})


def _monitor(**kwargs) -> EnergyMonitor:
    return EnergyMonitor(
        source=CombinedSource([CountingSource()]), sample_interval_s=0.05, **kwargs
    )


def test_vm_guest_time_is_counted_once(monkeypatch):
    # Linux puts guest time in user (and guest_nice in nice) as well: half the host busy running
    # a VM is u = 0.5, not (50 + 50) / (100 + 50).
    from collections import namedtuple

    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    monkeypatch.setattr(
        estimate_module.psutil,
        "cpu_times",
        lambda: Times(50.0, 0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 0.0, 50.0, 0.0),
    )
    assert estimate_module.busy_and_total_s() == (50.0, 100.0)


def test_booking_splits_active_and_idle_and_adds_up():
    monitor = _monitor(slots=2)
    monitor.close()
    monitor.accounts.clear()
    monitor._slots[0].trial = 7
    monitor._book("cpu", 100.0, u=0.5, shares=[0.3, 0.2], intensity=400.0)
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    # Active 50 J: trial 7 used 30 % of the busy CPU; the empty slot's 20 % and the rest is
    # overhead. Idle 50 J: half per slot, busy slot -> baseline, empty slot -> allocation.
    assert got == {
        ("trial", 7, "cpu"): 15.0,
        ("overhead", None, "cpu"): 35.0,
        ("baseline", None, "cpu"): 25.0,
        ("allocation", None, "cpu"): 25.0,
    }
    grams = sum(a.emissions_g for a in monitor.accounts.values())
    assert grams == pytest.approx(100 / 3.6e6 * 400)


def test_windows_measure_the_energy_between_begin_and_end():
    monitor = _monitor()
    monitor.begin_window("epoch")
    time.sleep(0.3)
    m = monitor.end_window("epoch")
    monitor.close()
    assert m.source == "estimate"
    assert m.energy_j == pytest.approx(100.0 * m.time_s, rel=0.05)
    assert 0.25 < m.time_s < 1.0


@pytest.mark.integration
def test_real_busy_processes_get_their_energy_and_everything_adds_up():
    busy = [
        subprocess.Popen(
            [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"]
        )
        for _ in range(2)
    ]
    monitor = EnergyMonitor(
        source=CombinedSource([EstimateSource()]), sample_interval_s=0.1, slots=3
    )
    monitor.assign(0, busy[0].pid, 0)
    monitor.assign(1, busy[1].pid, 1)
    time.sleep(1.5)
    monitor.assign(0, None, None)
    monitor.assign(1, None, None)
    monitor.close()
    for p in busy:
        p.kill()
        p.wait()
    accounts = monitor.accounts
    node = sum(monitor.total_j.values())
    assert sum(a.energy_j for a in accounts.values()) == pytest.approx(node, rel=1e-9)
    trial = {
        t: sum(a.energy_j for (k, tt, _), a in accounts.items() if k == "trial" and tt == t)
        for t in (0, 1)
    }
    assert trial[0] > 0 and trial[1] > 0
    assert sum(a.energy_j for (k, _, _), a in accounts.items() if k == "allocation") > 0


def test_the_sampler_measures_its_own_cpu_time():
    monitor = _monitor(slots=2)
    time.sleep(0.5)
    monitor.close()
    assert monitor.samples_taken >= 5
    assert monitor.cpu_time_s > 0  # benchmarks/monitor.py reports it against a core


def test_gpu_energy_goes_to_the_trials_on_that_device():
    monitor = _monitor(slots=3, slot_devices=["gpu:0", "gpu:0", "gpu:1"])
    monitor.close()
    monitor.accounts.clear()
    monitor._device_floor_w = {"gpu:0": 50.0, "gpu:1": 40.0}
    monitor._slots[0].trial, monitor._slots[1].trial = 1, 2  # both share gpu:0; gpu:1 is empty
    monitor._book("gpu:0", 300.0, u=0.1, shares=[0.0, 0.0, 0.0], intensity=0.0, dt=1.0)
    monitor._book("gpu:1", 60.0, u=0.1, shares=[0.0, 0.0, 0.0], intensity=0.0, dt=1.0)
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    assert got == {
        ("trial", 1, "gpu:0"): 125.0,  # (300 − 50 W floor) shared by the two trials on gpu:0
        ("trial", 2, "gpu:0"): 125.0,
        ("baseline", None, "gpu:0"): 50.0,
        ("overhead", None, "gpu:1"): 20.0,  # nobody on gpu:1: active beyond its floor
        ("allocation", None, "gpu:1"): 40.0,
    }


def test_gpu_energy_follows_the_placement_and_the_share_each_trial_holds():
    monitor = _monitor(slots=2)
    monitor.close()
    monitor.accounts.clear()
    monitor._device_floor_w = {"gpu:0": 0.0, "gpu:1": 0.0}
    monitor.place(0, {"gpu:0": 0.5})
    monitor.place(1, {"gpu:0": 0.25})
    monitor._slots[0].trial, monitor._slots[1].trial = 1, 2
    monitor._book("gpu:0", 300.0, u=0.1, shares=[0.0, 0.0], intensity=0.0, dt=1.0)
    monitor.place(0, {"gpu:0": 1.0, "gpu:1": 1.0})  # trial 1 grew over both devices
    monitor.place(1, {})
    monitor._book("gpu:1", 60.0, u=0.1, shares=[0.0, 0.0], intensity=0.0, dt=1.0)
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    assert got == {
        ("trial", 1, "gpu:0"): 200.0,
        ("trial", 2, "gpu:0"): 100.0,
        ("trial", 1, "gpu:1"): 60.0,
    }


def test_a_trial_in_a_process_this_node_cannot_see_is_marked_unmeasured():
    monitor = _monitor(slots=2)
    monitor.assign(0, None, 4)  # a Ray worker on another node: no process here
    time.sleep(0.2)
    monitor.assign(0, None, None)
    monitor.close()
    assert ("trial", 4, UNMEASURED) in monitor.accounts
    assert monitor.accounts["trial", 4, UNMEASURED].energy_j == 0.0
    # Nothing else is booked to it, and the node's energy still adds up.
    assert [k for k in monitor.accounts if k[1] == 4] == [("trial", 4, UNMEASURED)]
    node = sum(monitor.total_j.values())
    assert sum(a.energy_j for a in monitor.accounts.values()) == pytest.approx(node, rel=1e-9)


def test_idle_energy_is_split_over_the_slots_on_this_node_only():
    monitor = _monitor(slots=3)
    monitor.close()
    monitor.assign(2, None, 9)  # worker 2 runs on another node...
    monitor.assign(2, None, None)  # ...and stays there between trials
    monitor.accounts.clear()
    monitor._slots[0].trial = 7
    monitor._book("cpu", 100.0, u=0.0, shares=[0.0, 0.0, 0.0], intensity=0.0)
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    # 100 J idle over the two local slots: busy slot 0 -> baseline, empty slot 1 -> allocation.
    assert got == {("baseline", None, "cpu"): 50.0, ("allocation", None, "cpu"): 50.0}
    monitor.assign(2, os.getpid(), 10)  # a worker started again on this node counts again
    assert not monitor._slots[2].remote


def test_with_every_worker_elsewhere_this_nodes_idle_is_baseline():
    monitor = _monitor(slots=2)
    monitor.close()
    monitor.assign(0, None, 1)
    monitor.assign(1, None, 2)
    monitor.accounts.clear()
    monitor._book("cpu", 10.0, u=0.0, shares=[0.0, 0.0], intensity=0.0)
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    assert got == {("baseline", None, "cpu"): 10.0}


def test_a_trial_metered_on_its_own_node_is_not_marked_here():
    monitor = _monitor(slots=2)
    monitor.assign(0, None, 4, metered_elsewhere=True)
    monitor.assign(0, None, None)
    monitor.close()
    assert [k for k in monitor.accounts if k[1] == 4] == []
    assert monitor._slots[0].remote  # and none of this node's idle is its


def test_a_node_meter_owns_a_slot_from_its_first_trial_there_until_it_leaves():
    monitor = _monitor(slots=3, slots_here=False)
    monitor.close()
    monitor.accounts.clear()
    assert all(slot.remote for slot in monitor._slots)
    monitor._book("cpu", 10.0, u=0.0, shares=[0.0] * 3, intensity=0.0)
    assert {k: a.energy_j for k, a in monitor.accounts.items() if a.energy_j} == {
        ("baseline", None, "cpu"): 10.0
    }
    monitor.assign(1, os.getpid(), 5)
    monitor.assign(1, os.getpid(), None)  # between trials the slot stays this node's
    monitor.accounts.clear()
    monitor._book("cpu", 10.0, u=0.0, shares=[0.0] * 3, intensity=0.0)
    assert {k: a.energy_j for k, a in monitor.accounts.items() if a.energy_j} == {
        ("allocation", None, "cpu"): 10.0
    }
    monitor.leave(1)  # its worker started again on another node
    assert monitor._slots[1].remote and monitor._slots[1].pid is None


def test_a_guest_on_a_machine_another_monitor_books_books_only_its_trials():
    monitor = _monitor(slots=2, slots_here=False, guest=True)
    monitor.close()
    monitor.accounts.clear()
    monitor.assign(0, os.getpid(), 7)
    monitor.assign(1, os.getpid(), None)
    monitor._book("cpu", 100.0, u=0.5, shares=[0.3, 0.0], intensity=0.0)
    monitor._book("gpu:0", 10.0, u=0.5, shares=[0.3, 0.0], intensity=0.0)  # its own device
    got = {k: round(a.energy_j, 9) for k, a in monitor.accounts.items() if a.energy_j}
    assert got == {
        ("trial", 7, "cpu"): 15.0,
        ("trial", 7, "gpu:0"): 1.5,
        ("overhead", None, "gpu:0"): 3.5,
        ("baseline", None, "gpu:0"): 5.0,
    }


def test_a_guest_nodes_trials_leave_its_machines_owners_overhead():
    from basht.energy.monitor import Account, counted_once

    accounts = {
        ("overhead", None, "cpu"): Account(40.0, 4.0),  # the driver's machine
        ("baseline", None, "cpu"): Account(60.0, 6.0),
        ("trial", 1, "node-b/cpu"): Account(15.0, 1.5),  # a guest there
        ("test", None, "node-b/cpu"): Account(5.0, 0.5),
        ("overhead", None, "node-c/cpu"): Account(3.0, 0.3),  # another machine, owned by c
        ("trial", 2, "node-d/cpu"): Account(9.0, 0.9),  # d is c's guest: more than c's overhead
        ("trial", 2, "node-d/gpu:0"): Account(7.0, 0.7),  # d's own GPU
        ("trial", 3, "node-e/cpu"): Account(8.0, 0.8),  # e owns its machine
    }
    owners = {"node-b": "", "node-d": "node-c"}
    got = counted_once(accounts, owners)
    assert got["overhead", None, "cpu"].energy_j == pytest.approx(20.0)
    assert got["overhead", None, "cpu"].emissions_g == pytest.approx(2.0)
    assert got["overhead", None, "node-c/cpu"].energy_j == 0.0  # never below zero
    assert got["overhead", None, "node-c/cpu"].emissions_g == 0.0
    untouched = [("baseline", None, "cpu"), ("trial", 1, "node-b/cpu"), ("trial", 3, "node-e/cpu")]
    assert [got[k].energy_j for k in untouched] == [60.0, 15.0, 8.0]
    assert got["trial", 2, "node-d/gpu:0"].energy_j == 7.0
    assert counted_once({("trial", 1, "node-b/cpu"): Account(1.0)}, {}) == {
        ("trial", 1, "node-b/cpu"): Account(1.0)
    }


class _Elsewhere:
    """Two pulls from one other node: samples once each, accounts growing."""

    def __init__(self) -> None:
        self.pulls: list[bool] = []

    def pull(self, final, intensity):
        from basht.energy.monitor import Account, Pulled

        self.pulls.append(final)
        joules = 5.0 * len(self.pulls)
        return Pulled(
            samples=[{"at": 0.0, "node": "node-1", "component": "cpu", "energy_j": joules}],
            accounts={("trial", 3, "node-1/cpu"): Account(joules, joules / 1000)},
            sources={"node-1/cpu": "rapl"},
        )


def test_a_flush_merges_what_other_nodes_meters_booked():
    received = []
    elsewhere = _Elsewhere()
    monitor = EnergyMonitor(
        source=CombinedSource([CountingSource()]),
        sample_interval_s=60,  # no flush of the sampler's own in between
        slots=1,
        sink=lambda s, a: received.append((s, a)),
    )
    monitor.elsewhere = elsewhere
    monitor.flush()
    monitor.close()
    assert elsewhere.pulls == [False, True]  # the last pull closes the meters
    samples, accounts = received[-1]
    assert [s for s in samples if s["node"] == "node-1"] == [
        {"at": 0.0, "node": "node-1", "component": "cpu", "energy_j": 10.0}
    ]
    assert accounts["trial", 3, "node-1/cpu"].energy_j == 10.0  # cumulative, not added twice
    assert ("overhead", None, "cpu") in accounts  # this node's own
    assert monitor.source_of == {"cpu": "estimate", "node-1/cpu": "rapl"}
    assert monitor.all_accounts()["trial", 3, "node-1/cpu"].energy_j == 10.0


class _Unreachable:
    def pull(self, final, intensity):
        raise ConnectionError("the cluster is gone")


def test_other_nodes_out_of_reach_do_not_stop_this_nodes_sampler(caplog):
    received = []
    monitor = _monitor(slots=1, sink=lambda s, a: received.append(a), flush_every_s=0.05)
    monitor.elsewhere = _Unreachable()
    time.sleep(0.3)
    assert monitor._thread.is_alive() and len(received) >= 2
    monitor.close()
    assert "could not read the other nodes' energy meters" in caplog.text


def test_the_test_phase_gets_its_own_interval_however_short():
    # No background sample in between: every sample counted here is a boundary's.
    monitor = EnergyMonitor(
        source=CombinedSource([CountingSource()]), sample_interval_s=60, slots=1
    )
    monitor.assign(0, os.getpid(), 3)
    before = monitor.samples_taken
    monitor.assign(0, os.getpid(), 3, kind="test")  # right after: within the 50 ms resolution
    monitor.assign(0, None, None)
    assert monitor.samples_taken == before + 2
    monitor.assign(0, os.getpid(), 4)
    monitor.assign(0, None, None)  # a short trial's end is still coalesced
    assert monitor.samples_taken == before + 2
    monitor.close()


class _OnceThenGone(_Elsewhere):
    """One good pull, then the other nodes are out of reach."""

    def pull(self, final, intensity):
        if self.pulls:
            raise ConnectionError("the cluster is gone")
        return super().pull(final, intensity)


def test_other_nodes_samples_reach_the_sink_once_even_when_a_later_pull_fails():
    received = []
    monitor = EnergyMonitor(
        source=CombinedSource([CountingSource()]),
        sample_interval_s=60,
        slots=1,
        sink=lambda s, a: received.append((s, a)),
    )
    monitor.elsewhere = _OnceThenGone()
    monitor.flush()
    monitor.close()  # this pull fails: what was pulled before is kept, not sent again
    sent = [s for samples, _ in received for s in samples if s["node"] == "node-1"]
    assert len(sent) == 1
    assert received[-1][1]["trial", 3, "node-1/cpu"].energy_j == 5.0


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _sampled_once() -> EnergyMonitor:
    """A monitor with no background sampling and no accounts, just sampled: the next boundary
    sample is at least 50 ms away, so short trials fall inside one interval."""
    monitor = EnergyMonitor(
        source=CombinedSource([CountingSource()]), sample_interval_s=60, slots=1
    )
    monitor.close()
    monitor.accounts.clear()
    monitor.sample()
    return monitor


def test_a_trial_shorter_than_the_boundary_resolution_still_gets_its_part():
    monitor = _sampled_once()
    monitor.assign(0, os.getpid(), 1)  # a boundary sample was just taken: none now
    _spin(0.02)
    monitor.assign(0, os.getpid(), 2)  # within 50 ms of the last sample: no sample here either
    _spin(0.02)
    monitor.assign(0, os.getpid(), None)
    monitor.sample()
    trials = {k[1]: a.energy_j for k, a in monitor.accounts.items() if k[0] == "trial"}
    assert trials.get(1, 0) > 0 and trials.get(2, 0) > 0, trials
    assert trials[1] == pytest.approx(trials[2], rel=0.6)  # about the same time each


def test_a_short_trial_ended_as_the_engine_ends_it_keeps_its_cpu_time():
    # The engine ends a trial with assign(slot, None, None): the worker stays, and what it used
    # since the last sample is the ended trial's, even with no sample at its end.
    monitor = _sampled_once()
    monitor.assign(0, os.getpid(), 1)
    _spin(0.03)
    monitor.assign(0, None, None)  # within 50 ms of the last sample: none taken here
    monitor.assign(0, os.getpid(), 2)
    monitor.sample()
    trials = {k[1]: a.energy_j for k, a in monitor.accounts.items() if k[0] == "trial"}
    assert trials.get(1, 0) > 0, trials
