"""Weights & Biases, offline: one W&B run per trial, grouped by the Basht run, in the run's folder.

A trial's W&B run has its configuration as config, its reports as history (step: the epoch) and
its final metrics, energy, carbon, cost and state as summary; one more W&B run, named after the
Basht run, has the phases, Table 2 and results.json. Nothing is sent anywhere: `wandb sync
results/<run-id>/wandb/offline-run-*` uploads them when the user wants to.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

from basht.experiment import TrackerSpec
from basht.track.base import Tracker
from basht.track.records import ReportInfo, RunEnd, RunInfo, TrialInfo, numbers

FOLDER = "wandb"  # made by wandb itself under the `dir` it is given
_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_ID_MAX = 64  # W&B's limit on a run id (wandb.sdk.lib.runid)


def run_id(text: str) -> str:
    """A W&B run id made from `text`: the same text gives the same id, so a resumed run or an
    export writes its trials under the ids it had."""
    clean = _ID_CHARS.sub("-", text)
    if len(clean) <= _ID_MAX:
        return clean
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{clean[: _ID_MAX - 9]}-{digest}"


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, spec: TrackerSpec, results_dir: Path, folder: Path | None = None):
        super().__init__(spec, results_dir, folder)
        self.dir = (folder or results_dir).resolve()
        self.run: RunInfo | None = None
        self.project = ""
        self._wandb: Any = None
        self._runs: dict[int, Any] = {}  # trial number -> its W&B run, open until the end
        self._steps: dict[int, int] = {}  # trial number -> the last epoch logged

    def where(self) -> str:
        return str(self.dir / FOLDER)

    def open(self, run: RunInfo) -> None:
        import wandb

        self._wandb = wandb
        self.run = run
        self.project = self.spec.project or run.name
        self.dir.mkdir(parents=True, exist_ok=True)

    def _init(self, name: str, job_type: str, config: dict[str, Any], id_text: str) -> Any:
        assert self.run is not None
        wandb = self._wandb
        settings = wandb.Settings(
            mode="offline",  # never the network
            silent=True,
            console="off",  # not the driver's output: it is the run's progress display
            disable_git=True,
            disable_code=True,
            save_code=False,
            x_disable_stats=True,  # no system sampler of its own beside the energy monitor
            x_disable_meta=True,
            x_save_requirements=False,
        )
        return wandb.init(
            dir=str(self.dir),
            project=self.project,
            group=self.run.run_id,
            name=name,
            id=run_id(id_text),
            job_type=job_type,
            config=config,
            mode="offline",
            reinit="create_new",  # one W&B run per trial, several open at once
            settings=settings,
        )

    def _trial_run(self, trial: TrialInfo) -> Any:
        found = self._runs.get(trial.number)
        if found is None:
            assert self.run is not None
            made = self._init(
                trial.label, "trial", trial.config, f"{self.run.run_id}-{trial.label}"
            )
            found = self._runs[trial.number] = made
        return found

    def trial(self, trial: TrialInfo) -> None:
        self._trial_run(trial).summary["state"] = trial.state

    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        if report.epoch <= self._steps.get(trial.number, -1):
            return  # W&B steps only go up: an epoch trained again after an interruption
        self._steps[trial.number] = report.epoch
        values = numbers(report.metrics)
        if report.value is not None and self.run is not None:
            values.setdefault(self.run.metric, report.value)
        self._trial_run(trial).log({**values, "epoch": report.epoch}, step=report.epoch)

    def close(self, end: RunEnd) -> None:
        assert self.run is not None
        for outcome in end.outcomes:
            trial = outcome.trial
            wb = self._trial_run(trial)
            final = {"state": trial.state, "energy_source": outcome.energy_source}
            if trial.value is not None:
                final[self.run.metric] = trial.value
            wb.summary.update({**outcome.figures(), **final, "budget": trial.budget})
            wb.finish(exit_code=1 if trial.state == "failed" else 0)
            del self._runs[trial.number]
        top = self._init(self.run.run_id, "run", self.run.settings(), self.run.run_id)
        summary: dict[str, Any] = {m.name: m.value for m in end.metrics if m.value is not None}
        summary |= {f"phase/{name}_s": s for name, s in end.phases_s.items()}
        summary |= {f"test/{k}": v for k, v in numbers(end.test_metrics).items()}
        top.summary.update(
            {
                **numbers(summary),
                "status": end.status,
                "energy_source": end.energy_source,
                "best_trial": end.best_trial,
                "best_value": end.best_value,
            }
        )
        for path in end.artifacts:  # copied into the run's files: a link would not outlive them
            copied = Path(top.dir) / path.name
            shutil.copyfile(path, copied)
            top.save(str(copied), base_path=top.dir, policy="now")
        top.finish(exit_code=0 if end.status == "completed" else 1)

    def abandon(self) -> None:
        runs, self._runs = list(self._runs.values()), {}
        for wb in runs:
            with contextlib.suppress(Exception):  # the tracker failed and said so once
                wb.finish(exit_code=1)
