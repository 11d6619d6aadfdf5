"""`basht compare` for real: native, Optuna and Ray Tune in turn, one table, one comparison kept.

The report tests (tests/report/test_plots.py, test_html.py) read the same comparison: running all
three systems costs most of a minute, so it runs once per test session (`real_comparison`).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.bench import PHASES
from basht.bench.systems.compare import parse_systems, run_comparison
from basht.errors import BashtError
from basht.experiment import Experiment, load_experiment
from basht.report.compare import Row, compare_rows
from basht.report.comparison import Comparison, load_comparison
from basht.store import Store
from tests import cli
from tests.conftest import BASE

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("native", "optuna", "raytune")
TARGET = 0.2  # the sleep curve's better configurations pass it at their second epoch


def basht(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli.basht(*args, cwd=cwd, timeout=600)


@dataclass
class RealComparison:
    cwd: Path
    file: Path
    proc: subprocess.CompletedProcess[str]
    comparison: Comparison
    store: Store


_REAL: dict[str, RealComparison] = {}


def real_comparison(tmp_path_factory: pytest.TempPathFactory) -> RealComparison:
    """The session's one `basht compare` of all three systems (run on first use)."""
    if "it" not in _REAL:
        pytest.importorskip("optuna")
        pytest.importorskip("ray")
        cwd = tmp_path_factory.mktemp("compare")
        spec: dict[str, Any] = copy.deepcopy(BASE)
        spec["name"] = "cmp"
        spec["workload"]["params"] = {"epoch_s": 0.02}
        spec["search"].update(pruner="asha", max_budget=3, eta=3, max_trials=6)
        spec["measure"] = {"sample_interval_s": 0.2}
        spec["store"] = f"sqlite:///{cwd / 'basht.db'}"
        file = cwd / "cmp.yaml"
        file.write_text(yaml.safe_dump(spec))
        proc = basht(
            "compare", str(file), "--systems", ",".join(SYSTEMS), "--target", str(TARGET), "-q",
            cwd=cwd,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (folder,) = (cwd / "results").glob("compare-*")
        comparison = load_comparison(folder)
        _REAL["it"] = RealComparison(cwd, file, proc, comparison, Store(spec["store"]))
    return _REAL["it"]


@pytest.fixture
def real(tmp_path_factory: pytest.TempPathFactory) -> RealComparison:
    return real_comparison(tmp_path_factory)


@pytest.mark.integration
def test_each_system_runs_in_turn_and_one_table_shows_them_side_by_side(real):
    out = real.proc.stdout
    header = next(line for line in out.splitlines() if "native" in line and "raytune" in line)
    assert header.index("native") < header.index("optuna") < header.index("raytune")
    for label in ("best validation accuracy", "test accuracy", "trials stopped", "JCT (ms)"):
        assert label in out
    assert f"time to accuracy ≥ {TARGET:g} (s)" in out
    assert "deploy (s)" in out and "undeploy (s)" in out and "WR (%)" in out

    runs = real.comparison.runs
    assert [r.system for r in runs] == list(SYSTEMS)
    assert all(r.status == "completed" and r.run_id for r in runs)
    windows = []
    for entry in runs:
        phases = real.store.phases(entry.run_id)
        assert [p.name for p in phases] == list(PHASES)
        assert real.store.get_run(entry.run_id).system == entry.system
        assert len(real.store.trials(entry.run_id)) == 6
        windows.append((phases[0].start, phases[-1].end))
    # Each system was fully undeployed before the next one was deployed.
    for (_, end), (start, _) in zip(windows, windows[1:], strict=False):
        assert end <= start


@pytest.mark.integration
def test_the_rows_hold_every_system_value_and_table_2(real):
    rows = {r.label: r for r in compare_rows(real.store, real.comparison)}
    for name in ("TWH (kWh)", "CINT (gCO2eq/kWh)", "JCT (ms)", "OC (USD)", "WTT (ms)", "WR (%)"):
        assert all(rows[name].values[s] for s in SYSTEMS), name
    for system, run_id in real.comparison.pairs():
        run = real.store.get_run(run_id)
        assert rows["best validation accuracy (max)"].values[system] == [run.best_value]
        jct = next(m.value for m in real.store.metrics(run_id) if m.name == "JCT")
        assert rows["JCT (ms)"].values[system] == [jct]
    # Time to target: the run phase's start to the first report at the target (if any).
    reached = rows[f"time to accuracy ≥ {TARGET:g} (s)"]
    assert any(reached.values.values())
    for system, run_id in real.comparison.pairs():
        start = next(p.start for p in real.store.phases(run_id) if p.name == "run")
        first = [r.at - start for r in real.store.reports(run_id) if r.value >= TARGET]
        assert reached.values[system] == ([pytest.approx(min(first))] if first else [])


@pytest.mark.integration
def test_report_reads_the_comparison_back(real):
    ident = real.comparison.id
    proc = basht("report", ident[:20], "--json", cwd=real.cwd)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["comparison"]["id"] == ident
    row = next(r for r in data["rows"] if r["label"] == "JCT (ms)")
    assert set(row["cells"]) == set(SYSTEMS)
    shown = basht("report", ident, cwd=real.cwd)
    assert shown.returncode == 0 and "raytune" in shown.stdout and "JCT (ms)" in shown.stdout


@pytest.mark.integration
def test_repeat_gives_each_system_several_seeds_and_cells_their_median_and_range(spec, tmp_path):
    spec["workload"]["params"] = {"epoch_s": 0.01}
    spec["search"].update(max_budget=2, max_trials=3)
    comparison = run_comparison(
        Experiment.from_dict(spec), ["native"], repeat=2, results_root=tmp_path / "results"
    )
    assert comparison.seeds == [0, 1]
    assert [(r.system, r.seed, r.status) for r in comparison.runs] == [
        ("native", 0, "completed"),
        ("native", 1, "completed"),
    ]
    store = Store(spec["store"])
    assert [store.get_experiment(store.get_run(r.run_id).experiment_id).spec["seed"]
            for r in comparison.runs] == [0, 1]  # fmt: skip
    rows = {r.label: r for r in compare_rows(store, comparison)}
    assert len(rows["JCT (ms)"].values["native"]) == 2
    assert "–" in rows["JCT (ms)"].cell("native")
    assert load_comparison(comparison.id, tmp_path / "results").runs == comparison.runs


def test_a_cell_is_the_median_and_range_over_seeds():
    row = Row("JCT (ms)", values={"native": [3.0, 1.0, 2.0], "optuna": [5.0], "raytune": []})
    assert row.cell("native") == "2 (1–3)"
    assert row.cell("optuna") == "5"
    assert row.cell("raytune") == "-"
    assert row.median("native") == 2.0


@pytest.mark.integration
def test_bad_input_is_one_line_and_exit_code_2(spec, write_spec, tmp_path):
    proc = basht("compare", str(write_spec(spec)), "--systems", "native,nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--systems: unknown system 'nope'" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()  # nothing ran


def test_systems_and_repeats_are_checked_before_anything_runs(spec, tmp_path):
    assert parse_systems("native, optuna,native") == ["native", "optuna"]
    with pytest.raises(BashtError, match="unknown system 'ray'"):
        parse_systems(["ray"])
    with pytest.raises(BashtError, match="--systems: give at least one of"):
        parse_systems(",")
    with pytest.raises(BashtError, match="--repeat: must be at least 1"):
        run_comparison(Experiment.from_dict(spec), ["native"], repeat=0, results_root=tmp_path)
    # A GPU file compares nothing with a peer that would train on CPU: refused, nothing runs.
    spec["resources"].update(accelerator="gpu", devices=["cpu"])
    gpu = Experiment.from_dict(spec)
    with pytest.raises(BashtError, match="gpu runs with system: native; system: optuna trains"):
        run_comparison(gpu, ["native", "optuna"], results_root=tmp_path)
    assert not list(tmp_path.iterdir())


@dataclass
class SleepComparison:
    cwd: Path
    proc: subprocess.CompletedProcess[str]
    folder: Path


_SLEEP: dict[str, SleepComparison] = {}


@pytest.fixture
def unreached(tmp_path_factory: pytest.TempPathFactory) -> SleepComparison:
    """One quick `basht compare` (native, sleep) whose target is never reached, with the store
    named relative to the folder it ran in, as examples/ name it."""
    if "it" not in _SLEEP:
        cwd = tmp_path_factory.mktemp("unreached")
        spec: dict[str, Any] = copy.deepcopy(BASE)
        spec["name"] = "far"
        spec["workload"]["params"] = {"epoch_s": 0.01}
        spec["search"].update(max_budget=2, max_trials=3)
        spec["store"] = "sqlite:///basht.db"
        (cwd / "far.yaml").write_text(yaml.safe_dump(spec))
        proc = basht("compare", "far.yaml", "--systems", "native", "--target", "5", "-q", cwd=cwd)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        (folder,) = (cwd / "results").glob("compare-*")
        _SLEEP["it"] = SleepComparison(cwd, proc, folder)
    return _SLEEP["it"]


@pytest.mark.integration
def test_a_target_never_reached_is_a_row_that_says_so(unreached):
    label = "time to accuracy ≥ 5 (s)"
    (line,) = [x for x in unreached.proc.stdout.splitlines() if label in x]
    assert "not reached" in line
    shown = basht("report", unreached.folder.name, "--json", cwd=unreached.cwd)
    assert shown.returncode == 0, shown.stderr
    row = next(r for r in json.loads(shown.stdout)["rows"] if r["label"] == label)
    assert row["cells"] == {"native": "not reached"} and row["values"] == {"native": []}


def test_time_to_target_says_how_many_seeds_reached_it(monkeypatch):
    import basht.report.compare as compare

    reached = {"a0": 2.0, "a1": None, "a2": 4.0, "b0": None, "b1": None, "c0": 1.0}
    monkeypatch.setattr(compare, "time_to_target", lambda store, run, *_: reached[run])
    runs = {
        "a": [{"run_id": r} for r in ("a0", "a1", "a2")],
        "b": [{"run_id": r} for r in ("b0", "b1")],
        "c": [{"run_id": "c0"}],
        "d": [],  # no run got as far as the store
    }
    row = compare._time_to_target(None, 0.9, "accuracy", "max", runs)  # type: ignore[arg-type]
    assert row.label == "time to accuracy ≥ 0.9 (s)"
    assert [row.cell(s) for s in "abcd"] == ["3 (2–4), 2/3 reached", "not reached", "1", "-"]
    assert row.values["a"] == [2.0, 4.0] and row.median("a") == 3.0


@pytest.mark.integration
@pytest.mark.parametrize("target", ["nan", "inf", "-inf"])
def test_a_target_that_is_not_a_finite_number_is_one_line(spec, write_spec, tmp_path, target):
    path = write_spec(spec)
    proc = basht("compare", str(path), "--systems", "native", f"--target={target}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip().splitlines() == [
        f"error: --target: must be a finite number, got {float(target)}"
    ]
    assert not (tmp_path / "results").exists() and not (tmp_path / "basht.db").exists()


@pytest.mark.integration
def test_the_comparison_keeps_its_sqlite_store_by_absolute_path(unreached, tmp_path):
    """Reported from another folder with --results, a relative `sqlite:///basht.db` would miss."""
    data = json.loads((unreached.folder / "comparison.json").read_text())
    assert data["store"] == f"sqlite:///{(unreached.cwd / 'basht.db').resolve()}"
    results = str(unreached.cwd / "results")
    shown = basht("report", unreached.folder.name, "--results", results, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["comparison"]["id"] == unreached.folder.name

    # A comparison saved before, with the URL as given, is still read: from the folder it ran
    # in, and from elsewhere (its store beside the results folder).
    old = tmp_path / "old" / "results"
    shutil.copytree(unreached.folder, old / unreached.folder.name)
    saved = old / unreached.folder.name / "comparison.json"
    saved.write_text(json.dumps({**data, "store": "sqlite:///basht.db"}))
    shutil.copy(unreached.cwd / "basht.db", tmp_path / "old" / "basht.db")
    for cwd in (tmp_path / "old", tmp_path):
        shown = basht("report", unreached.folder.name, "--results", str(old), cwd=cwd)
        assert shown.returncode == 0, shown.stderr
        assert "time to accuracy ≥ 5 (s)" in shown.stdout
    assert load_comparison(saved).store == f"sqlite:///{(tmp_path / 'old' / 'basht.db').resolve()}"


def test_other_store_urls_are_kept_as_given():
    from basht.report.comparison import absolute_store_url

    for url in (
        "postgresql+psycopg://user:secret@db:5432/basht",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:////already/absolute.db",
    ):
        assert absolute_store_url(url) == url
    assert absolute_store_url("sqlite:///x/b.db?timeout=5") == (
        f"sqlite:///{Path('x/b.db').resolve()}?timeout=5"
    )


@pytest.mark.integration
def test_an_ambiguous_comparison_prefix_names_the_comparisons(unreached, tmp_path):
    results = tmp_path / "results"
    ids = [f"compare-far-{i}" for i in range(7)]
    for ident in ids:
        shutil.copytree(unreached.folder, results / ident)
    proc = basht("report", "compare-far-", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: 7 comparisons matching 'compare-far-' in results/: {', '.join(ids[:5])} and 2 "
        "more; give more of the id"
    ]
    two = basht("report", "compare-far-", "--results", str(results / "none"), cwd=tmp_path)
    assert "no comparison matching 'compare-far-'" in two.stderr
    shutil.rmtree(results / ids[6])
    shutil.rmtree(results / ids[5])
    shutil.rmtree(results / ids[4])
    three = basht("report", "compare-far-", cwd=tmp_path)
    assert three.stderr.strip() == (
        f"error: 4 comparisons matching 'compare-far-' in results/: {', '.join(ids[:4])}; "
        "give more of the id"
    )
    # An exact id wins over the ids it is a prefix of.
    shutil.copytree(unreached.folder, results / "compare-far-1x")
    assert basht("report", "compare-far-1", "--json", cwd=tmp_path).returncode == 0


@pytest.mark.integration
def test_files_compare_side_by_side_opening_with_the_settings_they_differ_in(tmp_path):
    """Two files that differ in the pruner, on native: a column each, the difference first."""
    for name, pruner in (("with-asha", "asha"), ("without", "none")):
        spec: dict[str, Any] = copy.deepcopy(BASE)
        spec["name"] = name
        spec["workload"]["params"] = {"epoch_s": 0.01}
        spec["search"].update(pruner=pruner, max_budget=3, max_trials=6)
        spec["store"] = "sqlite:///basht.db"
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    proc = basht("compare", "with-asha.yaml", "without.yaml", "--repeat", "2", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = (tmp_path / "results").glob("compare-with-asha-vs-without-*")
    comparison = load_comparison(folder)
    assert comparison.columns == ["with-asha", "without"] and comparison.systems == ["native"]
    # Round-robin over seeds, each file with the first file's seeds.
    assert [(r.label, r.seed) for r in comparison.runs] == [
        ("with-asha", 0), ("without", 0), ("with-asha", 1), ("without", 1),
    ]  # fmt: skip
    assert all(r.status == "completed" and r.run_id for r in comparison.runs)
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    rows = {row.label: row for row in compare_rows(store, comparison)}
    assert rows["search.pruner"].text == {"with-asha": "asha", "without": "none"}
    assert rows["search.pruner"].section == "experiment"
    assert "name" not in rows and "seed" not in rows and "search.max_trials" not in rows
    assert rows["trials stopped"].median("with-asha") > 0
    assert rows["trials stopped"].median("without") == 0
    assert "search.pruner" in proc.stdout and "with-asha" in proc.stdout
    shown = basht("report", comparison.id, "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["rows"][0]["cells"] == {"with-asha": "asha", "without": "none"}


@pytest.mark.integration
def test_what_ended_each_column_s_search_is_a_row(tmp_path):
    """A target ends one file's search; the other runs out of trials and says so."""
    for name, target in (("stops", 2.0), ("runs-out", None)):
        spec: dict[str, Any] = copy.deepcopy(BASE)
        spec["name"] = name
        spec["workload"] = {"name": "tests.user_workloads:Counter"}
        spec["space"] = {"x": {"type": "float", "low": 1.0, "high": 2.0}}
        spec["search"].update(max_trials=20, max_budget=5, target=target)
        spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    experiments = [load_experiment(tmp_path / f) for f in ("stops.yaml", "runs-out.yaml")]
    comparison = run_comparison(experiments, ["native"], results_root=tmp_path / "results")
    rows = {row.label: row for row in compare_rows(Store(experiments[0].store), comparison)}
    assert rows["search ended"].text == {
        "stops": "target 2.0 reached",
        "runs-out": "max_trials (20) reached",
    }


def test_files_that_cannot_be_compared_are_refused_before_anything_runs(spec, tmp_path):
    one = Experiment.from_dict(spec)
    other = Experiment.from_dict(spec | {"name": "other"})
    with pytest.raises(BashtError, match="two files are named 't'"):
        run_comparison([one, one], ["native"], results_root=tmp_path)
    elsewhere = other.model_copy(update={"store": f"sqlite:///{tmp_path / 'other.db'}"})
    with pytest.raises(BashtError, match="the compared files name 2 stores"):
        run_comparison([one, elsewhere], ["native"], results_root=tmp_path)
    gpu = Experiment.from_dict(
        spec | {"name": "gpu", "resources": {"accelerator": "gpu", "devices": ["cpu"]}}
    )
    with pytest.raises(BashtError, match="^gpu: resources.accelerator: gpu runs with system: nat"):
        run_comparison([one, gpu], ["native", "optuna"], results_root=tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.mark.integration
def test_a_file_one_of_the_systems_cannot_run_is_refused_before_anything_runs(
    spec, write_spec, tmp_path
):
    """The file is checked as each compared system would run it: a TPE search has no Ray Tune
    counterpart, so comparing it on raytune is refused before native or Optuna run it."""
    spec["search"]["sampler"] = "tpe"
    proc = basht("compare", str(write_spec(spec)), "--systems", "native,raytune", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "search.sampler: tpe runs with system native or optuna, not raytune" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "basht.db").exists()
