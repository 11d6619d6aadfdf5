"""The LightGBM and XGBoost callbacks in a real training script run as a Basht trial: the test
plays Basht's side of the pipes (a line of JSON per round in, a word out)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.tools import ROOT

SCRIPT = Path(__file__).with_name("boosting_script.py")
MODEL_FILES = {"lightgbm": "model.txt", "xgboost": "model.json"}
TIMEOUT_S = 120


@dataclass
class Trial:
    code: int
    reports: list[dict[str, Any]]
    result: dict[str, Any]
    log: str

    @property
    def steps(self) -> list[int]:
        return [r["step"] for r in self.reports]


def _run(
    library: str,
    tmp_path: Path,
    name: str,
    answer: Callable[[int], str] | None,
    resume_from: Path | None = None,
) -> Trial:
    """Run the script as a trial whose reports `answer` decides on (no pipes when None: the
    script runs on its own, outside Basht)."""
    pytest.importorskip(library)
    out, log_path = tmp_path / f"{name}.json", tmp_path / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASHT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    fds: tuple[int, ...] = ()
    if answer is not None:
        report_r, report_w = os.pipe()
        decision_r, decision_w = os.pipe()
        fds = (report_w, decision_r)
        env["BASHT_REPORT_FD"], env["BASHT_DECISION_FD"] = str(report_w), str(decision_r)
        env["BASHT_CHECKPOINT_DIR"] = str(tmp_path / f"{name}-checkpoint")
    if resume_from is not None:
        env["BASHT_RESUME_FROM"] = str(resume_from)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), library, str(out)],
            env=env,
            pass_fds=fds,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    watchdog = threading.Timer(TIMEOUT_S, proc.kill)  # a hung script ends the read below
    watchdog.start()
    reports: list[dict[str, Any]] = []
    try:
        if answer is not None:
            for fd in fds:
                os.close(fd)
            with os.fdopen(report_r, encoding="utf-8") as incoming:
                for line in incoming:
                    reports.append(json.loads(line))
                    with contextlib.suppress(BrokenPipeError):
                        os.write(decision_w, (answer(reports[-1]["step"]) + "\n").encode())
            os.close(decision_w)
        code = proc.wait(TIMEOUT_S)
    finally:
        watchdog.cancel()
    result = json.loads(out.read_text()) if out.exists() else {}
    return Trial(code, reports, result, log_path.read_text())


def _until(step: int, then: str) -> Callable[[int], str]:
    return lambda s: then if s >= step else "continue"


LIBRARIES = pytest.mark.parametrize("library", ["lightgbm", "xgboost"])


@pytest.mark.integration
@LIBRARIES
def test_outside_a_trial_the_callback_does_nothing(library: str, tmp_path: Path) -> None:
    trial = _run(library, tmp_path, "alone", answer=None)
    assert trial.code == 0, trial.log
    assert trial.result["rounds"] == 40
    assert trial.result["decision"] == "continue"


@pytest.mark.integration
@LIBRARIES
def test_each_round_is_reported_and_stop_ends_training(library: str, tmp_path: Path) -> None:
    trial = _run(library, tmp_path, "stopped", _until(5, "stop"))
    assert trial.code == 0, trial.log
    assert trial.steps == [1, 2, 3, 4, 5]
    assert trial.result["rounds"] == 5 and trial.result["decision"] == "stop"
    metrics = trial.reports[-1]["metrics"]
    error, logloss = {
        "lightgbm": ("binary_error", "binary_logloss"),
        "xgboost": ("error", "logloss"),
    }[library]
    # Every set as <set>-<metric>, the last set (val) also by bare names, and the common two.
    assert {f"train-{error}", f"val-{error}", f"val-{logloss}", error, "accuracy"} <= set(metrics)
    assert metrics[error] == metrics[f"val-{error}"]
    assert metrics["accuracy"] == 1.0 - metrics[error]
    assert metrics["logloss"] == metrics[f"val-{logloss}"]
    assert not (tmp_path / "stopped-checkpoint" / MODEL_FILES[library]).exists()


@pytest.mark.integration
@LIBRARIES
def test_a_paused_script_resumes_to_the_model_of_one_trained_straight_through(
    library: str, tmp_path: Path
) -> None:
    straight = _run(library, tmp_path, "straight", _until(20, "stop"))
    paused = _run(library, tmp_path, "paused", _until(8, "pause"))
    assert paused.code == 0, paused.log
    assert paused.steps == list(range(1, 9))
    assert paused.result["rounds"] == 8 and paused.result["decision"] == "pause"
    saved = tmp_path / "paused-checkpoint" / MODEL_FILES[library]
    assert saved.is_file()

    resumed = _run(library, tmp_path, "resumed", _until(20, "stop"), resume_from=saved.parent)
    assert resumed.code == 0, resumed.log
    assert resumed.steps == list(range(9, 21))  # it goes on from round 9
    assert resumed.result["rounds"] == straight.result["rounds"] == 20
    assert resumed.result["predictions"] == straight.result["predictions"]
    assert resumed.reports[-1]["metrics"] == straight.reports[-1]["metrics"]


def test_resume_model_is_none_unless_resumed_with_a_saved_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from basht.integrations import lightgbm, xgboost

    for module in (lightgbm, xgboost):
        monkeypatch.delenv("BASHT_RESUME_FROM", raising=False)
        assert module.resume_model() is None
        monkeypatch.setenv("BASHT_RESUME_FROM", str(tmp_path))
        assert module.resume_model() is None  # the folder holds no model: start afresh
        (tmp_path / module.MODEL_FILE).write_text("saved")
        assert module.resume_model() == tmp_path / module.MODEL_FILE
