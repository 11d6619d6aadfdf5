"""The charts' JSON of a run, live and finished, read from a store written as the runner writes it."""

from __future__ import annotations

import json
import re

import pytest

from basht.energy.monitor import J_PER_KWH
from basht.report.charts import run_charts, script
from basht.store import Store
from tests.dashboard.support import T0, experiment_spec, finish, live_run


@pytest.fixture
def live(tmp_path, monkeypatch) -> tuple[Store, str]:
    spec = experiment_spec(tmp_path, energy_budget_kwh=0.001, carbon_budget_g=5.0)
    store = Store(spec["store"])
    return store, live_run(store, spec, tmp_path, monkeypatch)


def test_a_live_run_counts_from_the_end_of_its_setup_as_its_run_phase_is_not_stored_yet(live):
    store, run_id = live
    data = run_charts(store, run_id, now=T0 + 6)
    assert data["origin"] == T0 + 2
    assert data["run"]["live"] and data["run"]["elapsed_s"] == 4.0
    # What is going on first, then how trials ended.
    assert list(data["counts"].items()) == [("running", 1), ("pending", 1), ("completed", 1)]
    assert [(r["trial"], r["at_s"], r["value"]) for r in data["reports"]] == [
        (0, 1.0, 0.5), (1, 1.5, 0.6), (0, 2.0, 0.7),
    ]  # fmt: skip
    assert data["best"] == [
        {"at_s": 1.0, "value": 0.5, "trial": 0},
        {"at_s": 1.5, "value": 0.6, "trial": 1},
        {"at_s": 2.0, "value": 0.7, "trial": 0},
    ]


def test_a_running_trial_holds_its_worker_up_to_now_on_the_timeline(live):
    store, run_id = live
    timeline = run_charts(store, run_id, now=T0 + 6)["timeline"]
    assert timeline["lanes"] == 2
    bars = {
        (s["trial"], s["lane"], s["state"]): (s["start_s"], s["end_s"])
        for s in timeline["segments"]
    }
    assert bars == {(0, 0, "completed"): (0.0, 2.0), (1, 1, "running"): (0.5, 4.0)}


def test_energy_and_emissions_so_far_against_the_budgets(live):
    store, run_id = live
    energy = run_charts(store, run_id, now=T0 + 6)["energy"]
    assert energy["kwh"] == pytest.approx(24.0 / J_PER_KWH)
    assert energy["emissions_g"] == pytest.approx(2.4)
    assert energy["g_per_kwh"] == pytest.approx(2.4 / (24.0 / J_PER_KWH))
    assert energy["source"] == "estimate"
    assert energy["budgets"] == {"energy_kwh": 0.001, "emissions_g": 5.0, "cost_usd": None}
    # Every component's running total, summed; before the run phase, deploy and setup.
    assert [(p["at_s"], p["kwh"] * J_PER_KWH) for p in energy["series"]] == [
        (-1.0, pytest.approx(12.0)),
        (0.0, pytest.approx(24.0)),
    ]


def test_a_resumed_monitor_starts_its_totals_again_and_the_curve_adds_them_up(live):
    store, run_id = live
    store.add_power_samples(
        run_id,
        [
            {
                "at": T0 + 9,
                "node": "local",
                "component": "cpu",
                "source": "estimate",
                "energy_j": 5.0,
            }
        ],
    )
    series = run_charts(store, run_id, now=T0 + 10)["energy"]["series"]
    assert series[-1]["kwh"] * J_PER_KWH == pytest.approx(20.0 + 4.0 + 5.0)


def test_a_finished_run_has_its_metrics_table_2_first_and_times_from_its_run_phase(live):
    store, run_id = live
    finish(store, run_id)
    data = run_charts(store, run_id)
    assert not data["run"]["live"] and data["run"]["elapsed_s"] == 3.0
    assert [m["name"] for m in data["metrics"]] == ["TWH", "WR", "trials"]
    assert data["run"]["best"] == {"trial": 0, "value": 0.7, "config": {"x": 0.1, "n": 2}}
    assert data["objectives"] is None


def test_a_run_of_several_objectives_carries_its_front(tmp_path, monkeypatch):
    objectives = [{"metric": "accuracy", "mode": "max"}, {"metric": "loss", "mode": "min"}]
    spec = experiment_spec(tmp_path, objectives=objectives)
    store = Store(spec["store"])
    run_id = live_run(store, spec, tmp_path, monkeypatch)
    for trial in store.trials(run_id):  # every report needs both objectives
        store.add_report(
            trial.id,
            3,
            0.8 - trial.number / 10,
            {"accuracy": 0.8, "loss": 0.1 * trial.number},
            0.1,
            0.0,
        )
    store.update_trial(store.trials(run_id)[1].id, state="completed")
    objectives_data = run_charts(store, run_id)["objectives"]
    assert [o["metric"] for o in objectives_data["objectives"]] == ["accuracy", "loss"]
    front = {t["trial"] for t in objectives_data["trials"] if t["on_front"]}
    assert front == {0}  # as accurate as trial 1, and of lower loss


def test_the_chart_script_can_be_inlined_in_a_page():
    code = script()
    assert "</script" not in code.lower()
    assert "Chart.js v4" in code and "chartjs-plugin-zoom" in code and "BashtCharts" in code


def test_the_html_report_inlines_the_charts_and_no_value_can_end_their_script(live):
    """A configuration's string is data, not markup: `<` is escaped in the inlined JSON."""
    from basht.report.html import run_html

    store, run_id = live
    store.add_trial(run_id, 3, {"x": "</script><script>alert(1)</script>"}, 2, state="pending")
    page = run_html(store, run_id, None)
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert "alert(1)" in page and "<script>alert" not in page
    start = page.index('id="basht-chart-data">') + len('id="basht-chart-data">')
    data = json.loads(page[start : page.index("</script>", start)])
    assert data["trials"][3]["config"] == {"x": "</script><script>alert(1)</script>"}
    assert "BashtCharts.mount(" in page and not re.search(r"<script[^>]+src=", page)
