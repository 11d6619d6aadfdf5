"""Several server processes on one SQLite file: 20 clients at once lose nothing, duplicate nothing."""

from __future__ import annotations

from tests.bso.support import bso_load, check_hammered, hammer


def test_twenty_clients_report_into_one_job_through_two_workers(serve):
    server = serve("--workers", "2")
    seen = hammer(server.url, "crowd-1", clients=20, epochs=3)
    check_hammered(server.url, "crowd-1", seen)


def test_the_load_check_counts_lost_reports_lost_trials_and_duplicates():
    """The load benchmark's check (and the PostgreSQL load test's) can fail: fed a database that
    misses what clients were told, it counts each miss."""
    load = bso_load()
    ledger = load.Ledger()
    trial = {"job_id": "j-1", "batch_size": 64, "trial_number": 1}
    ledger.handed_out += [("j-1", 1, 64), ("j-1", 1, 64), ("j-1", 2, 32)]  # one number twice
    for epoch, stop in ((1, False), (2, True)):
        report = load.epoch_result(trial, epoch, epochs=4, client=0)
        ledger.acked.setdefault(("j-1", 1), []).append(
            {**report, "stop_train": stop, "converged": stop}
        )
    ledger.ended.add(("j-1", 1))
    stored = {
        "job_id": "j-1",
        "trial_number": 1,
        "batch_size": 64,
        "status": "Dispatched",  # the final report and the end were lost
        "epochs": 1,
        "time_s": ledger.acked[("j-1", 1)][0]["time"],
        "energy_j": ledger.acked[("j-1", 1)][0]["energy"],
        "metric": ledger.acked[("j-1", 1)][0]["metric"],
        "converged": None,
    }
    verdict = load.check(ledger, [stored])
    assert (verdict.lost_reports, verdict.lost_trials, verdict.lost_ends) == (1, 1, 1)
    assert verdict.duplicates == 1
    held = {**stored, "status": "Succeeded", "converged": True, "epochs": 2}
    held.update(time_s=ledger.acked[("j-1", 1)][1]["time"])
    held.update(energy_j=ledger.acked[("j-1", 1)][1]["energy"])
    held.update(metric=ledger.acked[("j-1", 1)][1]["metric"])
    second = {**held, "trial_number": 2, "batch_size": 32, "epochs": None, "status": "Dispatched"}
    whole = load.check(
        load.Ledger(handed_out=ledger.handed_out[1:], acked=ledger.acked), [held, second]
    )
    assert (whole.lost, whole.duplicates) == (0, 0)
