"""RubberBand's executor: the cluster follows the plan stage by stage, bills every instance for
its life, packs trials onto instances; a real `basht run --plan` on this machine's processes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from basht.energy.pricing import AWS_LINUX, Price
from basht.engine.messages import TrialEvent, TrialTask, WorkloadRef
from basht.errors import BashtError, ExperimentError
from basht.experiment import load_experiment
from basht.plan.cluster import Cluster, LocalProvider
from basht.plan.executor import PlanExecutor
from basht.store import Store
from tests.cli import basht, process_alive, run_in_background, wait_for_trials

ROOT = Path(__file__).resolve().parents[2]
PRICE = Price(usd_per_hour=3.6, vcpus=8, gpus=2, rule=AWS_LINUX)  # 0.001 USD a second


class FakeProvider:
    """Instances with made-up worker indexes; `fail` makes the next launch fail."""

    gpus = 2

    def __init__(self) -> None:
        self.next, self.released, self.fail = 0, [], False

    def launch(self, count: int) -> list[tuple[int, ...]]:
        if self.fail:
            raise BashtError("worker 9 did not start")
        out = [(self.next + 2 * i, self.next + 2 * i + 1) for i in range(count)]
        self.next += 2 * count
        return out

    def release(self, workers) -> None:
        self.released.append(tuple(workers))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_cluster_releases_the_newest_and_bills_each_instance_for_its_life():
    provider, clock, heard = FakeProvider(), Clock(), []
    cluster = Cluster(provider, PRICE, lambda i, what: heard.append((i.number, what)), clock)
    cluster.scale_to(3, stage=0)
    clock.now += 100
    cluster.scale_to(1, stage=1)  # instances 2 and 1 go, newest first
    assert provider.released == [(4, 5), (2, 3)]
    clock.now += 30
    cluster.scale_to(2, stage=2)  # one new instance, numbered after all before it
    assert [i.number for i in cluster.live] == [0, 3]
    clock.now += 20
    cluster.release_all()
    lives = [i.lifetime_s(clock.now) for i in cluster.history]
    assert lives == [150, 100, 100, 20]
    # per second with a 60 s minimum: 150 + 100 + 100 + 60 s at 0.001 USD/s
    assert cluster.bill_usd() == pytest.approx(0.41)
    cluster.data_usd_per_instance = 0.05  # moving the data onto each of the 4 launched
    assert cluster.bill_usd() == pytest.approx(0.41 + 4 * 0.05)
    assert heard[:6] == [(n, "launched") for n in range(3)] + [(n, "ready") for n in range(3)]
    assert (3, "released") in heard and (0, "released") in heard


def test_an_instance_that_never_starts_is_billed_until_then_and_the_error_stands():
    provider, clock = FakeProvider(), Clock()
    cluster = Cluster(provider, PRICE, clock=clock)
    cluster.scale_to(1, stage=0)
    provider.fail = True
    with pytest.raises(BashtError, match="did not start"):
        cluster.scale_to(2, stage=1)
    assert [i.number for i in cluster.live] == [0]
    assert cluster.history[1].released_at == clock.now


class StartingProvider(FakeProvider):
    """Instances that start without waiting: each is ready once `up` holds its first worker."""

    def __init__(self) -> None:
        super().__init__()
        self.up: set[int] = set()

    def begin(self, count: int) -> list[tuple[int, ...]]:
        return self.launch(count)

    def ready(self, workers) -> bool:
        return workers[0] in self.up


def test_new_instances_start_beside_the_live_ones_and_join_when_ready():
    provider, clock = StartingProvider(), Clock()
    cluster = Cluster(provider, PRICE, clock=clock)
    cluster.scale_to(1, stage=0)  # deploy waits for its instances
    cluster.scale_to(3, stage=1, wait=False)
    assert [i.number for i in cluster.live] == [0] and [i.number for i in cluster.starting] == [
        1,
        2,
    ]
    clock.now += 40
    provider.up.add(4)  # instance 2's first worker
    cluster.check_starting()
    assert [i.number for i in cluster.live] == [0, 2] and cluster.history[2].ready_at == clock.now
    # Scaling down releases an instance still starting first: it never ran, and is billed.
    cluster.scale_to(2, stage=2)
    assert provider.released == [(2, 3)] and cluster.history[1].ready_at is None
    assert cluster.history[1].lifetime_s(clock.now) == 40
    cluster.release_all()
    assert cluster.bill_usd() == pytest.approx(3 * 60 * 0.001)  # each lived 40 s: 60 s minimum


@pytest.mark.integration
def test_local_workers_can_start_without_waiting_and_join_when_set_up():
    from basht.engine.local import LocalExecutor
    from basht.engine.messages import WorkloadRef

    local = LocalExecutor(0, 1)
    local.start()
    try:
        local.setup(WorkloadRef("sleep"))
        provider = LocalProvider(local, gpus=2)
        (workers,) = provider.begin(1)
        assert local.workers == 0  # not in the pool while starting
        deadline = time.monotonic() + 60
        while not provider.ready(workers):
            assert time.monotonic() < deadline, "the instance never became ready"
            time.sleep(0.05)
        assert local.workers == 2 and local.first_idle() in workers
        (other,) = provider.begin(1)
        provider.release(other)  # released while starting: stopped, never in the pool
        assert local.workers == 2
    finally:
        local.shutdown()


class RecordingWorkers:
    """Workers that start at once or on `up`, and record how each group was stopped."""

    def __init__(self) -> None:
        self.next, self.up, self.stopped = 0, set(), []

    def add_workers(self, count: int) -> list[int]:
        return self.begin_workers(count)

    def begin_workers(self, count: int) -> list[int]:
        self.next += count
        return list(range(self.next - count, self.next))

    def workers_ready(self, indexes) -> bool:
        return all(i in self.up for i in indexes)

    def remove_workers(self, indexes, timeout_s: float = 5.0) -> None:
        self.stopped.append((tuple(indexes), timeout_s))


def test_an_instance_still_starting_is_stopped_at_once_when_released():
    """Released at a barrier (a re-plan wants fewer), an instance still starting runs nothing:
    waiting for its workers to come up would hold the barrier for its start-up."""
    workers = RecordingWorkers()
    provider = LocalProvider(workers, gpus=2)  # type: ignore[arg-type]
    (live,) = provider.launch(1)
    starting, joined = provider.begin(2)
    workers.up.update(joined)
    assert not provider.ready(starting) and provider.ready(joined)
    for instance in (starting, joined, live):
        provider.release(instance)
    assert workers.stopped == [(starting, 0.0), (joined, 5.0), (live, 5.0)]


def test_the_local_provider_refuses_more_processes_than_the_machine_should_hold():
    provider = LocalProvider(workers=None, gpus=4, max_workers=8)  # type: ignore[arg-type]
    provider.check([2, 1, 1])
    with pytest.raises(BashtError, match=r"3 instances x 4 GPUs.*--max-instances 2"):
        provider.check([3, 1, 1])


# -- the plan and the experiment ------------------------------------------------------------

EXPERIMENT = {
    "name": "sha-9",
    "seed": 0,
    "workload": {"name": "sleep", "params": {"epoch_s": 0.01}},  # no model to import
    "space": {
        "lr": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True},
        "hidden": {"type": "int", "low": 32, "high": 128, "log": True},
    },
    "search": {
        "pruner": "sha",
        "metric": "accuracy",
        "min_budget": 1,
        "max_budget": 9,
        "eta": 3,
        "max_trials": 9,
    },
}
PROFILE = {
    "instance": {"usd_per_hour": 3.6, "gpus": 2, "provider": "aws", "name": "local-2"},
    "epoch_s": {1: [0.3, 0.32, 0.35, 0.4]},
    "scaling": 0.6,
    "startup_s": [1.0, 1.5],
    "data": {"gb": 0.5, "usd_per_gb": 0.02},  # 0.01 USD moved onto each instance launched
    "source": "rough local numbers",
}


def _basht(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return basht(*args, cwd=cwd)


def _write(tmp_path: Path, experiment: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


@pytest.fixture
def planned(tmp_path) -> Path:
    """The experiment and a plan of (3, 1, 2) instances made by `basht plan`, edited to
    scale down and up (the greedy plan for so small a job keeps one count)."""
    _write(tmp_path, EXPERIMENT | {"store": f"sqlite:///{tmp_path / 'basht.db'}"})
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(PROFILE))
    proc = _basht(
        "plan", "exp.yaml", "--profile", "profile.yaml", "--deadline", "1m",
        "--max-instances", "3", "--json", "plan.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    plan["plan"] = [3, 1, 2]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return tmp_path


@pytest.mark.integration
def test_a_plan_must_be_for_the_files_job_and_run_where_it_can(planned):
    plan = json.loads((planned / "plan.json").read_text())
    wrong = [
        ({"search": {**EXPERIMENT["search"], "max_trials": 27}}, "is for 9 trials over 1..9"),
        ({"search": {**EXPERIMENT["search"], "pruner": "asha"}}, "synchronous SHA job"),
        ({"executor": "ray"}, "executor: local"),
        ({"plan": plan | {"plan": [1, 1]}}, "gives 2 stages, but the job has 3"),
        ({"plan": "missing.json"}, "plan .*missing.json: no such file"),
    ]
    for change, message in wrong:
        path = _write(planned, EXPERIMENT | {"plan": "plan.json"} | change)
        with pytest.raises(ExperimentError, match=message):
            load_experiment(path)
    # A plan file named in the experiment is read next to it, wherever basht runs from.
    experiment = load_experiment(_write(planned, EXPERIMENT | {"plan": "plan.json"}))
    assert experiment.plan is not None and experiment.plan.plan == [3, 1, 2]
    checked = _basht("validate", "exp.yaml", cwd=planned)
    assert checked.returncode == 0, checked.stderr
    assert "pruner sha, plan 3 1 2 (instances per stage)" in checked.stdout


@pytest.mark.integration
def test_basht_run_follows_the_plan_stage_by_stage_and_bills_its_instances(planned):
    proc = _basht("run", "exp.yaml", "--plan", "plan.json", "-q", cwd=planned)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "elastic cluster" in proc.stdout and "plan's estimate" in proc.stdout
    store = Store(f"sqlite:///{planned / 'basht.db'}", create=False)
    (run,) = store.list_runs()
    assert run.algorithm == "random sampling, pruner sha (one bracket of 9)"
    stages = store.stages(run.id)
    assert [(s.stage, s.instances, s.gpus_per_trial, s.slots) for s in stages] == [
        (0, 3, 1, 6),
        (1, 1, 1, 2),
        (2, 2, 2, 2),
    ]
    assert all(s.ended_at is not None and s.ended_at >= s.started_at for s in stages)
    # A stage ends with its last trial, before the test phase (which runs on the cluster too).
    (test,) = [p for p in store.phases(run.id) if p.name == "test"]
    assert stages[2].ended_at <= test.start
    instances = store.instances(run.id)
    assert [(i.number, i.stage) for i in instances] == [(0, 0), (1, 0), (2, 0), (3, 2)]
    assert all(len(i.workers) == 2 for i in instances)
    # Stage 2's one trial started at once on instance 0; instance 3 was launched beside it and
    # may not have been ready before the trial ended (it is billed all the same).
    assert all(i.ready_at >= i.launched_at for i in instances[:3])
    assert instances[3].ready_at is None or instances[3].ready_at >= instances[3].launched_at
    by_number = {i.number: i for i in instances}
    # Instances 1 and 2 were released at stage 1's barrier; 0 and the new 3 at the end.
    for number in (1, 2):
        assert by_number[number].released_at == pytest.approx(stages[1].started_at, abs=5)
    for number in (0, 3):
        assert by_number[number].released_at >= stages[2].ended_at
    # Packing: stage 1's trials and the last trial ran on instance 0, the fullest with room.
    trials = store.trials(run.id)
    assert len(trials) == 9 and sum(t.state == "completed" for t in trials) == 1
    survivors = [t for t in trials if t.budget >= 3]
    assert len(survivors) == 3 and all(t.worker in by_number[0].workers for t in survivors)
    # The last stage's trial did not wait for the instance launched beside it.
    (last,) = [t for t in trials if t.budget == 9]
    first_report = min(r.at for r in store.reports(run.id) if r.trial_id == last.id and r.epoch > 3)
    assert first_report < (by_number[3].ready_at or by_number[3].released_at)
    # The run's cost is the instances' bill, each for its life by the 60 s minimum, and the data
    # moved onto each.
    summary = json.loads((planned / run.results_dir / "results.json").read_text())
    cluster = summary["cluster"]
    lives = [i["lifetime_s"] for i in cluster["instances"]]
    expected = sum(max(60, -(-life // 1)) for life in lives) * 3.6 / 3600 + 0.01 * len(lives)
    assert cluster["cost_usd"] == pytest.approx(expected, rel=1e-6)
    assert summary["metrics"]["OC"]["value"] == pytest.approx(cluster["cost_usd"], rel=1e-6)
    assert cluster["estimate"]["cost_usd"] > 0 and cluster["plan"] == [3, 1, 2]


@pytest.mark.integration
def test_a_replanned_run_follows_the_trial_times_it_sees(planned):
    """The trials sleep far less than the profile's 0.3 s an epoch, and the deadline is a
    minute: at each barrier the rest is planned again at the speed seen. Stage 1 keeps the three
    instances up (billed for their first minute anyway, they cost no more than one and finish
    sooner), and one instance is the cheapest last stage, where the plan had 2."""
    plan = json.loads((planned / "plan.json").read_text())
    (planned / "replan.json").write_text(json.dumps(plan | {"replan": True}))
    _write(planned, EXPERIMENT | {"plan": "replan.json"})  # as a file names it
    checked = _basht("validate", "exp.yaml", cwd=planned)
    assert "plan 3 1 2 (instances per stage, re-planned at each barrier)" in checked.stdout
    _write(planned, EXPERIMENT | {"store": f"sqlite:///{planned / 'basht.db'}"})
    proc = _basht("run", "exp.yaml", "--plan", "plan.json", "--replan", "-q", cwd=planned)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "re-planned at each barrier" in proc.stdout and "trial speed" in proc.stdout
    store = Store(f"sqlite:///{planned / 'basht.db'}", create=False)
    (run,) = store.list_runs()
    stages = store.stages(run.id)
    assert [(s.stage, s.planned_instances, s.instances) for s in stages] == [
        (0, 3, 3),
        (1, 1, 3),
        (2, 2, 1),
    ]
    assert stages[0].speed is None  # the first stage runs as planned
    assert all(0 < s.speed < 1 and s.estimated_left_s > 0 for s in stages[1:])
    # No instance was launched after the first stage's.
    assert [(i.number, i.stage) for i in store.instances(run.id)] == [(0, 0), (1, 0), (2, 0)]
    summary = json.loads((planned / run.results_dir / "results.json").read_text())
    cluster = summary["cluster"]
    assert cluster["replan"] is True
    assert [(s["planned_instances"], s["instances"]) for s in cluster["stages"]][2] == (2, 1)
    assert cluster["stages"][2]["speed"] == pytest.approx(stages[2].speed)
    # The HTML report shows the cluster as the console does.
    out = planned / "report.html"
    store_url = f"sqlite:///{planned / 'basht.db'}"
    html = _basht("report", run.id, "--html", "--out", str(out), "--store", store_url, cwd=planned)
    assert html.returncode == 0, html.stderr
    page = out.read_text()
    assert "Elastic cluster: the plan&#x27;s stages as run, re-planned at each barrier" in page
    assert "<th>trial speed</th>" in page and "plan&#x27;s estimate (mean)" in page
    # --replan without a plan is one line naming it.
    alone = _basht("run", "exp.yaml", "--replan", "-q", cwd=planned)
    assert alone.returncode == 2 and "--replan needs a plan" in alone.stderr


@pytest.mark.integration
def test_a_pre_provisioned_instance_is_asked_for_before_its_stages_barrier(planned):
    """Stage 2 of the plan (3, 1, 2) needs a second instance: with pre-provisioning it is asked
    for during stage 1, when the plan expects stage 1 to end less the mean start-up (about
    0.2 s in, of a stage of 2 waves of 0.6 s trials), and takes no trial of stage 1."""
    plan = json.loads((planned / "plan.json").read_text())
    (planned / "plan.json").write_text(json.dumps(plan | {"preprovision": True}))
    slow = EXPERIMENT | {
        "workload": {"name": "sleep", "params": {"epoch_s": 0.3}},
        "store": f"sqlite:///{planned / 'basht.db'}",
        "plan": "plan.json",  # the file names its plan
    }
    _write(planned, slow)
    checked = _basht("validate", "exp.yaml", cwd=planned)
    assert "plan 3 1 2 (instances per stage, pre-provisioned)" in checked.stdout
    proc = _basht("run", "exp.yaml", "-q", cwd=planned)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    store = Store(f"sqlite:///{planned / 'basht.db'}", create=False)
    (run,) = store.list_runs()
    stages = store.stages(run.id)
    assert [(s.stage, s.instances) for s in stages] == [(0, 3), (1, 1), (2, 2)]
    instances = store.instances(run.id)
    assert [(i.number, i.stage) for i in instances] == [(0, 0), (1, 0), (2, 0), (3, 2)]
    ahead = instances[3]
    assert stages[1].started_at < ahead.launched_at < stages[2].started_at
    # It ran no trial of stage 1: those are on instance 0, the only one the stage had.
    trials = {t.id: t for t in store.trials(run.id)}
    stage_1 = [t for t in trials.values() if t.budget == 3]
    assert stage_1 and all(t.worker in instances[0].workers for t in stage_1)
    summary = json.loads((planned / run.results_dir / "results.json").read_text())
    billed = {i["instance"]: i for i in summary["cluster"]["instances"]}
    assert billed[3]["lifetime_s"] >= stages[2].ended_at - stages[2].started_at


@pytest.mark.integration
def test_an_interrupted_plan_run_resumes_with_the_stage_it_was_in(planned):
    """Ctrl-C in the last stage, then `basht resume`: the new attempt launches the last stage's
    instances (not the first stage's), finishes the job, and both attempts' instances are billed.
    The plan is re-planned at each barrier (10 minutes to go: stage 1 keeps the three instances
    billed for their first minute anyway, and one instance is the cheapest last stage), and the
    resumed attempt plans its stage again at the speed the first one saw."""
    store_url = f"sqlite:///{planned / 'basht.db'}"
    plan = json.loads((planned / "plan.json").read_text())
    (planned / "plan.json").write_text(json.dumps(plan | {"replan": True, "deadline_s": 600}))
    slow = EXPERIMENT | {
        "workload": {"name": "sleep", "params": {"epoch_s": 0.3}},
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "store": store_url,
        "plan": "plan.json",
    }
    path = _write(planned, slow)
    proc = run_in_background(path, planned)
    wait_for_trials(store_url, planned / "basht.db", lambda s, r: len(s.stages(r.id)) == 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err

    resumed = _basht("resume", "latest", "--store", store_url, "-q", cwd=planned)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    store = Store(store_url, create=False)
    (run,) = store.list_runs()
    assert run.status == "completed"
    rows = store.stages(run.id)
    stages = [(s.attempt, s.stage, s.planned_instances, s.instances) for s in rows]
    assert stages == [(1, 0, 3, 3), (1, 1, 1, 3), (1, 2, 2, 1), (2, 2, 2, 1)]
    assert rows[3].speed == rows[2].speed  # no trial of attempt 2 had ended yet
    instances = store.instances(run.id)
    assert [(i.attempt, i.stage) for i in instances if i.attempt == 2] == [(2, 2)]
    assert all(i.released_at is not None for i in instances), [
        (i.attempt, i.number, i.launched_at, i.released_at) for i in instances
    ]
    trials = store.trials(run.id)
    assert len(trials) == 9 and sum(t.state == "completed" for t in trials) == 1
    summary = json.loads((planned / run.results_dir / "results.json").read_text())
    assert len(summary["cluster"]["instances"]) == len(instances) == 4
    assert summary["metrics"]["OC"]["value"] == pytest.approx(
        summary["cluster"]["cost_usd"], rel=1e-6
    )


class ReplayedWorkers(RecordingWorkers):
    """The executor's workers, without processes: `events` is what the next poll returns."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[TrialEvent] = []
        self.submitted: list[tuple[int, int]] = []

    def workers_ready(self, indexes) -> bool:
        return True

    def start(self) -> None: ...

    def shutdown(self, timeout_s: float = 5.0) -> None: ...

    def submit(self, task: TrialTask, worker: int) -> None:
        self.submitted.append((task.trial_id, worker))

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        events, self.events = self.events, []
        return events


class KilledRun:
    """The store of a run killed in `stage` as the last trial of stage 0 (trial 8) had been
    heard at its budget, before its pause was recorded."""

    def __init__(self, stage: int) -> None:
        self.rows = [
            SimpleNamespace(stage=s, started_at=1.0 + s, speed=None) for s in range(stage + 1)
        ]

    def stages(self, run_id):
        return self.rows

    def decisions(self, run_id):
        return [SimpleNamespace(op="report", trial=t, budget=1) for t in range(9)]

    def trials(self, run_id, states=None):
        return [SimpleNamespace(number=8, target_budget=1, state="aborted")]

    def add_stage(self, *args, **kwargs) -> None: ...

    end_stage = add_instance = update_instance = add_stage


def _resumed(planned: Path, stage: int) -> tuple[PlanExecutor, ReplayedWorkers]:
    spec = load_experiment(_write(planned, EXPERIMENT | {"plan": "plan.json"})).plan
    executor = PlanExecutor(spec, store=KilledRun(stage), run_id="run", attempt=2)  # type: ignore[arg-type]
    executor.local = executor.provider.workers = workers = ReplayedWorkers()  # type: ignore[assignment]
    executor.start()
    return executor, workers


def _task(trial: int, budget: int) -> TrialTask:
    return TrialTask(trial, {}, WorkloadRef("sleep"), seed=0, target_budget=budget)


@pytest.mark.integration
def test_a_resumed_stage_waits_for_the_trials_the_algorithm_heard_before_the_next_stage(planned):
    """The algorithm heard trial 8 at epoch 1 before the kill, so the resumed run hands out
    stage 1 while trial 8 trains again: the barrier cannot answer its reports, so no place is
    offered until it is past them (it failed the run, at every resume, before)."""
    executor, workers = _resumed(planned, stage=0)
    assert [len(executor.cluster.live), executor.idle_workers] == [3, 6]
    executor.submit(_task(8, 1))  # the restart
    assert executor.idle_workers == 0
    workers.events = [TrialEvent("report", 8, 0, epoch=1)]
    assert executor.poll() and executor.idle_workers == 5
    workers.events = [TrialEvent("paused", 8, 0, epoch=1)]  # its pause, at the barrier
    executor.submit(_task(0, 3))
    assert executor.stage == 1 and len(executor.cluster.live) == 1
    # Resumed past the barrier, the restart runs on the stage's cluster as it is.
    executor, workers = _resumed(planned, stage=1)
    executor.submit(_task(8, 1))
    assert executor.stage == 1 and len(executor.cluster.live) == 1 and workers.submitted


@pytest.mark.integration
def test_compare_refuses_a_plan_which_only_basht_run_follows(planned):
    from basht.bench.systems.compare import run_comparison

    experiment = load_experiment(_write(planned, EXPERIMENT | {"plan": "plan.json"}))
    with pytest.raises(BashtError, match="plan: a plan's elastic cluster runs with basht run"):
        run_comparison(experiment, ["native", "optuna"], results_root=planned / "results")
    assert not (planned / "results").exists()


@pytest.mark.integration
def test_a_hung_trial_aborted_on_the_cluster_frees_its_place_and_its_process_ends(planned):
    """After a search ends, the Tuner aborts a trial that never reports again: on a plan's
    cluster its worker process is killed and replaced and its place offered again, rather than
    held, with the process, until undeploy."""
    flag = planned / "hung.pid"
    ref = WorkloadRef("tests.tune.hanging_workloads:HangsOnce", {"flag": str(flag), "hang_at": 1})
    spec = load_experiment(_write(planned, EXPERIMENT | {"plan": "plan.json"})).plan
    executor = PlanExecutor(spec)
    executor.start()
    try:
        executor.setup(ref)
        free = executor.idle_workers
        executor.submit(TrialTask(0, {}, ref, seed=0, target_budget=1))
        deadline = time.monotonic() + 60
        while not flag.exists() or not flag.read_text():
            assert time.monotonic() < deadline, "the trial never reached its hang"
            executor.poll(0.1)
        pid = int(flag.read_text())
        assert executor.idle_workers == free - 1
        executor.abort(0)
        assert executor.idle_workers == free
        assert not process_alive(pid)
    finally:
        executor.shutdown()
