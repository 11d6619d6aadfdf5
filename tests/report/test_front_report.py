"""What a run of several objectives reports: the Pareto front on the console, the HTML report's
Objectives section and its two plots, and the hypervolume rows of a comparison."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from basht.report.compare import Row, objective_rows
from basht.report.console import result_tables
from basht.report.html import run_sections
from basht.tune.pareto import hypervolume, reference_point
from tests.cli import basht, cli_env
from tests.conftest import BASE
from tests.report.test_console import _summary

NAMES = ("accuracy", "train_energy_kwh", "train_time_s")
MODES = ("max", "min", "min")
# (trial, state, accuracy, energy kWh, time s): 0 and 1 make the front; 2 is dominated by 1;
# 3 stopped early; 4 is the most accurate but breaks `train_energy_kwh <= 5`.
TRIALS = (
    (0, "completed", 0.9, 3.0, 30.0),
    (1, "completed", 0.7, 1.0, 12.0),
    (2, "completed", 0.6, 2.0, 20.0),
    (3, "stopped", 0.5, 0.5, 4.0),
    (4, "completed", 0.95, 6.0, 50.0),
)
BOUND = 5.0


def _costs(values: dict[str, float], k: int) -> tuple[float, ...]:
    return tuple(
        -values[n] if m == "max" else values[n] for n, m in zip(NAMES[:k], MODES[:k], strict=True)
    )


def objectives(k: int = 2, energy: bool = True, bound: float = BOUND) -> dict[str, Any]:
    """A run's `objectives` summary as `basht.report.front` builds it, over TRIALS' first `k`
    objectives, the tested trial 0."""
    trials = []
    for number, state, *values in TRIALS:
        named = dict(zip(NAMES[:k], values, strict=False))
        trials.append(
            {
                "trial": number,
                "state": state,
                "config": {"lr": 0.01 * (number + 1), "optimizer": "adam"},
                "budget": 9,
                "values": named,
                "feasible": values[1] <= bound,
                "at_s": float(number),
                "energy_kwh": values[1] / 10 if energy else None,
                "on_front": number in (0, 1),
            }
        )
    completed = [t for t in trials if t["state"] == "completed"]
    reference = reference_point([_costs(t["values"], k) for t in completed])
    front = [t for t in trials if t["on_front"]]
    volume = hypervolume([_costs(t["values"], k) for t in completed if t["feasible"]], reference)
    over, spent = [], 0.0
    for t in trials:
        spent += t["energy_kwh"] or 0.0
        if t["on_front"]:
            over.append(
                {
                    "at_s": t["at_s"],
                    "trial": t["trial"],
                    "hypervolume": volume * (t["trial"] + 1) / 2,
                    "energy_kwh": spent if energy else None,
                }
            )
    return {
        "objectives": [{"metric": n, "mode": m} for n, m in zip(NAMES[:k], MODES[:k], strict=True)],
        "constraints": [{"metric": "train_energy_kwh", "max": bound, "min": None}],
        "scalarize": None,
        "choose": "first",
        "chosen": 0,
        "front": [{k_: t[k_] for k_ in ("trial", "config", "values")} for t in front],
        "hypervolume": volume,
        "reference": {
            n: -r if m == "max" else r
            for n, m, r in zip(NAMES[:k], MODES[:k], reference, strict=True)
        },
        "trials": trials,
        "over_time": over,
        "metric_names": list(NAMES[:k]),
    }


def summary(**over: Any) -> dict[str, Any]:
    return _summary(objectives=objectives(**over), measurement={"energy_sources": ["estimate"]})


def _text(data: dict[str, Any]) -> str:
    console = Console(width=160, record=True)
    console.print(result_tables(data))
    return console.export_text()


# -- the console ---------------------------------------------------------------------------------


def test_the_console_shows_the_front_best_first_with_its_hypervolume_and_the_tested_trial():
    text = _text(summary())
    lines = text.splitlines()
    assert any(line.startswith("Pareto front") for line in lines)
    header = next(line for line in lines if "┃" in line and "accuracy (max)" in line)
    assert "train_energy_kwh (min; kWh, estimate)" in header and "config" in header
    rows = [line for line in lines if re.match(r"│\s+\d+( \(tested\))? │", line)]
    assert [row.split("│")[1].strip() for row in rows] == ["0 (tested)", "1"]
    assert "0.9" in rows[0] and "lr=0.01, optimizer=adam" in rows[0]
    flat = " ".join(text.split())
    assert f"hypervolume {objectives()['hypervolume']:.4g}, from the reference point" in flat
    assert "tested: trial 0, by the rule choose: first (the best accuracy" in flat
    assert "constraints: train_energy_kwh ≤ 5" in flat


def test_a_run_of_one_metric_has_no_front_table():
    text = _text(_summary(objectives=None))
    assert "Pareto front" not in text and "hypervolume" not in text


def test_the_rule_and_an_empty_front_are_said_in_words():
    data = summary()
    data["objectives"] |= {"choose": {"weights": [0.5, 0.5]}, "front": []}
    flat = " ".join(_text(data).split())
    assert "Pareto front (empty: no completed trial kept the constraints)" in flat
    assert "by the rule choose: weights [0.5, 0.5]" in flat
    assert "not on the front" in flat


def test_a_metric_name_is_shown_as_it_is_not_read_as_markup():
    data = summary()
    data["objectives"]["objectives"][0]["metric"] = "acc[/x]"
    for point in data["objectives"]["front"]:
        point["values"]["acc[/x]"] = point["values"].pop("accuracy")
    data["objectives"]["reference"] = {"acc[/x]": 0.5, "train_energy_kwh": 6.0}
    assert "acc[/x] (max)" in _text(data)


# -- the HTML report -----------------------------------------------------------------------------


def test_the_html_report_has_an_objectives_section_with_the_front_and_its_plots(tmp_path):
    plots = {}
    for name in ("best_so_far", "pareto", "front_over_time"):
        plots[name] = tmp_path / f"{name}.png"
        plots[name].write_bytes(b"png")
    page = "".join(run_sections(summary(), plots))
    section = page[page.index("<h2>Objectives</h2>") : page.index("<h2>Phases</h2>")]
    assert "<th>train_energy_kwh (min; kWh, estimate)</th>" in section
    assert '<td class="num">0 (tested)</td><td class="num">0.9</td>' in section
    assert "<p>Hypervolume " in section and "reference point accuracy" in section
    assert section.count("<img") == 2 and "The shaded region" in section
    # Its plots are shown there, not again among the run's other plots.
    assert page[page.index("<h2>Plots</h2>") :].count("<img") == 1


def test_a_run_of_one_metric_has_no_objectives_section():
    assert "Objectives" not in "".join(run_sections(_summary(objectives=None), None))


def test_the_caption_says_only_the_first_two_of_more_objectives_are_plotted(tmp_path):
    plots = {"pareto": tmp_path / "p.png"}
    plots["pareto"].write_bytes(b"png")
    page = "".join(run_sections(summary(k=3), plots))
    assert "The run has 3 objectives and this plots the first two" in page


# -- the plots -----------------------------------------------------------------------------------


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The axes of each front figure as it is saved."""
    pytest.importorskip("matplotlib")
    from basht.report import front_plots

    saved: list[Any] = []
    keep = front_plots._save

    def save(fig: Any, path: Any) -> Any:
        saved.append(fig.axes[0])
        return keep(fig, path)

    monkeypatch.setattr(front_plots, "_save", save)
    return saved


