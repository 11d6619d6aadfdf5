"""MLflow: one parent run per Basht run, one nested run per trial.

A trial's run has its configuration as parameters, each report as metrics at its epoch, and its
energy, carbon, cost and state (as metrics and tags, the energy's source named). The parent has
the experiment's settings, the phases, Table 2, the test metrics, and results.json and the plots
as artifacts. Runs are found again by their `basht.run_id` and `basht.trial` tags, so a resumed
run or an export of a tracked run adds to them instead of starting over.

Through MlflowClient only (not the fluent API and its global active run), so a user's own MLflow
use in the same process is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from basht.experiment import TrackerSpec
from basht.track.base import Tracker, is_final
from basht.track.records import ReportInfo, RunEnd, RunInfo, TrialInfo, TrialOutcome, numbers

log = logging.getLogger(__name__)

#: The default tracking store: a SQLite file beside the run folders (MLflow 3 keeps its `mlruns`
#: file store in maintenance mode), artifacts in a folder beside it.
DEFAULT_DB = "mlflow.db"
DEFAULT_ARTIFACTS = "mlartifacts"

#: How MLflow's client retries a request, unless the environment says otherwise: its own
#: defaults (7 retries, backoff factor 2, 120 s timeout; mlflow/environment_variables.py, MLflow
#: 3.x) spend minutes on a server that is gone before the tracker can give up on it.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}

#: MLflow's limits per log_batch request (metrics, params and tags).
_BATCH = {"metrics": 1000, "params": 100, "tags": 100}
_PARENT = "mlflow.parentRunId"
_RUN_TAG = "basht.run_id"
_KIND_TAG = "basht.kind"  # run (the parent) | trial
_TRIAL_TAG = "basht.trial"


def given_uri(uri: str | None) -> str | None:
    """The tracking URI the user gave: `uri`, else MLFLOW_TRACKING_URI, else None."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or None


def tracking_uri(uri: str | None, results_dir: Path) -> str:
    """The URI given (`given_uri`), else the SQLite file beside the run folders."""
    return given_uri(uri) or f"sqlite:///{(results_dir.parent / DEFAULT_DB).resolve()}"


def is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def trial_status(state: str) -> str:
    """A trial's MLflow status: a failure is FAILED, a trial cut off KILLED, the rest (stopped
    by the pruner, paused and never promoted) FINISHED, as each is a result."""
    return {"failed": "FAILED", "aborted": "KILLED", "pending": "KILLED", "running": "KILLED"}.get(
        state, "FINISHED"
    )


def run_status(status: str) -> str | None:
    """The parent's MLflow status; None leaves it RUNNING (an export of a run still going)."""
    return {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}.get(status)


def _parent_filter(run: RunInfo) -> str:
    return f"tags.`{_RUN_TAG}` = '{run.run_id}' and tags.`{_KIND_TAG}` = 'run'"


def _ms(seconds: float | None) -> int:
    return int((time.time() if seconds is None else seconds) * 1000)


#: What MLflow takes in a param or metric name (mlflow/utils/validation.py, MLflow 3.x: letters,
#: digits, `_-. :/`, not a path that resolves to another name); and its longest param value.
_NAME_CHARS = re.compile(r"[^\w.\- :/]")
_PARAM_MAX = 6000


def mlflow_key(name: str) -> str:
    """`name` as MLflow takes it: a workload's metric `acc@1` is logged as `acc_1`."""
    key = _NAME_CHARS.sub("_", name) or "_"
    if posixpath.normpath(key) != key or key.startswith((".", "/")):
        key = "_" + key.replace("/", "_")
    return key


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:_PARAM_MAX]


class MlflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, spec: TrackerSpec, results_dir: Path, folder: Path | None = None):
        super().__init__(spec, results_dir, folder)
        self.uri = tracking_uri(spec.uri, results_dir)
        self._default_store = given_uri(spec.uri) is None  # the SQLite file beside the runs
        self.client: Any = None
        self.experiment_id = ""
        self.parent = ""
        self.run: RunInfo | None = None
        self._trials: dict[int, str] = {}  # trial number -> MLflow run id
        self._steps: dict[int, int] = {}  # trial number -> the last epoch logged
        self._metrics: dict[str, list[Any]] = defaultdict(list)  # run id -> metrics to send
        self._ended: set[int] = set()

    def where(self) -> str:
        return self.uri

    # -- opening -----------------------------------------------------------------------------

    def open(self, run: RunInfo) -> None:
        if is_http(self.uri):
            for key, value in HTTP_DEFAULTS.items():
                os.environ.setdefault(key, value)
        # "Creating initial MLflow database tables..." on its own handler: not over the progress.
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        from mlflow import MlflowClient

        self.run = run
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_id = self._experiment(self.spec.experiment or run.name)
        found = self.client.search_runs([self.experiment_id], filter_string=_parent_filter(run))
        if found:
            self.parent = found[0].info.run_id
            self.client.update_run(self.parent, status="RUNNING")
            self._find_trials()
            return
        parent = self.client.create_run(
            self.experiment_id,
            start_time=_ms(run.started_at),
            run_name=run.run_id,
            tags={
                _RUN_TAG: run.run_id,
                _KIND_TAG: "run",
                "basht.system": run.system,
                "basht.results_dir": str(run.results_dir),
                "mlflow.source.name": "basht",
                "mlflow.note.content": f"Basht run {run.run_id} of experiment {run.name}",
            },
        )
        self.parent = parent.info.run_id
        self._batch(self.parent, params=run.settings())

    def _experiment(self, name: str) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None
        if self._default_store:
            # The default store keeps its artifacts beside it, not in ./mlruns wherever it runs.
            location = (self.results_dir.parent / DEFAULT_ARTIFACTS).resolve().as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except MlflowException:  # another run made it meanwhile
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def _find_trials(self) -> None:
        """The trial runs an earlier attempt or export made, and the last epoch each logged."""
        metric = mlflow_key(self.run.metric) if self.run else ""
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{_PARENT}` = '{self.parent}'",
                page_token=token,
            )
            for found in page:
                number = found.data.tags.get(_TRIAL_TAG)
                if number is None or not number.isdigit():
                    continue
                self._trials[int(number)] = found.info.run_id
                history = self.client.get_metric_history(found.info.run_id, metric)
                if history:
                    self._steps[int(number)] = max(m.step for m in history)
            token = page.token
            if not token:
                return

    # -- as the run goes ---------------------------------------------------------------------

    def _trial_run(self, trial: TrialInfo) -> str:
        run_id = self._trials.get(trial.number)
        if run_id is None:
            assert self.run is not None
            created = self.client.create_run(
                self.experiment_id,
                start_time=_ms(trial.started_at),
                run_name=trial.label,
                tags={
                    _PARENT: self.parent,
                    _RUN_TAG: self.run.run_id,
                    _KIND_TAG: "trial",
                    _TRIAL_TAG: str(trial.number),
                    "basht.state": trial.state,
                },
            )
            run_id = self._trials[trial.number] = created.info.run_id
            self._batch(run_id, params=trial.config)
        return run_id

    def trial(self, trial: TrialInfo) -> None:
        run_id = self._trial_run(trial)
        self.client.set_tag(run_id, "basht.state", trial.state)
        if is_final(trial.state) and trial.number not in self._ended:
            self._send(run_id)  # its last reports before it ends
            self.client.set_terminated(
                run_id, trial_status(trial.state), end_time=_ms(trial.ended_at)
            )
            self._ended.add(trial.number)

    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        from mlflow.entities import Metric

        if report.epoch <= self._steps.get(trial.number, -1):
            return  # logged before (an earlier attempt, an export), or trained again
        self._steps[trial.number] = report.epoch
        values = numbers(report.metrics)
        if report.value is not None and self.run is not None:
            values.setdefault(self.run.metric, report.value)
        run_id = self._trial_run(trial)
        at = _ms(report.at)
        self._metrics[run_id] += [
            Metric(mlflow_key(k), v, at, report.epoch) for k, v in values.items()
        ]

    def flush(self) -> None:
        for run_id in list(self._metrics):
            self._send(run_id)

    def _send(self, run_id: str) -> None:
        metrics = self._metrics.pop(run_id, [])
        if metrics:
            self._batch(run_id, metrics=metrics)

    # -- the end -----------------------------------------------------------------------------

    def close(self, end: RunEnd) -> None:
        from mlflow.entities import Metric

        self.flush()
        now = _ms(None)
        for outcome in end.outcomes:
            run_id = self._trial_run(outcome.trial)
            step = outcome.trial.budget
            figures = [Metric(k, v, now, step) for k, v in outcome.figures().items()]
            self._batch(run_id, metrics=figures, tags=self._trial_tags(outcome))
            self.client.set_terminated(
                run_id, trial_status(outcome.trial.state), end_time=_ms(outcome.trial.ended_at)
            )
        values = {m.name: m.value for m in end.metrics if m.value is not None}
        values |= {f"phase.{name}_s": s for name, s in end.phases_s.items()}
        values |= {f"test.{k}": v for k, v in numbers(end.test_metrics).items()}
        if end.best_value is not None:
            values["best_value"] = end.best_value
        tags = {"basht.status": end.status, "basht.energy_source": end.energy_source}
        if end.best_trial is not None:
            tags["basht.best_trial"] = str(end.best_trial)
        if end.error:
            tags["basht.error"] = end.error[:5000]
        self._batch(
            self.parent,
            metrics=[Metric(mlflow_key(k), v, now, 0) for k, v in numbers(values).items()],
            tags=tags,
        )
        for path in end.artifacts:
            self.client.log_artifact(self.parent, str(path))
        status = run_status(end.status)
        if status is not None:
            self.client.set_terminated(self.parent, status)

    @staticmethod
    def _trial_tags(outcome: TrialOutcome) -> dict[str, str]:
        return {
            "basht.state": outcome.trial.state,
            "basht.energy_source": outcome.energy_source,
        }

    def add_artifacts(self, run: RunInfo, paths: list[Path]) -> None:
        """Files written after the run's end (its plots) to its parent run, found by its tags."""
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        experiment = client.get_experiment_by_name(self.spec.experiment or run.name)
        if experiment is None:
            return
        found = client.search_runs([experiment.experiment_id], filter_string=_parent_filter(run))
        for parent in found[:1]:
            for path in paths:
                client.log_artifact(parent.info.run_id, str(path))

    def _batch(
        self,
        run_id: str,
        *,
        metrics: list[Any] | None = None,
        params: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """log_batch within MLflow's limits per request."""
        from mlflow.entities import Param, RunTag

        parts = {
            "metrics": list(metrics or []),
            "params": [Param(mlflow_key(str(k)), _param(v)) for k, v in (params or {}).items()],
            "tags": [RunTag(k, v) for k, v in (tags or {}).items()],
        }
        while any(parts.values()):
            batch = {kind: items[: _BATCH[kind]] for kind, items in parts.items()}
            parts = {kind: items[_BATCH[kind] :] for kind, items in parts.items()}
            self.client.log_batch(run_id, **batch)
