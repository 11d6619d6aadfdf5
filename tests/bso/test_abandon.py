"""Trials whose client died without ending them: a real client process is killed, or goes
silent, in the middle of a pruning probe. After the server's trial timeout the next request gets
a batch size and pruning goes on; a slow client that keeps reporting is never abandoned."""

from __future__ import annotations

import signal
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx

from tests.bso.support import result_body, sleep_until, start_training_client
from tests.bso.test_server import finish, next_trial, register, state

TIMEOUT = 3.0
"""Seconds: long enough that a request right after a report never finds the trial silent for
that long on a slow machine, short enough to keep the tests quick."""


def trials(http: httpx.Client, job_id: str) -> list[dict]:
    return state(http, job_id)["trials"]


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def kill_a_probe_then_prune_on(url: str, job_id: str, folder: Path) -> None:
    """A client killed after its first epoch's report stops holding the job back once the
    timeout has passed: its batch size is probed again, and pruning then moves on."""
    client = start_training_client(url, job_id, folder)
    assert (client.batch_size, client.trial_number) == (32, 1)  # the first pruning probe
    client.process.send_signal(signal.SIGKILL)  # no atexit: the trial is never ended
    client.process.communicate(timeout=30)
    with httpx.Client(base_url=url, timeout=30) as http:
        # Within the timeout the probe may still be alive: a new run waits for it (Concurrent).
        waiting = next_trial(http, job_id)
        assert [(t["type"], t["status"]) for t in trials(http, job_id)] == [
            ("Exploration", "Dispatched"),
            ("Concurrent", "Dispatched"),
        ]
        assert http.patch("/trials", json=waiting).status_code == 200
        sleep_until(client.reported_at + TIMEOUT + 0.3)
        again = next_trial(http, job_id)
        assert again == {"job_id": job_id, "batch_size": 32, "trial_number": 3}
        dead, _, probe = trials(http, job_id)
        assert (dead["status"], dead["epochs"], dead["time"]) == ("Abandoned", 1, 2.0)
        assert at(dead["ended"]) - at(dead["last_report"]) > timedelta(seconds=TIMEOUT)
        assert (probe["type"], probe["status"]) == ("Exploration", "Dispatched")
        finish(http, again)
        assert next_trial(http, job_id)["batch_size"] == 16  # down from 32: pruning goes on


def test_a_client_killed_mid_probe_is_abandoned_after_the_timeout(serve, tmp_path):
    server = serve("--trial-timeout", str(TIMEOUT))
    kill_a_probe_then_prune_on(server.url, "killed-1", tmp_path)
    assert "killed-1 trial 1 (batch size 32, Exploration): abandoned" in server.log.read_text()


def test_a_report_after_the_trial_was_abandoned_is_refused(serve, tmp_path):
    """A client that went silent (say its machine was suspended) and comes back too late gets a
    409 saying so, and its exit leaves the trial Abandoned; the server never waited for it."""
    server = serve("--trial-timeout", str(TIMEOUT))
    client = start_training_client(server.url, "late-1", tmp_path)
    with server.client() as http:
        sleep_until(client.reported_at + TIMEOUT + 0.3)
        assert next_trial(http, "late-1")["batch_size"] == 32  # probed again
        _, err = client.process.communicate("\n", timeout=60)  # it reports its next epoch now
        assert client.process.returncode == 1
        assert "BSO server returned 409 on POST /report: Trial(1) was abandoned at" in err
        first = {"job_id": "late-1", "batch_size": 32, "trial_number": 1}
        late = http.post("/report", json=result_body(first, metric=0.95, current_epoch=2))
        assert late.status_code == 409
        assert "this result is not used; relaunch the job" in late.json()["message"]
        assert http.patch("/trials", json=first).status_code == 200  # what its exit sent
        abandoned, probe = trials(http, "late-1")
        assert (abandoned["status"], abandoned["epochs"]) == ("Abandoned", 1)
        assert (probe["type"], probe["status"]) == ("Exploration", "Dispatched")


