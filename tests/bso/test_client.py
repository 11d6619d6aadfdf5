"""Our client against a real server: Zeus's call order, energy from a monitor, failures raised."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import pytest

from basht.bso import BatchSizeOptimizer, BSOOrderError, BSOServerError, JobSpec, TrainFailError


@dataclass(frozen=True)
class FakeMeasurement:
    time_s: float
    energy_j: float
    source: str
    by_component: dict[str, float]


@dataclass
class FakeMonitor:
    """Each window lasts `time_s` and burns `components` joules; records the calls."""

    time_s: float = 2.0
    components: dict[str, float] = field(default_factory=lambda: {"cpu": 30.0, "memory": 10.0})
    calls: list[str] = field(default_factory=list)
    closed: bool = False

    def begin_window(self, key: str) -> None:
        self.calls.append(f"begin {key}")

    def end_window(self, key: str) -> FakeMeasurement:
        self.calls.append(f"end {key}")
        return FakeMeasurement(
            self.time_s, sum(self.components.values()), "estimate", dict(self.components)
        )

    def close(self) -> None:
        self.closed = True


def spec(job_id: str, **changes) -> JobSpec:
    values = {
        "job_id": job_id,
        "job_id_prefix": job_id.split("-")[0],
        "batch_sizes": [16, 32, 64],
        "default_batch_size": 32,
        "target_metric": 0.9,
        "max_epochs": 5,
    }
    values.update(changes)
    return JobSpec(**values)


def optimizer(server, job: JobSpec, monitor=None, **kwargs) -> BatchSizeOptimizer:
    hardware = {"max_power_w": 100.0, "number_of_gpus": 1, "gpu_model": "test-cpu"}
    hardware.update(kwargs)
    return BatchSizeOptimizer(server.url, job, monitor=monitor or FakeMonitor(), **hardware)


def job_state(server, job_id: str) -> dict:
    return httpx.get(f"{server.url}/jobs", params={"job_id": job_id}).json()


def test_a_run_reports_cumulative_time_and_energy_until_the_target(server):
    monitor = FakeMonitor()
    with optimizer(server, spec("cl-1"), monitor) as bso:
        assert bso.get_batch_size() == 32 and bso.get_batch_size() == 32  # asked once
        bso.on_train_begin()
        for metric in (0.5, 0.7, 0.95):
            bso.on_evaluate(metric)
        assert bso.training_finished and bso.converged is True
        assert (bso.epoch, bso.time_s, bso.energy_j) == (3, 6.0, 120.0)
        assert bso.energy_source == "estimate"
        bso.on_evaluate(0.99)  # after the end: ignored, like Zeus
    trial = job_state(server, "cl-1")["trials"][0]
    assert (trial["status"], trial["converged"], trial["time"], trial["energy"]) == (
        "Succeeded",
        True,
        6.0,
        120.0,
    )
    assert monitor.calls == ["begin basht-bso", "end basht-bso"] * 3
    assert not monitor.closed  # a monitor passed in belongs to the caller


def test_running_out_of_epochs_raises_train_fail(server):
    bso = optimizer(server, spec("cl-2", max_epochs=2))
    bso.get_batch_size()
    bso.on_train_begin()
    bso.on_evaluate(0.1)
    with pytest.raises(TrainFailError, match="max_epoch"):
        bso.on_evaluate(0.2)
    assert bso.training_finished and bso.converged is False
    bso.end()


def test_gpu_energy_is_reported_when_gpus_are_measured(server):
    monitor = FakeMonitor(components={"gpu:0": 200.0, "gpu:1": 300.0, "cpu": 50.0})
    with optimizer(server, spec("cl-3"), monitor) as bso:
        bso.get_batch_size()
        bso.on_train_begin()
        bso.on_evaluate(0.95)
        assert bso.energy_j == 500.0
        assert bso.energy_source == "estimate"  # the fake's label for its GPU components


def test_a_run_that_ends_without_a_result_is_marked_failed(server):
    monitor = FakeMonitor()
    with optimizer(server, spec("cl-4"), monitor) as bso:
        bso.get_batch_size()
        bso.on_train_begin()
        bso.on_evaluate(0.1)
    assert job_state(server, "cl-4")["trials"][0]["status"] == "Failed"
    assert monitor.calls[-1] == "end basht-bso"  # the open window was closed


def test_calls_out_of_order_are_refused(server):
    with optimizer(server, spec("cl-5")) as bso:
        with pytest.raises(BSOOrderError):
            bso.on_evaluate(0.5)
        with pytest.raises(BSOOrderError):
            bso.on_train_begin()
        bso.get_batch_size()
        with pytest.raises(BSOOrderError, match="on_train_begin"):
            bso.on_evaluate(0.5)


def test_other_ranks_take_rank_zeros_trial(server):
    with optimizer(server, spec("cl-6")) as rank0:
        size = rank0.get_batch_size()
        with optimizer(server, spec("cl-6"), rank=1) as rank1:
            with pytest.raises(BSOOrderError, match="rank 0"):
                rank1.get_batch_size()
            rank1.set_trial(size, rank0.trial_number)
            rank1.on_train_begin()
            rank1.on_evaluate(0.95)
            assert rank1.converged is True
        rank0.on_train_begin()
        rank0.on_evaluate(0.95)  # the second report of the same trial: "already reported"
        assert rank0.training_finished and rank0.converged is True


def test_a_changed_spec_is_a_one_line_server_error(server):
    optimizer(server, spec("cl-7")).end()
    with pytest.raises(BSOServerError) as err:
        optimizer(server, spec("cl-7", max_epochs=9))
    assert err.value.status_code == 409 and "doesn't match" in str(err.value)


def test_the_default_monitor_is_bashts_own(server):
    """No monitor given: Basht's EnergyMonitor measures (a labelled estimate or RAPL; on a GPU
    machine the GPUs' NVML counters alone, as Zeus reports)."""
    bso = BatchSizeOptimizer(
        server.url, spec("cl-8"), max_power_w=50.0, number_of_gpus=1, gpu_model="cpu"
    )
    try:
        bso.get_batch_size()
        bso.on_train_begin()
        sum(i * i for i in range(100_000))
        bso.on_evaluate(0.95)
        assert bso.time_s > 0 and bso.energy_j > 0
        on_gpu = bso.hardware.has_gpu
        assert bso.energy_source in (("nvml",) if on_gpu else ("estimate", "rapl"))
    finally:
        bso.end()
    bso.end()  # twice is harmless (the monitor it owned is closed once)


