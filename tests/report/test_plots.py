"""The plots of a real comparison (native, Optuna, Ray Tune): written, readable, and true to the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from basht.report import runstats
from basht.report.plots import write_comparison_plots, write_run_plots
from basht.report.timeline import segments
from tests.test_compare import RealComparison, real_comparison

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("matplotlib")

pytestmark = pytest.mark.integration

RUN_PLOTS = ("best_so_far.png", "timeline.png", "energy.png", "phases.png")
COMPARISON_PLOTS = ("best_so_far.png", "phases.png", "energy.png")


@pytest.fixture
def real(tmp_path_factory: pytest.TempPathFactory) -> RealComparison:
    return real_comparison(tmp_path_factory)


def _drawn(path: Path) -> int:
    """How many colours a PNG has: a blank or failed figure has one or two."""
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 150
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or [])


def test_compare_wrote_every_plot_for_the_comparison_and_each_run(real):
    folder = Path(real.comparison.folder)
    for name in COMPARISON_PLOTS:
        assert _drawn(folder / name) > 20, name
    for _, run_id in real.comparison.pairs():
        results = Path(real.store.get_run(run_id).results_dir)
        for name in RUN_PLOTS:
            assert _drawn(results / name) > 20, (run_id, name)


def test_plots_are_written_anew_from_the_store(real, tmp_path):
    pairs = real.comparison.pairs()
    written = write_comparison_plots(real.store, pairs, tmp_path / "cmp", target=0.2)
    assert sorted(p.name for p in written.values()) == sorted(COMPARISON_PLOTS)
    written = write_run_plots(real.store, pairs[0][1], tmp_path / "run")
    assert sorted(p.name for p in written.values()) == sorted(RUN_PLOTS)
    assert all(_drawn(p) > 20 for p in written.values())


def test_the_timeline_puts_every_trial_on_a_worker_without_overlaps(real):
    for system, run_id in real.comparison.pairs():
        segs = segments(real.store, run_id, lanes=2)
        trials = real.store.trials(run_id)
        assert {s.trial for s in segs} == {t.number for t in trials}, system
        assert {s.lane for s in segs} <= {0, 1}, system
        final = {s.trial: s.state for s in segs if s.state != "paused"}
        assert final == {t.number: t.state for t in trials}, system
        for lane in (0, 1):
            spans = sorted((s.start_s, s.end_s) for s in segs if s.lane == lane)
            for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
                assert start >= end - 0.05, (system, lane)
    # Native's ASHA promotes: its paused trials ran in several segments.
    native = dict(real.comparison.pairs())["native"]
    assert any(s.state == "paused" for s in segments(real.store, native, lanes=2))


def test_the_curves_and_bars_are_the_stored_numbers(real):
    for _, run_id in real.comparison.pairs():
        curve = runstats.best_so_far(real.store, run_id, "max")
        values = [v for _, v in curve]
        assert values == sorted(values) and len(set(values)) == len(values)
        assert values[-1] == max(r.value for r in real.store.reports(run_id))
        metrics = {m.name: m.value for m in real.store.metrics(run_id)}
        energy = runstats.trial_energy_j(real.store, run_id)
        assert sum(energy.values()) / 3.6e6 == pytest.approx(metrics["TWH_total"], rel=1e-9)
        split = runstats.energy_by_kind_j(real.store, run_id)
        assert sum(split.values()) / 3.6e6 == pytest.approx(metrics["energy_total"], rel=1e-9)
        phases = runstats.phase_durations(real.store, run_id)
        assert set(phases) == {p.name for p in real.store.phases(run_id)}
        # The line is held to the end of the run phase, after the last new best.
        length = runstats.run_length_s(real.store, run_id)
        assert length == pytest.approx(phases["run"]) and curve[-1][0] <= length
