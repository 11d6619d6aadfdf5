"""Trackers follow a run from the store in threads of their own: told every trial, report and the
run's end in order, live while the run goes; one that fails is dropped with one warning and the
run, its store and results.json are as they would have been without it."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from basht.store import Store
from basht.track import send_plots
from tests.track.recording import Breaks, Recorder, use
from tests.track.support import SOURCE, TRIALS, tracked_run, trial_kwh


@pytest.fixture
def fast_poll(monkeypatch):
    monkeypatch.setattr("basht.track.follow.POLL_S", 0.05)


def test_a_tracker_is_told_each_report_each_trial_and_the_end(spec, tmp_path, monkeypatch):
    use(monkeypatch, tensorboard=Recorder)
    tracked = tracked_run(spec, tmp_path, ["tensorboard"])
    assert tracked.status == "completed"
    kinds = [kind for kind, _ in Recorder.calls]
    assert kinds[0] == "open" and kinds[-1] == "close" and kinds.count("close") == 1
    run = Recorder.calls[0][1]
    assert run.run_id == tracked.run_id and run.metric == "accuracy"
    reports = [r for kind, r in Recorder.calls if kind == "report"]
    expected = [(n, e + 1, v) for n, (_, _, vs) in enumerate(TRIALS) for e, v in enumerate(vs)]
    assert [(r.trial, r.epoch, r.value) for r in reports] == expected
    assert reports[0].metrics["loss"] == pytest.approx(0.8)
    # Each trial's last word is its final state, told after its last report.
    last_told = {
        t.number: (i, t.state) for i, (kind, t) in enumerate(Recorder.calls) if kind == "trial"
    }
    assert {n: s for n, (_, s) in last_told.items()} == {n: t[1] for n, t in enumerate(TRIALS)}
    for index, (kind, report) in enumerate(Recorder.calls):
        if kind == "report":
            assert index < last_told[report.trial][0]
    end = Recorder.calls[-1][1]
    assert end.status == "completed" and end.best_trial == 0
    assert "undeploy" in end.phases_s and end.test_metrics == {"accuracy": 0.55}
    assert {m.name for m in end.metrics} >= {"TWH", "JCT", "OC", "WR"}
    assert [p.name for p in end.artifacts] == ["results.json"]
    for outcome in end.outcomes:
        number = outcome.trial.number
        assert outcome.energy_kwh == pytest.approx(trial_kwh(number))
        assert outcome.energy_source == SOURCE and outcome.cost_usd == 0.0
    store = Store(tracked.store_url, create=False)
    assert store.get_run(tracked.run_id).measurement["trackers"] == {"tensorboard": "memory"}


def test_a_tracker_follows_the_run_while_it_goes(spec, tmp_path, monkeypatch, fast_poll):
    """The run waits, after storing its first trial, until the tracker has been told of it."""
    use(monkeypatch, tensorboard=Recorder)
    told_during_run = []

    def after_trial(ctx, number):
        if number == 0:
            seen = Recorder.seen.setdefault(0, threading.Event())
            told_during_run.append(seen.wait(60))

    tracked_run(spec, tmp_path, ["tensorboard"], after_trial)
    assert told_during_run == [True]


def test_a_tracker_that_fails_is_dropped_with_one_warning(spec, tmp_path, monkeypatch, caplog):
    use(monkeypatch, tensorboard=Recorder, mlflow=Breaks)
    with caplog.at_level(logging.WARNING):
        tracked = tracked_run(spec, tmp_path, ["mlflow", "tensorboard"])
        (tracked.results_dir / "timeline.png").write_bytes(b"")  # drawn after the run, as
        send_plots(tracked.store_url, tracked.run_id)  # `basht run` does: not sent, no warning
    warnings = [r for r in caplog.records if r.name.startswith("basht.track")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert "tracker mlflow" in message and "the tracking server went away" in message
    assert ("abandon", None) in Recorder.calls
    # The other tracker and the run carry on as if nothing had happened.
    assert tracked.status == "completed"
    assert [kind for kind, _ in Recorder.calls].count("close") == 1
    results = json.loads((tracked.results_dir / "results.json").read_text())
    assert results["status"] == "completed" and len(results["trials"]) == len(TRIALS)
    assert results["metrics"]["TWH"]["value"] > 0
