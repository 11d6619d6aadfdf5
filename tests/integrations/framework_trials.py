"""A framework's training script run as Basht runs a trial, for the Lightning and Trainer tests.

The test makes the reporter's pipes and plays Basht's side (a line of JSON in, a word out); the
script's last line of output is its final metrics, as JSON. The examples' own `train.py` scripts
are the scripts run, so what the tests run is what the how-to pages show.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.store import Store
from tests.tools import ROOT

EXAMPLES = ROOT / "examples"
TIMEOUT_S = 180


@dataclass
class Trial:
    code: int
    reports: list[dict[str, Any]]
    result: dict[str, Any]  # the script's last line of output
    log: str
    checkpoint_dir: Path

    @property
    def steps(self) -> list[int]:
        return [r["step"] for r in self.reports]

    def metrics(self, step: int) -> dict[str, float]:
        return next(r["metrics"] for r in self.reports if r["step"] == step)


def run_script(
    script: Path,
    tmp_path: Path,
    name: str,
    answers: Mapping[int, str],
    *,
    args: tuple[str, ...] = (),
    resume_from: Path | None = None,
) -> Trial:
    """Run `script` as a trial; each report is answered `answers[step]` (default: continue)."""
    checkpoints = tmp_path / f"{name}-checkpoint"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASHT_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        OMP_NUM_THREADS="1",  # as a one-core trial runs, and the same in every run compared
        MKL_NUM_THREADS="1",
        BASHT_CHECKPOINT_DIR=str(checkpoints),
    )
    if resume_from is not None:
        env["BASHT_RESUME_FROM"] = str(resume_from)
    report_r, report_w = os.pipe()
    decision_r, decision_w = os.pipe()
    env["BASHT_REPORT_FD"], env["BASHT_DECISION_FD"] = str(report_w), str(decision_r)
    out_path, err_path = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, script.name, *args],
            cwd=script.parent,
            env=env,
            pass_fds=(report_w, decision_r),
            stdout=out,
            stderr=err,
        )
    os.close(report_w)
    os.close(decision_r)
    watchdog = threading.Timer(TIMEOUT_S, proc.kill)  # a hung script ends the read below
    watchdog.start()
    reports: list[dict[str, Any]] = []
    try:
        with os.fdopen(report_r, encoding="utf-8") as incoming:
            for line in incoming:
                reports.append(json.loads(line))
                answer = answers.get(reports[-1]["step"], "continue")
                with contextlib.suppress(BrokenPipeError):
                    os.write(decision_w, f"{answer}\n".encode())
        code = proc.wait()
    finally:
        watchdog.cancel()
        os.close(decision_w)
    lines = out_path.read_text().strip().splitlines()
    log = f"{out_path.read_text()}\n{err_path.read_text()}"
    result = json.loads(lines[-1]) if code == 0 and lines else {}
    return Trial(code, reports, result, log, checkpoints)


def copy_example(folder: str, tmp_path: Path) -> Path:
    """An example's folder copied under `tmp_path`, so a run leaves nothing in the checkout."""
    target = tmp_path / folder
    shutil.copytree(
        EXAMPLES / folder,
        target,
        ignore=shutil.ignore_patterns("basht.db", "results", "__pycache__"),
    )
    return target


def assert_asha_paused_resumed_and_stopped(url: str) -> None:
    """The first run in the store at `url` completed, and ASHA paused a trial at a rung and
    resumed it past it (its promotion), and stopped others."""
    store = Store(url)
    try:
        run = store.list_runs()[0]
        decisions = Counter((d.op, d.result) for d in store.decisions(run.id))
        trials = store.trials(run.id)
    finally:
        store.close()
    assert decisions[("report", "pause")] >= 1 and decisions[("suggest", "resume")] >= 1, decisions
    assert any(t.budget > 1 for t in trials)  # a resumed trial trained past the first rung
    assert Counter(t.state for t in trials)["stopped"] >= 1
    assert run.status == "completed"
