"""The LightGBM and XGBoost ASHA examples run as they are, only smaller: trials pause at the
rungs and are resumed from their boosters, and the best one trains to the full budget."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

import basht
from basht.store import Store
from tests.tools import ROOT

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_the_asha_example_pauses_resumes_and_trains_its_best_to_max_budget(
    library: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(library)
    monkeypatch.setenv("BASHT_PLOTS", "0")
    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load((ROOT / "examples" / library / "asha.yaml").read_text())
    # Nine trials fill rungs of 5 and 15 rounds and promote one to 45 (eta 3): the file's 30
    # trials and 135 rounds, one rung smaller.
    data["search"].update(max_trials=9, max_budget=45)
    data["store"] = f"sqlite:///{tmp_path / 'basht.db'}"

    result = basht.run(data, results_root=tmp_path / "results")

    assert result.status == "completed"
    store = Store(data["store"])
    decisions = Counter((d.op, d.result) for d in store.decisions(result.run_id))
    assert decisions["report", "pause"] >= 3 and decisions["suggest", "resume"] >= 1
    trials = store.trials(result.run_id)
    assert not [t.error for t in trials if t.error]
    (best,) = [t for t in trials if t.config == result.best_config]
    assert best.budget == 45 and best.state == "completed"
    assert best.value == pytest.approx(result.best_value)
    assert {"accuracy", "logloss"} <= set(result.test_metrics)
    assert result.test_metrics["accuracy"] > 0.9
