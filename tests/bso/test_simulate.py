"""The simulator on the trace with fixed seeds, against the real server: Zeus's choices, exactly.

`data/zeus_golden.json` holds what Zeus 0.16.0's own server code chooses on these trace jobs when
driven by Zeus's own harness (recorded by benchmarks/zeus_golden.py in a separate Zeus venv).
Replaying the same harness against `basht bso serve` must give the same batch size for every run
and the same cumulative cost: to the last bit with the numpy it was recorded with, and within a few
units in the last place elsewhere (numpy 2.5 on Python 3.12 sums one case 2 ulps apart).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from basht.bso.http import BSOClient
from basht.bso.simulate import best_fixed, simulate_fixed, simulate_server
from basht.bso.trace import TraceJob
from tests.bso.support import basht

GOLDEN = json.loads((Path(__file__).parent / "data" / "zeus_golden.json").read_text())
CASES = [pytest.param(c, id=f"{c['workload']}-{c['gpu']}-seed{c['seed']}") for c in GOLDEN["cases"]]


@pytest.fixture(scope="module")
def client(server):
    with BSOClient(server.url) as c:
        yield c


@pytest.mark.parametrize("case", CASES)
def test_same_batch_sizes_and_cost_as_zeus(client, case):
    """As Zeus's legacy simulator (the paper's code) in every case, and so as Zeus's server
    wherever the server agrees with it: where they part, the server's bound counted a single
    run, where the paper (and Basht) count the recurrence."""
    trace = TraceJob(case["workload"], case["gpu"])
    ours = simulate_server(
        trace, client, case["recurrences"], case["seed"], protocol="zeus", job_id=None
    )
    assert ours.batch_sizes == case["zeus_legacy"]["batch_sizes"]
    assert ours.cost == pytest.approx(case["zeus_legacy"]["cost"], rel=1e-14, abs=0)


def test_zeus_server_and_legacy_simulator_mostly_agree():
    """The golden data itself: Zeus's server reproduces its legacy simulator except where the
    server's early stopping (beta × its own minimum cost, failures included) judges a run that
    reached the target as over budget, which the legacy simulator never does."""
    same = [c for c in GOLDEN["cases"] if c["zeus_server"] == c["zeus_legacy"]]
    assert len(same) >= len(GOLDEN["cases"]) - 2


def test_a_fixed_seed_replays_the_same_recurrences(client):
    trace = TraceJob("squad", "v100")
    first = simulate_server(trace, client, 15, seed=3)
    again = simulate_server(trace, client, 15, seed=3)

    def key(result):
        return [(r.recurrence, r.batch_size, r.epochs, r.cost, r.converged) for r in result.runs]

    assert key(first) == key(again) and first.cost == again.cost
    assert all(any(r.converged for r in rec) for rec in first.by_recurrence())


def test_every_epoch_is_reported_and_the_server_stops_runs(client, server):
    import httpx

    trace = TraceJob("imagenet", "v100")
    result = simulate_server(trace, client, 8, seed=1, job_id="trace-imagenet-v100-epochs")
    state = httpx.get(f"{server.url}/jobs", params={"job_id": "trace-imagenet-v100-epochs"}).json()
    assert [t["batch_size"] for t in state["trials"]] == result.batch_sizes
    assert [t["epochs"] for t in state["trials"]] == [r.epochs for r in result.runs]
    assert any(not r.converged for r in result.runs)  # 64 never reaches the target
    assert all(t["status"] == "Succeeded" for t in state["trials"])


def test_fixed_baselines():
    trace = TraceJob("movielens-1m", "v100")
    default = simulate_fixed(trace, trace.default_batch_size, 20, seed=1)
    best = best_fixed(trace, 20, seed=1)
    assert default is not None and best is not None
    assert best.cost <= default.cost
    assert len({r.batch_size for r in best.runs}) == 1
    assert simulate_fixed(trace, 4, 5, seed=1) is None  # batch size 4 never converges


@pytest.mark.integration
def test_the_simulate_command_prints_the_comparison(tmp_path):
    out = tmp_path / "sim.json"
    proc = basht(
        "bso",
        "simulate",
        "--workload",
        "sentiment140",
        "--recurrences",
        "6",
        "--seed",
        "2",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "basht (epoch) on sentiment140@v100" in proc.stdout
    assert "fixed 128" in proc.stdout and "hindsight" in proc.stdout
    saved = json.loads(out.read_text())
    assert [p["policy"] for p in saved["policies"]][:2] == ["basht (epoch)", "fixed 128"]
    assert len(saved["policies"][0]["runs"]) >= 6


@pytest.mark.integration
def test_the_simulate_command_chooses_power_limits_on_request():
    proc = basht("bso", "simulate", "--workload", "squad", "--recurrences", "3", "--power-limits")
    assert proc.returncode == 0, proc.stderr
    assert "basht+PL (epoch) on squad@v100" in proc.stdout
    assert "@" in proc.stdout and "W✓" in proc.stdout  # e.g. 32@200W✓


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--workload", "mnist"], "mnist"),
        (["--eta", "2"], "--eta 2"),
        (["--eta", "-0.5"], "--eta -0.5"),
        (["--beta", "0"], "--beta 0"),
        (["--recurrences", "0"], "--recurrences 0"),
        # These reached the job spec (or numpy) and ended in a traceback with exit code 1:
        (["--beta", "nan"], "--beta nan"),
        (["--beta", "1e400"], "--beta inf"),
        (["--seed", "-1"], "--seed -1"),
        (["--seed", str(2**63)], f"--seed {2**63}"),
        (["--power-limits", "--protocol", "zeus"], "--power-limits"),
    ],
)
def test_bad_simulate_arguments_are_one_line_errors(args, named):
    proc = basht("bso", "simulate", *args)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and named in proc.stderr, proc.stderr
