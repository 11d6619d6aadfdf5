"""The run plots' axes and notes where there is little or nothing to draw."""

from __future__ import annotations

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
