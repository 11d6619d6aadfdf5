"""Weights & Biases, offline: one W&B run per trial grouped by the Basht run, its configuration,
its reports as history and its final figures as summary, read back from the offline run files by
wandb's own reader (`wandb leet inspect`). W&B runs a service process: an integration test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.track.support import SOURCE, TRIALS, tracked_run, trial_kwh

pytestmark = [pytest.mark.integration]


def inspect(run_dir: Path, *options: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", *options, str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def summary_of(run_dir: Path) -> dict[str, Any]:
    return json.loads(inspect(run_dir, "--summary"))


def records_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in inspect(run_dir).splitlines() if line.strip()]


def test_each_trial_is_an_offline_run_in_the_run_s_group(spec, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "online")  # never the network, whatever the environment
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    tracked = tracked_run(spec, tmp_path, ["wandb"])
    folder = tracked.results_dir / "wandb"
    runs = {p.name.split(f"-{tracked.run_id}")[-1]: p for p in folder.glob("offline-run-*")}
    trial_names = [f"-trial-{n:04d}" for n in range(len(TRIALS))]
    assert sorted(runs) == ["", *trial_names]  # the trials, and the run itself

    for number, (config, state, values) in enumerate(TRIALS):
        run_dir = runs[trial_names[number]]
        summary = summary_of(run_dir)
        assert summary["name"] == f"trial-{number:04d}" and summary["project"] == "t"
        assert summary["config"] == config
        assert summary["state"] == ("failed" if state == "failed" else "finished")
        figures = summary["summary"]
        assert figures["energy_kwh"] == pytest.approx(trial_kwh(number))
        assert figures["energy_source"] == SOURCE and figures["state"] == state
        assert figures["cost_usd"] == 0 and figures["budget"] == len(values)
        records = records_of(run_dir)
        (header,) = [r["run"] for r in records if r["type"] == "run"]
        assert header["run_group"] == tracked.run_id and header["job_type"] == "trial"
        history = [r["history"]["item"] for r in records if r["type"] == "history"]
        steps = [(h["epoch"], pytest.approx(h["accuracy"])) for h in history]
        assert steps == list(enumerate(values, 1))

    whole = summary_of(runs[""])
    assert whole["config"]["search.metric"] == "accuracy"
    assert {"TWH", "JCT", "phase/run_s", "test/accuracy"} <= set(whole["summary"])
    assert whole["summary"]["status"] == "completed"
    assert (runs[""] / "files" / "results.json").is_file()
