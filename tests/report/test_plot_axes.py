"""The run plots' axes and notes where there is little or nothing to draw."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from basht.report import plots

pytest.importorskip("matplotlib")


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The axes of each figure as it is saved."""
    saved: list[Any] = []
    keep = plots._save

    def save(fig: Any, path: Any) -> Any:
        saved.append(fig.axes[0])
        return keep(fig, path)

    monkeypatch.setattr(plots, "_save", save)
    return saved


def test_a_run_whose_trials_all_failed_says_so_on_its_best_so_far_plot(drawn, tmp_path):
    """An empty frame from 0 to 1 reads as a search that found nothing above 0."""
    curve = plots.Curve("native", "native", [], end_s=2.0)
    plots.best_so_far_plot([curve], "accuracy", "max", None, tmp_path / "b.png", "best")
    assert [t.get_text() for t in drawn[0].texts] == ["no trial reported a value"]
    curve = plots.Curve("native", "native", [(0.5, 0.3)], end_s=2.0)
    plots.best_so_far_plot([curve], "accuracy", "max", None, tmp_path / "c.png", "best")
    assert not drawn[1].texts


def test_energy_bars_start_at_zero_when_nothing_was_measured(drawn, tmp_path):
    trials = [(0, "failed", 0.0), (1, "completed", 0.0)]
    plots.energy_plot(trials, "estimate", tmp_path / "e.png", "energy")
    assert drawn[0].get_ylim()[0] == 0


@pytest.mark.parametrize("horizontal", [False, True])
def test_bars_with_their_limits_set_once_look_as_bars_added_one_by_one(tmp_path, horizontal):
    """`limits_once` only saves time: the same limits, the same pixels (and a bar of no size
    widens nothing, as in matplotlib)."""
    image = pytest.importorskip("PIL.Image")
    rng = random.Random(3)
    lefts = [rng.uniform(-5.0, 50.0) for _ in range(300)]
    sizes = [rng.choice([0.0, rng.uniform(0.0, 3.7)]) for _ in range(300)]
    lanes = [rng.randrange(4) for _ in range(300)]
    colours = [rng.choice(["#2ca02c", "#ff7f0e", "#aec7e8"]) for _ in range(300)]

    def draw(path: Path, once: bool) -> tuple[Any, bytes]:
        fig, ax = plots._figure((9, 3))
        bars = ax.barh if horizontal else ax.bar
        with plots.limits_once(ax) if once else contextlib.nullcontext():
            if horizontal:
                bars(lanes, sizes, left=lefts, height=0.7, color=colours, edgecolor="white")
            else:
                bars(lefts, sizes, bottom=lanes, width=0.8, color=colours)
        plots._save(fig, path)
        with image.open(path) as drawn:
            return ax.dataLim.bounds, drawn.convert("RGBA").tobytes()

    assert draw(tmp_path / "once.png", True) == draw(tmp_path / "each.png", False)