def test_a_slow_client_that_keeps_reporting_is_never_abandoned(serve):
    """Epochs shorter than the timeout, a run far longer than it: every report is a heartbeat,
    and other runs asking meanwhile keep waiting for the probe."""
    server = serve("--trial-timeout", "2")
    with server.client() as http:
        register(http, "slow-1")
        probe = next_trial(http, "slow-1")
        for epoch in range(1, 6):  # 0.7 s of silence before each request, 3.5 s in all
            time.sleep(0.7)
            other = next_trial(http, "slow-1")
            assert other["batch_size"] == 1024 and other["trial_number"] == epoch + 1
            assert trials(http, "slow-1")[-1]["type"] == "Concurrent"
            assert http.patch("/trials", json=other).status_code == 200
            body = result_body(probe, metric=0.1, current_epoch=epoch, time=float(epoch))
            assert http.post("/report", json=body).json()["stop_train"] is False
        running = trials(http, "slow-1")[0]
        assert (running["status"], running["epochs"], running["time"]) == ("Dispatched", 5, 5.0)
        assert at(running["last_report"]) - at(running["started"]) > timedelta(seconds=3)
        assert finish(http, probe)["converged"] is True
        assert next_trial(http, "slow-1")["batch_size"] == 512  # the probe counted
    assert "): abandoned" not in server.log.read_text()


def test_a_timeout_of_zero_never_abandons(serve):
    server = serve("--trial-timeout", "0")
    with server.client() as http:
        register(http, "never-1")
        next_trial(http, "never-1")
        time.sleep(1.1)
        assert next_trial(http, "never-1")["batch_size"] == 1024
        assert [t["type"] for t in trials(http, "never-1")] == ["Exploration", "Concurrent"]
        assert state(http, "never-1")["trial_timeout_s"] is None


def crash(http: httpx.Client, trial: dict) -> None:
    """What a client that crashes sends on its way out: the trial ends without a result."""
    assert http.patch("/trials", json=trial).status_code == 200


def test_a_batch_size_whose_probe_crashes_twice_in_a_row_fails_its_round(serve):
    """A size that kills the script every time (out of memory, say) is not probed for ever: its
    second crash in a row counts as a probe that did not reach the target."""
    server = serve()
    with server.client() as http:
        register(http, "oom-1")
        first = next_trial(http, "oom-1")
        assert first["batch_size"] == 1024
        crash(http, first)
        again = next_trial(http, "oom-1")
        assert again["batch_size"] == 1024  # one crash may be bad luck: probed again
        crash(http, again)
        # 1024 failed: nothing below it is probed downward from a failure, so up to 2048.
        assert next_trial(http, "oom-1")["batch_size"] == 2048
        assert state(http, "oom-1")["crash_limit"] == 2

        # Crashes count per size and in a row: 512's first crash after 1024's is one.
        register(http, "oom-2")
        finish(http, next_trial(http, "oom-2"))  # 1024 reaches the target
        probe = next_trial(http, "oom-2")
        assert probe["batch_size"] == 512
        crash(http, probe)
        assert next_trial(http, "oom-2")["batch_size"] == 512


def test_a_crash_limit_of_zero_probes_a_crashing_size_again_every_time(serve):
    server = serve("--crash-limit", "0")
    with server.client() as http:
        register(http, "zeus-1")
        for _ in range(3):
            trial = next_trial(http, "zeus-1")
            assert trial["batch_size"] == 1024
            crash(http, trial)
        assert state(http, "zeus-1")["crash_limit"] is None
    assert "crashed probes always probed again" in server.log.read_text()


def test_a_client_stopped_with_sigterm_ends_its_trial_before_it_dies(serve, tmp_path):
    """A scheduler's stop runs no exit hook: the client ends its trial on SIGTERM itself, so
    the job does not wait out the trial timeout, and the script still dies of the signal."""
    server = serve()  # the default timeout, a day: only the client's own word ends the trial
    client = start_training_client(server.url, "term-1", tmp_path)
    client.process.send_signal(signal.SIGTERM)
    client.process.communicate(timeout=30)
    assert client.process.returncode == -signal.SIGTERM
    with server.client() as http:
        (ended,) = trials(http, "term-1")
        assert (ended["status"], ended["epochs"]) == ("Failed", 1)
        assert next_trial(http, "term-1")["batch_size"] == 32  # probed again, not waited for
