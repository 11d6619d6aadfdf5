"""Helpers for the BSO tests: run the real CLI, start real servers, build request bodies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests import cli
from tests.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]


def basht_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASHT_BSO_")}
    return {**env, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **extra}


def basht(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the real `basht` CLI in a subprocess."""
    return cli.basht(*args, env=env or basht_env(), timeout=timeout)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_server(db: str, *args: str, log: Path, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", "bso", "serve", "--db", db, "--port", str(port), *args],
        env=env or basht_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"basht bso serve exited:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"basht bso serve did not come up:\n{log.read_text()}")


# -- request bodies -------------------------------------------------------------------------------


def job_body(job_id: str | None, /, **changes: Any) -> dict[str, Any]:
    """A JobSpecFromClient body as Zeus's client sends it (its own field set, plus GPU facts)."""
    body: dict[str, Any] = {
        "job_id": job_id,
        "job_id_prefix": (job_id or "test-").split("-")[0],
        "batch_sizes": [32, 64, 256, 512, 1024, 4096, 2048],
        "default_batch_size": 1024,
        "eta_knob": 0.5,
        "beta_knob": 2.0,
        "target_metric": 0.5,
        "higher_is_better_metric": True,
        "max_epochs": 100,
        "num_pruning_rounds": 2,
        "window_size": 0,
        "mab_prior_mean": 0.0,
        "mab_prior_precision": 0.0,
        "mab_num_explorations": 2,
        "mab_seed": 123456,
        "max_power": 3000.0,
        "number_of_gpus": 4,
        "gpu_model": "A100",
    }
    body.update(changes)
    return body


def result_body(trial: dict[str, Any], **values: Any) -> dict[str, Any]:
    body = {**trial, "time": 10.0, "energy": 100.0, "metric": 0.6, "current_epoch": 1}
    body.update(values)
    return body


def hammer(url: str, job_id: str, clients: int = 20, epochs: int = 3) -> list[dict[str, Any]]:
    """`clients` clients at once: each registers the same job, takes a trial, reports `epochs`
    epochs (the last one reaching the target) and ends the trial. Returns what each saw."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    barrier = threading.Barrier(clients)
    body = job_body(job_id, beta_knob=None, max_epochs=1000, mab_seed=None)

    def one(i: int) -> dict[str, Any]:
        with httpx.Client(base_url=url, timeout=120) as c:
            barrier.wait()
            registered = c.post("/jobs", json=body).status_code
            trial = c.get("/jobs/batch_size", params={"job_id": job_id}).json()
            answers = []
            for epoch in range(1, epochs + 1):
                answers.append(
                    c.post(
                        "/report",
                        json=result_body(
                            trial,
                            metric=0.9 if epoch == epochs else 0.1,
                            current_epoch=epoch,
                            time=float(10 * epoch + i),
                            energy=float(100 * epoch + i),
                        ),
                    ).json()
                )
            ended = c.patch("/trials", json=trial).status_code
            return {
                "i": i,
                "registered": registered,
                "trial": trial,
                "answers": answers,
                "ended": ended,
            }

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(clients)))


def check_hammered(url: str, job_id: str, seen: list[dict[str, Any]]) -> None:
    """Nothing lost, nothing duplicated: one trial per client, every final report stored."""
    statuses = sorted(s["registered"] for s in seen)
    assert statuses == [200] * (len(seen) - 1) + [201]
    numbers = sorted(s["trial"]["trial_number"] for s in seen)
    assert numbers == list(range(1, len(seen) + 1))
    assert all(s["ended"] == 200 for s in seen)
    assert all(s["answers"][-1]["converged"] for s in seen)
    with httpx.Client(base_url=url, timeout=30) as c:
        state = c.get("/jobs", params={"job_id": job_id}).json()
    trials = {t["trial_number"]: t for t in state["trials"]}
    assert len(trials) == len(seen)
    epochs = len(seen[0]["answers"])
    for s in seen:
        stored = trials[s["trial"]["trial_number"]]
        assert stored["status"] == "Succeeded" and stored["converged"] is True
        assert stored["time"] == 10 * epochs + s["i"] and stored["energy"] == 100 * epochs + s["i"]
    cheapest = min(
        0.5 * (100 * epochs + s["i"]) + 0.5 * 3000 * (10 * epochs + s["i"]) for s in seen
    )
    assert state["min_cost"] == cheapest


def bso_load() -> Any:
    """benchmarks/bso_load.py as a module: the load tests use its clients and its checks."""
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("bso_load")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


# -- training clients that die, and databases an older server left ------------------------------

TRAINING_SCRIPT = """\
import sys
from basht.bso import BatchSizeOptimizer
from tests.bso.test_client import FakeMonitor, spec
bso = BatchSizeOptimizer(sys.argv[1], spec(sys.argv[2]), monitor=FakeMonitor(),
    max_power_w=100.0, number_of_gpus=1, gpu_model="test-cpu")
bso.get_batch_size()
bso.on_train_begin()
bso.on_evaluate(0.1)
print("reported", bso.current_batch_size, bso.trial_number, flush=True)
sys.stdin.readline()  # silent from here on: killed, or told to report its next epoch
bso.on_evaluate(0.1)
"""


@dataclass
class TrainingClient:
    """Our real client in its own process, stopped after its first epoch's report."""

    process: subprocess.Popen[str]
    batch_size: int
    trial_number: int
    reported_at: float  # time.monotonic() just after the server answered the report


def start_training_client(url: str, job_id: str, folder: Path) -> TrainingClient:
    """Start a training run of `job_id` (test_client's `spec`) and wait for its first report."""
    script = folder / f"train-{job_id}.py"
    script.write_text(TRAINING_SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), url, job_id],
        env=basht_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("reported "):
        process.kill()
        raise RuntimeError(f"the training client failed: {line}{process.communicate()[1]}")
    _, size, number = line.split()
    return TrainingClient(process, int(size), int(number), time.monotonic())


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


async def seed_revision_0001(url: str, job_id: str, long_ago: Any) -> None:
    """Rows as a server at revision 0001 wrote them: a probe that succeeded and one still
    running, both started at `long_ago` (no trial has a last_report_at column yet)."""
    from basht.bso.db.engine import open_engine
    from basht.bso.db.schema import JobRow, TrialRow

    body = job_body(job_id, mab_seed=None)
    job = {k: v for k, v in body.items() if k in JobRow.__table__.c}
    job.update(
        batch_sizes=sorted(body["batch_sizes"]),
        stage="Pruning",
        min_cost=0.5 * 100 + 0.5 * 3000 * 10,
        min_cost_batch_size=1024,
        rng_state=None,
        pruning_note=None,
        created_at=long_ago,
    )
    trial = {"job_id": job_id, "type": "Exploration", "start_timestamp": long_ago}
    engine = open_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(JobRow.__table__.insert().values(**job))
            await conn.execute(
                TrialRow.__table__.insert().values(
                    **trial,
                    trial_number=1,
                    batch_size=1024,
                    status="Succeeded",
                    end_timestamp=long_ago,
                    time_s=10.0,
                    energy_j=100.0,
                    converged=True,
                    epochs=3,
                    metric=0.9,
                )
            )
            await conn.execute(
                TrialRow.__table__.insert().values(
                    **trial, trial_number=2, batch_size=512, status="Dispatched"
                )
            )
    finally:
        await engine.dispose()