def test_hardware_is_detected_when_not_given(server):
    with BatchSizeOptimizer(server.url, spec("cl-9"), monitor=FakeMonitor()) as bso:
        registered = bso.job
        assert registered.max_power > 0 and registered.number_of_gpus >= 1
        assert registered.gpu_model == bso.hardware.gpu_model


def test_a_reset_connection_is_retried_only_where_repeating_is_harmless():
    """A kept-alive connection the server dropped fails the next request with a reset: reports,
    trial ends, named registrations and reads are sent once more; opening a trial is not."""
    from basht.bso.errors import BSOError
    from basht.bso.http import BSOClient
    from basht.bso.spec import TrainingResult, TrialId

    sent: list[str] = []
    reset_next = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        if reset_next[0]:
            reset_next[0] = False
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        if request.url.path == "/report":
            return httpx.Response(
                200, json={"stop_train": False, "converged": False, "message": ""}
            )
        return httpx.Response(200, json=None)

    client = BSOClient("http://bso.test")
    client._http = httpx.Client(base_url="http://bso.test", transport=httpx.MockTransport(handler))
    trial = TrialId(job_id="j-1", batch_size=32, trial_number=1)
    result = TrainingResult(**trial.model_dump(), time=1, energy=2, metric=0.5, current_epoch=1)
    assert client.report(result).stop_train is False
    assert sent == ["POST /report", "POST /report"]
    sent.clear()
    reset_next[0] = True
    client.end_trial(trial)
    assert sent == ["PATCH /trials", "PATCH /trials"]
    sent.clear()
    reset_next[0] = True
    with pytest.raises(BSOError, match="cannot reach the BSO server"):
        client.next_trial("j-1")  # may have opened a trial: not repeated
    assert sent == ["GET /jobs/batch_size"]
    client.close()


def test_an_epoch_the_server_did_not_get_is_sent_again(server):
    """A report that fails (the server is restarting) leaves the client able to send it again,
    with the time and energy spent meanwhile; it used to answer "call on_train_begin"."""
    from basht.bso.errors import BSOError

    monitor = FakeMonitor()
    with optimizer(server, spec("cl-10"), monitor) as bso:
        bso.get_batch_size()
        bso.on_train_begin()
        bso.on_evaluate(0.1)
        reachable = bso._http._http
        bso._http._http = httpx.Client(base_url="http://127.0.0.1:1")  # nothing listens there
        with pytest.raises(BSOError, match="cannot reach"):
            bso.on_evaluate(0.5)
        bso._http._http.close()
        bso._http._http = reachable
        bso.on_evaluate(0.95)
        assert bso.training_finished and bso.converged is True
        assert bso.epoch == 2 and bso.time_s == 3 * monitor.time_s
    trial = job_state(server, "cl-10")["trials"][0]
    assert trial["epochs"] == 2 and trial["time"] == 3 * monitor.time_s


def test_a_server_gone_at_exit_is_one_line_not_a_traceback(serve, tmp_path):
    """The trial is ended at interpreter exit; if the server cannot be reached then, the user
    sees one line, not "Exception ignored in atexit callback" and a traceback."""
    import subprocess
    import sys

    from tests.bso.support import basht_env

    bso_server = serve()
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        "from tests.bso.test_client import FakeMonitor, spec\n"
        "from basht.bso import BatchSizeOptimizer\n"
        f"bso = BatchSizeOptimizer({bso_server.url!r}, spec('gone-1'), monitor=FakeMonitor(),\n"
        "    max_power_w=100.0, number_of_gpus=1, gpu_model='test-cpu')\n"
        "bso.get_batch_size()\n"
        "bso.on_train_begin()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=basht_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        bso_server.stop()
        _, err = proc.communicate("\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "could not end trial 1 of job gone-1" in err and "cannot reach" in err
