"""`benchmarks/lcbench.py`'s units: appended as they end, skipped when they ran, and run in parts
(some methods first, the rest later) merged into one unit, as a long grid is run."""

from __future__ import annotations

import json
import sys

import pytest

from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import lcbench  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

UNIT = ("3945", 4, 0)
STEP = lcbench.SYNE_TUNE_STEP


@pytest.mark.integration  # its units run in worker processes
def test_a_unit_run_in_parts_runs_only_the_missing_methods_and_reads_back_whole(tmp_path):
    runs = tmp_path / "runs.jsonl"
    lcbench.run_units([UNIT], 0.5, ["random"], runs, 1, None, STEP)
    lcbench.run_units([UNIT], 0.5, ["random", "ASHA"], runs, 1, None, STEP)
    lines = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [sorted(line["methods"]) for line in lines] == [["random"], ["ASHA"]]

    (unit,) = lcbench.read_runs(runs, ["random", "ASHA"], STEP)
    assert (unit["task"], unit["workers"], unit["seed"]) == UNIT
    assert unit["methods"]["random"] == lines[0]["methods"]["random"]
    assert unit["methods"]["ASHA"] == lines[1]["methods"]["ASHA"]

    lcbench.run_units([UNIT], 0.5, ["random", "ASHA"], runs, 1, None, STEP)
    assert len(runs.read_text().splitlines()) == 2  # nothing left to run


def test_a_line_cut_short_by_a_kill_is_skipped_and_syne_tune_at_another_step_is_not_merged(
    tmp_path,
):
    runs = tmp_path / "runs.jsonl"
    whole = {"task": "3945", "workers": 4, "seed": 0, "synetune_step": STEP / 2, "machine": "m"}
    result = {"regret": {"1.0": 0.1}, "trained_to_max": 1, "wall_s": 0.1}
    runs.write_text(
        json.dumps({**whole, "methods": {"ASHA": result, "Syne Tune ASHA": result}})
        + "\n"
        + '{"task": "3945", "workers": 4, "se'
    )
    assert lcbench.read_runs(runs, ["ASHA"], STEP)
    assert not lcbench.read_runs(runs, ["ASHA", "Syne Tune ASHA"], STEP)
    assert lcbench.read_runs(runs, ["ASHA", "Syne Tune ASHA"], STEP / 2)


def test_basht_against_syne_tune_counts_every_unit_that_ran_the_three_ashas():
    def result(regret: float, wall_s: float) -> dict:
        return {
            "regret": {str(f): regret for f in lcbench.FRACTIONS},
            "trained_to_max": 1,
            "wall_s": wall_s,
        }

    def unit(task: str, seed: int, methods: dict) -> dict:
        return {"task": task, "workers": 4, "seed": seed, "budget_s": 1.0, "methods": methods}

    ashas = {
        "ASHA": result(0.1, 1),
        "ASHA (stopping)": result(0.3, 1),
        "Syne Tune ASHA": result(0.2, 10),
    }
    whole = [unit("a", 0, {**ashas, "random": result(0.5, 1)})]
    compared = [*whole, unit("b", 0, ashas), unit("b", 1, ashas)]
    summary = lcbench.summarise(
        lcbench.case_rows(whole, [*lcbench.ASHAS, "random"]),
        lcbench.case_rows(compared, list(lcbench.ASHAS)),
    )
    assert summary["asha_comparison_units"] == 3
    assert summary["basht_asha_no_worse_than_synetune_asha"]["cases"] == 2
    assert summary["basht_stopping_asha_no_worse_than_synetune_asha"]["cases"] == 0
    assert summary["basht_asha_wall_time_ratio_synetune_over_basht"] == 10
    assert summary["methods"]["random"]["median_rank"] == 4  # ranked on the whole units only
