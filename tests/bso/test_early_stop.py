"""Where a run stops, and which runs set the cost bound: the fixes that close the gap to Zeus's own
trace simulator. Each test fails on Zeus's server rules (and on ours before the fix).

The server's application runs in this process; costs are eta 0.5, max power 3000 W, beta 2, so a
report of 10 s and 100 J costs 15 050 J and the bound after it is 30 100 J.
"""

from __future__ import annotations

import json

from tests.bso.support import job_body, result_body
from tests.bso.test_server import next_trial, register, state


def report(http, trial: dict, epoch: int, time_s: float, energy_j: float, metric=0.1) -> dict:
    body = result_body(trial, current_epoch=epoch, time=time_s, energy=energy_j, metric=metric)
    response = http.post("/report", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def converge_default(http, job_id: str, **spec) -> None:
    """The default batch size (1024) reaches the target in one epoch for 15 050 J."""
    register(http, job_id, **spec)
    assert report(http, next_trial(http, job_id), 1, 10.0, 100.0, metric=0.9)["converged"]


def test_a_run_stops_before_the_epoch_that_would_pass_the_bound(inproc):
    converge_default(inproc, "es-1")
    probe = next_trial(inproc, "es-1")  # 512, 12 040 J an epoch
    assert report(inproc, probe, 1, 8.0, 80.0)["stop_train"] is False  # 24 080 next: within
    # Zeus trains a third epoch (36 120 J > 30 100 J) and only then calls the run failed.
    answer = report(inproc, probe, 2, 16.0, 160.0)
    assert (answer["stop_train"], answer["converged"]) == (True, False)
    assert "stopped before epoch 3" in answer["message"]
    assert state(inproc, "es-1")["trials"][1]["epochs"] == 2


def test_the_next_epoch_is_priced_like_the_latest_one(inproc):
    """A slow first epoch (warm-up, a power-limit profile) does not cut a run short: after two
    epochs (21 070 J) the mean epoch would predict 31 605 J, past the bound; the latest epoch
    predicts 27 090 J, and the run reaches the target at exactly that."""
    converge_default(inproc, "es-2")
    probe = next_trial(inproc, "es-2")
    assert report(inproc, probe, 1, 10.0, 100.0)["stop_train"] is False  # 30 100 next: within
    assert report(inproc, probe, 2, 14.0, 140.0)["stop_train"] is False
    assert report(inproc, probe, 3, 18.0, 180.0, metric=0.9)["converged"] is True


def test_a_failed_run_never_lowers_the_cost_bound(inproc):
    """In Zeus a run out of epochs that cost less than every converged one becomes the minimum:
    the bound then sits below any run that can reach the target."""
    converge_default(inproc, "es-3", max_epochs=3)
    cheap = next_trial(inproc, "es-3")  # 512
    assert report(inproc, cheap, 3, 1.0, 10.0)["converged"] is False  # 1 505 J, out of epochs
    s = state(inproc, "es-3")
    assert (s["min_cost"], s["min_cost_batch_size"]) == (15050.0, 1024)
    probe = next_trial(inproc, "es-3")  # 2048: 512 failed, pruning turns upward
    assert report(inproc, probe, 1, 5.0, 50.0)["stop_train"] is False  # 7 525 J: within
    # A request while the probe runs gets the cheapest size that reached the target, not 512.
    assert next_trial(inproc, "es-3")["batch_size"] == 1024


def test_the_bound_counts_the_recurrence_and_a_cheaper_one_lowers_it(inproc):
    """As the Zeus paper and its trace simulator count it: a model that took a failed run and a
    converged one cost both (Zeus's server counts the converged run alone, a tighter bound that
    cuts off runs which would have reached the target)."""
    register(inproc, "es-7", max_epochs=3)
    failed = next_trial(inproc, "es-7")  # 1024, out of epochs: 15 050 J
    assert report(inproc, failed, 3, 10.0, 100.0)["converged"] is False
    assert state(inproc, "es-7")["failed_cost"] == 15050.0
    converged = next_trial(inproc, "es-7")  # 512: 15 050 J more, the recurrence 30 100 J
    assert report(inproc, converged, 1, 10.0, 100.0, metric=0.9)["converged"] is True
    assert (state(inproc, "es-7")["min_cost"], state(inproc, "es-7")["failed_cost"]) == (
        30100.0,
        0.0,
    )
    probe = next_trial(inproc, "es-7")  # 60 200 J of bound: a run of 45 150 J may go on
    assert report(inproc, probe, 1, 15.0, 150.0)["stop_train"] is False
    assert report(inproc, probe, 2, 30.0, 300.0, metric=0.9)["converged"] is True
    # That recurrence was one run of 45 150 J, dearer than 30 100 J: the minimum stays.
    assert state(inproc, "es-7")["min_cost"] == 30100.0
    cheap = next_trial(inproc, "es-7")
    assert report(inproc, cheap, 1, 5.0, 50.0, metric=0.9)["converged"] is True
    assert state(inproc, "es-7")["min_cost"] == 7525.0  # one run, nothing failed before it


def test_a_diverged_run_stops_at_once_and_its_cost_counts(inproc):
    """A NaN metric (Zeus's client sends it as NaN, without a Content-Type) ends the run as a
    failure: Zeus trains on to the bound; a 422 would crash the script and teach nothing."""
    converge_default(inproc, "es-4")
    probe = next_trial(inproc, "es-4")
    text = json.dumps(result_body(probe, metric="@")).replace('"@"', "NaN")
    request = inproc.build_request("POST", "/report", content=text)
    request.headers.pop("content-type", None)
    answer = inproc.send(request).json()
    assert (answer["stop_train"], answer["converged"]) == (True, False)
    assert "diverged" in answer["message"]
    trial = state(inproc, "es-4")["trials"][1]
    assert (trial["status"], trial["converged"], trial["metric"], trial["time"]) == (
        "Succeeded",
        False,
        None,
        10.0,
    )
    assert next_trial(inproc, "es-4")["batch_size"] == 2048  # 512 failed its round


def test_an_infinite_metric_is_a_divergence_not_the_target(inproc):
    register(inproc, "es-6")
    trial = next_trial(inproc, "es-6")
    text = json.dumps(result_body(trial, metric="@")).replace('"@"', "Infinity")
    answer = inproc.post("/report", content=text, headers={"content-type": "application/json"})
    assert answer.json()["converged"] is False and "diverged" in answer.json()["message"]


def test_without_a_converged_run_there_is_no_bound(inproc):
    register(inproc, "es-5", **{"max_epochs": 2})
    first = next_trial(inproc, "es-5")
    assert report(inproc, first, 2, 10.0, 100.0)["converged"] is False
    assert state(inproc, "es-5")["min_cost"] is None
    probe = next_trial(inproc, "es-5")
    assert report(inproc, probe, 1, 1e6, 1e7)["stop_train"] is False  # no bound to pass


def test_job_body_defaults_are_zeus_defaults():
    """The costs above assume these knobs."""
    body = job_body("x")
    assert (body["eta_knob"], body["beta_knob"], body["max_power"]) == (0.5, 2.0, 3000.0)
