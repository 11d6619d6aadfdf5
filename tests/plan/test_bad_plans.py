"""Generated bad plan files: named in an experiment (`plan: plan.json`) or given to `basht run
--plan`, each is accepted or refused in one line naming the plan file, never a traceback, and a
refused plan stores nothing.

The plans mutated are real ones (`basht plan --json` for a tiny SHA job), with re-planning and
pre-provisioning on or off. An accepted plan is also built into the elastic cluster a run would
deploy (no process started), where a value the schema let through would fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from basht.experiment import load_experiment
from basht.plan.executor import PlanExecutor
from tests.bad_input import TINY_SHA, check_outcome, fuzz_settings, mutated, run_cli, tiny_plan


def _files(tmp_path: Path, plan: Any) -> tuple[Path, Path, Path]:
    """The plan file, an experiment that names it, and one that does not (for --plan)."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    store = {"store": f"sqlite:///{tmp_path / 'refused.db'}"}
    named = tmp_path / "exp.yaml"
    named.write_text(yaml.safe_dump(TINY_SHA | store | {"plan": "plan.json"}))
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(TINY_SHA | store))
    return path, named, bare


def _check_refused_by_run(
    tmp_path: Path, plan: Path, bare: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, err = run_cli(
        monkeypatch, capsys, "run", "-q", "--no-plots", "--plan", str(plan), str(bare)
    )
    check_outcome(code, err, plan)
    assert code == 2 and not (tmp_path / "refused.db").exists()


@fuzz_settings(100)
@given(data=st.data())
def test_a_mutated_plan_file_is_accepted_or_refused_in_one_line(
    data: st.DataObject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ways = data.draw(
        st.fixed_dictionaries({"replan": st.booleans(), "preprovision": st.booleans()})
    )
    plan = mutated(data.draw, tiny_plan() | ways, lists=True)
    path, named, bare = _files(tmp_path, plan)
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err, path)
    if code == 2:  # `basht run --plan` refuses it the same way, before anything is stored
        _check_refused_by_run(tmp_path, path, bare, monkeypatch, capsys)
    else:  # what a run deploys from it is built as well
        experiment = load_experiment(named)
        assert experiment.plan is not None
        PlanExecutor(experiment.plan)


@fuzz_settings(40)
@given(content=st.binary(max_size=120) | st.text(max_size=120).map(str.encode))
def test_any_bytes_as_a_plan_file_are_refused_in_one_line(
    content: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path, named, bare = _files(tmp_path, None)
    path.write_bytes(content)
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err, path)
    assert code == 2  # no bytes make a whole plan by chance
    _check_refused_by_run(tmp_path, path, bare, monkeypatch, capsys)


def _edited(change: dict[str, Any]) -> dict[str, Any]:
    """The plan with parts of it replaced (`{"price": {"increment_s": ...}}` edits one key)."""
    plan = json.loads(json.dumps(tiny_plan()))
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(plan.get(key), dict):
            plan[key] = plan[key] | value
        else:
            plan[key] = value
    return plan


@pytest.mark.parametrize(
    ("change", "said"),
    [
        # Each of these once failed with a traceback, in `validate` or in the run after it
        # was stored.
        (
            {"price": {"increment_s": float("inf")}},
            "plan.price.increment_s: Input should be a finite",
        ),
        (
            {"estimate": {"cost_usd": float("inf")}},
            "plan.estimate.cost_usd: Input should be a finite",
        ),
        (
            {"replan": True, "profile": {"power_w": {"idle": 10}}},
            "plan.profile.power_w: expected both idle and busy watts",
        ),
        ({"replan": True, "runs": 10**16}, "plan.replan: job too large to plan"),
        ({"replan": True, "max_instances": 10**12}, "plan.replan: job too large to plan"),
    ],
    ids=["infinite-billing-step", "infinite-estimate", "half-a-power-figure", "runs", "instances"],
)
def test_plan_values_a_run_could_not_use_are_refused_before_it_stores_anything(
    change: dict[str, Any],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    path, named, bare = _files(tmp_path, _edited(change))
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err, path)
    assert code == 2 and said in err, err
    _check_refused_by_run(tmp_path, path, bare, monkeypatch, capsys)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON: nested too deeply"),
        ('{"runs": ' + "1" * 5000 + "}", "not valid JSON: Exceeds the limit (4300 digits)"),
        ("[1, 2]", "expected a mapping (from basht plan --json)"),
        ("", "not valid JSON: Expecting value"),
    ],
    ids=["deep-nesting", "5000-digit-number", "a-list", "empty"],
)
def test_plan_files_that_are_not_a_plan_are_refused_in_one_line(
    text: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path, named, bare = _files(tmp_path, None)
    path.write_text(text)
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err, starts=f"plan {path}")
    assert code == 2 and said in err, err
    _check_refused_by_run(tmp_path, path, bare, monkeypatch, capsys)


def test_a_plan_path_that_is_a_folder_or_holds_a_nul_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    path, named, bare = _files(tmp_path, None)
    path.unlink()
    path.mkdir()
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err, starts=f"plan {path}")
    assert code == 2 and "cannot read (Is a directory)" in err, err
    _check_refused_by_run(tmp_path, path, bare, monkeypatch, capsys)
    named.write_text(yaml.safe_dump(TINY_SHA | {"plan": "plan\0.json"}))
    code, err = run_cli(monkeypatch, capsys, "validate", str(named))
    check_outcome(code, err)
    assert code == 2 and "'" + str(tmp_path / "plan\0.json").replace("\0", "\\x00") in err, err