def _draw(data: dict[str, Any], folder: Path) -> dict[str, Path]:
    from basht.report.front_plots import front_plot_jobs

    return {name: job.draw() for name, job in front_plot_jobs(data, folder, "native · t").items()}


def _legend(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_the_pareto_plot_marks_front_dominated_infeasible_tested_and_the_bound(drawn, tmp_path):
    paths = _draw(summary(), tmp_path)
    assert sorted(p.name for p in paths.values()) == ["front_over_time.png", "pareto.png"]
    pareto, over = drawn
    legend = _legend(pareto)
    for entry in ("Pareto front (2)", "dominated (1)", "infeasible (1)", "tested (trial 0)"):
        assert entry in legend
    assert "stopped early, at its last rung (1)" in legend
    assert any(e.startswith("dominated by the front (hypervolume") for e in legend)
    assert "constraint train_energy_kwh ≤ 5" in legend
    dashed = [line for line in pareto.lines if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in dashed] == [BOUND]
    assert pareto.get_xlabel() == "accuracy (max)"
    assert pareto.get_ylabel() == "train_energy_kwh (min; kWh, estimate)"
    assert over.get_xlabel() == "energy spent by the trials so far (kWh, estimate)"


def test_a_bound_far_off_the_values_is_named_not_drawn(drawn, tmp_path):
    """A bound of 1000 kWh drawn on an axis of a few kWh would squash every trial into a line."""
    _draw(summary(bound=1000.0), tmp_path)
    pareto = drawn[0]
    assert "constraint train_energy_kwh ≤ 1000 (off the axis)" in _legend(pareto)
    assert not [line for line in pareto.lines if line.get_linestyle() == "--"]
    assert pareto.get_ylim()[1] < 10


def test_more_objectives_plot_the_first_two_and_no_energy_plots_against_time(drawn, tmp_path):
    _draw(summary(k=3, energy=False), tmp_path)
    pareto, over = drawn
    assert "(the first two of 3 objectives)" in pareto.get_title(loc="left")
    assert not any(e.startswith("dominated by the front") for e in _legend(pareto))
    assert over.get_xlabel() == "seconds since the first report"


def test_a_run_of_one_metric_has_no_front_plots(tmp_path):
    from basht.report.front_plots import front_plot_jobs

    assert front_plot_jobs(_summary(objectives=None), tmp_path, "x") == {}


# -- the comparison ------------------------------------------------------------------------------


def test_compared_hypervolumes_are_measured_from_one_reference_point():
    a, b = summary(), summary()
    b["objectives"]["reference"] = {"accuracy": 0.4, "train_energy_kwh": 4.0}
    rows = {r.label: r for r in objective_rows({"a": [a], "b": [b], "c": [_summary()]})}
    worst = {"accuracy": 0.4, "train_energy_kwh": 6.5}  # a's energy, b's accuracy
    assert a["objectives"]["reference"]["train_energy_kwh"] == worst["train_energy_kwh"]
    label = next(k for k in rows if k.startswith("hypervolume"))
    assert label == (
        "hypervolume (reference point accuracy 0.4, train_energy_kwh 6.5: the worst of the "
        "runs', for all)"
    )
    expected = hypervolume([(-0.9, 3.0), (-0.7, 1.0)], (-0.4, 6.5))
    assert rows[label].values["a"] == rows[label].values["b"] == [pytest.approx(expected)]
    assert rows[label].cell("c") == "-"
    assert rows["Pareto front (trials)"].values["a"] == [2.0]
    spent = rows["energy spent by trials (kWh, estimate; Σ train_energy_kwh_spent)"]
    assert spent.values["a"] == [pytest.approx(sum(t[3] for t in TRIALS) / 10)]


def test_no_objectives_no_rows_and_other_objectives_keep_their_own_reference():
    assert objective_rows({"a": [_summary()]}) == []
    rows = objective_rows({"a": [summary()], "b": [summary(k=3)]})
    volume = next(r for r in rows if r.label.startswith("hypervolume"))
    assert volume.label == "hypervolume (each run's own reference point: the objectives differ)"
    assert isinstance(volume, Row) and volume.values["b"] == [objectives(k=3)["hypervolume"]]


# -- a real run ----------------------------------------------------------------------------------


SPEC: dict[str, Any] = copy.deepcopy(BASE)
SPEC["workload"]["params"] = {"epoch_s": 0.01}
SPEC["search"] = {
    "pruner": "asha",
    "objectives": [
        {"metric": "accuracy", "mode": "max"},
        {"metric": "train_energy_kwh", "mode": "min"},
    ],
    "constraints": [{"metric": "train_energy_kwh", "max": 1.0}],
    "max_budget": 3,
    "eta": 3,
    "max_trials": 8,
}
SPEC["measure"] = {"sample_interval_s": 0.2}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`basht run` (with its plots) of a two-objective experiment, and `basht compare` of it and
    a copy with another eta, all in one store."""
    cwd = tmp_path_factory.mktemp("front")
    files = []
    for name, eta in (("mo-a", 3), ("mo-b", 2)):
        spec = copy.deepcopy(SPEC) | {"name": name, "store": f"sqlite:///{cwd / 'basht.db'}"}
        spec["search"]["eta"] = eta
        files.append(cwd / f"{name}.yaml")
        files[-1].write_text(yaml.safe_dump(spec))
    ran = basht("run", "-q", str(files[0]), cwd=cwd, env=cli_env(BASHT_PLOTS="1"))
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    compared = basht("compare", *map(str, files), "-q", cwd=cwd)
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
    run_id = re.search(r"results/(mo-a-[\w-]+)", ran.stdout.replace("\n", "")).group(1)
    return {"cwd": cwd, "run": ran, "compare": compared, "run_id": run_id}


@pytest.mark.integration
def test_a_run_writes_its_front_plots_and_prints_its_front(real):
    Image = pytest.importorskip("PIL.Image")
    out = " ".join(real["run"].stdout.split())
    assert "pareto.png, front_over_time.png" in out
    assert "Pareto front" in out and "from the reference point" in out
    folder = real["cwd"] / "results" / real["run_id"]
    for name in ("pareto.png", "front_over_time.png"):
        with Image.open(folder / name) as image:
            assert image.format == "PNG" and image.width > 600
            assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 20, name


@pytest.mark.integration
def test_basht_report_shows_the_front_and_writes_the_objectives_section(real):
    shown = basht("report", real["run_id"], cwd=real["cwd"])
    assert shown.returncode == 0, shown.stderr
    flat = " ".join(shown.stdout.split())
    assert "Pareto front" in flat and "hypervolume" in flat and "tested: trial" in flat
    assert "train_energy_kwh (min; kWh," in flat
    written = basht("report", real["run_id"], "--html", cwd=real["cwd"])
    assert written.returncode == 0, written.stderr
    page = Path(written.stdout.split("report:", 1)[1].split()[0]).read_text()
    section = page[page.index("<h2>Objectives</h2>") : page.index("<h2>Phases</h2>")]
    assert '<img alt="Pareto front"' in section and '<img alt="hypervolume over time"' in section
    assert "<h3>Pareto front</h3>" in section and "reference point" in section


@pytest.mark.integration
def test_compare_prints_the_hypervolume_and_the_energy_spent(real):
    out = real["compare"].stdout
    assert re.search(
        r"│ hypervolume \(reference point accuracy [^│]*│\s+[\d.e+-]+ │\s+[\d.e+-]+ │", out
    )
    assert "│ Pareto front (trials)" in out and "│ energy spent by trials (kWh," in out
