"""Every Table 2 formula on a store built by hand, against numbers worked out here."""

from __future__ import annotations

from pathlib import Path

import pytest

from basht.experiment import Experiment
from basht.metrics import compute_metrics
from basht.report.runstats import energy_source, trial_energy_j
from basht.store import Store

KWH = 3.6e6


@pytest.fixture
def store(spec, tmp_path: Path) -> tuple[Store, str]:
    spec["resources"] = {"workers": 2, "cpus_per_worker": 1}
    spec["measure"] = {"price": {"usd_per_hour": 3.6, "vcpus": 4}, "carbon": {"g_per_kwh": 100}}
    store = Store(spec["store"])
    experiment = Experiment.from_dict(spec)
    exp_id = store.add_experiment("t", experiment.to_dict())
    run = store.create_run(exp_id, "t", "native", "local", tmp_path)
    # Phases: deploy at t=100 .. test ends at t=110 .. undeploy ends at t=111.
    for name, start, end in [
        ("deploy", 100, 101),
        ("setup", 101, 102),
        ("run", 102, 109),
        ("collect_results", 109, 109.5),
        ("test", 109.5, 110),
        ("collect_metrics", 110, 110.5),
        ("undeploy", 110.5, 111),
    ]:
        store.add_phase(run.id, name, start, end)
    # Trials: d_i = load + train + validate.
    trials = [
        (0, "completed", 1.0, 2.0, 1.0),  # d = 4 s
        (1, "stopped", 0.5, 1.0, 0.5),  # d = 2 s   (wasted)
        (2, "failed", 1.0, 0.0, 0.0),  # d = 1 s   (wasted)
        (3, "completed", 1.0, 4.0, 1.0),  # d = 6 s
    ]
    for number, state, load, train, validate in trials:
        row = store.add_trial(run.id, number, {"x": number}, 3)
        store.update_trial(row, state=state, load_s=load, train_s=train, validate_s=validate)
    joules = {0: 3600.0, 1: 1800.0, 2: 360.0, 3: 7200.0}
    accounts = [
        {
            "kind": "trial",
            "trial": n,
            "component": "cpu",
            "source": "estimate",
            "energy_j": j,
            "emissions_g": j / KWH * 100,
        }
        for n, j in joules.items()
    ] + [
        {
            "kind": k,
            "trial": None,
            "component": "cpu",
            "source": "estimate",
            "energy_j": j,
            "emissions_g": j / KWH * 100,
        }
        for k, j in [
            ("baseline", 1000.0),
            ("allocation", 500.0),
            ("overhead", 300.0),
            ("test", 200.0),
        ]
    ]
    store.replace_energy_accounts(run.id, accounts)
    return store, run.id


def test_table_2_is_computed_exactly(store):
    s, run_id = store
    m = {x.name: x for x in compute_metrics(s, run_id)}
    energies = [3600, 1800, 360, 7200]
    assert m["TWH"].value == pytest.approx(sum(energies) / 4 / KWH)
    assert m["TWH_median"].value == pytest.approx((1800 + 3600) / 2 / KWH)
    assert m["TWH_total"].value == pytest.approx(sum(energies) / KWH)
    assert m["CINT"].value == pytest.approx(100)
    assert m["JCT"].value == pytest.approx(10_000)
    assert m["OC"].value == pytest.approx(3.6 * 11 / 3600)  # deploy start to undeploy end
    assert m["WTT"].value == pytest.approx((2 + 1) * 1000)
    assert m["WTE"].value == pytest.approx((1800 + 360) / KWH)
    # Each trial's cost: its share of the instance (1 of 4 vCPUs) over its duration.
    assert m["WTC"].value == pytest.approx(3.6 * (2 + 1) / 3600 / 4)
    node = sum(energies) + 1000 + 500 + 300 + 200
    assert m["energy_total"].value == pytest.approx(node / KWH)
    assert m["WR"].value == pytest.approx(100 * (1000 + 500 + 300) / node)
    assert m["idle_allocation"].value == pytest.approx(500 / KWH)
    assert m["emissions_total"].value == pytest.approx(node / KWH * 100)
    for name in ("TWH", "WTE", "WR", "energy_total"):
        assert m[name].source == "estimate"


def test_the_wasted_set_is_configurable(store):
    s, run_id = store
    m = {x.name: x for x in compute_metrics(s, run_id, wasted_states=("failed",))}
    assert m["WTT"].value == pytest.approx(1000)
    assert m["WTE"].value == pytest.approx(360 / KWH)


def test_a_trial_whose_energy_was_not_measured_leaves_the_per_trial_figures_empty(store):
    s, run_id = store
    accounts = [
        {k: getattr(a, k) for k in ("kind", "trial", "component", "source", "energy_j")}
        | {"emissions_g": a.emissions_g}
        for a in s.energy_accounts(run_id)
    ]
    # Trial 3 ran on another Ray node: the monitor booked it as unmeasured, with nothing else.
    accounts = [a for a in accounts if a["trial"] != 3] + [
        {
            "kind": "trial",
            "trial": 3,
            "component": "unmeasured",
            "source": "unmeasured",
            "energy_j": 0.0,
            "emissions_g": 0.0,
        }
    ]
    s.replace_energy_accounts(run_id, accounts)
    m = {x.name: x for x in compute_metrics(s, run_id)}
    for name in ("TWH", "TWH_median", "TWH_total", "WTE", "WR"):
        assert (m[name].value, m[name].source) == (None, "unmeasured"), name
    assert m["trials_unmeasured"].value == 1
    # What does not need every trial's energy is still computed, from what was measured.
    node = 3600 + 1800 + 360 + 1000 + 500 + 300 + 200
    assert m["energy_total"].value == pytest.approx(node / KWH)
    assert m["energy_total"].source == "estimate"
    assert m["CINT"].value == pytest.approx(100)
    assert m["WTT"].value == pytest.approx(3000)
    # The energy plot's figures: the unmeasured trial is unknown, not 0.
    assert trial_energy_j(s, run_id) == {0: 3600.0, 1: 1800.0, 2: 360.0, 3: None}
    assert energy_source(s, run_id) == "estimate"
