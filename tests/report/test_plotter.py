"""The plotter process: a run's plots drawn there are the plots drawn in the driver, pixel for
pixel; what goes wrong there is said in one line; the forked half of the drawing counts."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from basht.bench import run_benchmark
from basht.experiment import Experiment
from basht.report.plots import PlotJob, run_plot_jobs, write_run_plots
from basht.report.plotter import PlotError, Plotter, draw_split
from basht.store import Store

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("matplotlib")

pytestmark = pytest.mark.integration


@pytest.fixture
def asha_run(spec, tmp_path) -> tuple[str, str]:
    """A small ASHA run (trials paused at rungs and resumed): its store URL and run id."""
    spec["workload"]["params"] = {"epoch_s": 0.0}
    spec["search"].update(pruner="asha", max_budget=9, eta=3, max_trials=12)
    result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    assert result.status == "completed"
    return spec["store"], result.run_id


def _pixels(path: Path) -> bytes:
    with Image.open(path) as image:
        return image.convert("RGBA").tobytes()


def test_the_plotter_draws_the_plots_the_driver_would(asha_run, tmp_path):
    store_url, run_id = asha_run
    store = Store(store_url)
    plotter = Plotter.start()
    assert plotter is not None
    try:
        assert plotter.request(run_plot_jobs(store, run_id)) and plotter.asked
        drawn = plotter.result()
        assert not plotter.asked
    finally:
        plotter.close()
    assert sorted(drawn) == ["best_so_far", "energy", "phases", "timeline"]
    assert {p.parent for p in drawn.values()} == {Path(store.get_run(run_id).results_dir)}
    here = write_run_plots(store, run_id, tmp_path / "here")
    for name, path in drawn.items():
        assert _pixels(path) == _pixels(here[name]), name


def test_a_plot_the_plotter_cannot_draw_says_why_and_it_draws_the_next(asha_run, tmp_path):
    store_url, run_id = asha_run
    plotter = Plotter.start()
    assert plotter is not None
    try:
        plotter.request({"broken": PlotJob(tmp_path / "broken.png", _fail)})
        with pytest.raises(PlotError, match="this plot broke"):
            plotter.result()
        plotter.request(run_plot_jobs(Store(store_url), run_id))
        assert len(plotter.result()) == 4
    finally:
        plotter.close()
    plotter.close()  # twice is fine


def test_a_closed_plotter_takes_no_request(tmp_path):
    plotter = Plotter.start()
    assert plotter is not None
    plotter.close()
    assert not plotter.request({"a": PlotJob(tmp_path / "a.png", _fail)}) and not plotter.asked


def _touch(path: Path) -> Path:
    path.write_text("drawn")
    return path


def _fail() -> Path:  # module level: a plot job goes to the plotter by pickle
    raise ValueError("this plot broke")


@pytest.mark.parametrize("split", [(3, 2), (0, 5), (5, 0)])
def test_every_job_is_drawn_here_or_in_a_forked_copy(tmp_path, split):
    paths = [tmp_path / f"{i}.png" for i in range(5)]
    jobs = [lambda p=p: _touch(p) for p in paths]
    draw_split(jobs[: split[0]], jobs[split[0] :])
    assert all(p.read_text() == "drawn" for p in paths)


@pytest.mark.parametrize("where", [0, 1])  # drawn here, or in the forked copy (where it forks)
def test_a_job_that_fails_anywhere_fails_the_drawing_with_its_reason(tmp_path, where):
    jobs = [lambda: _touch(tmp_path / "a.png"), lambda: _touch(tmp_path / "b.png")]
    jobs[where] = _fail
    with pytest.raises((PlotError, ValueError), match="this plot broke"):
        draw_split(jobs[:1], jobs[1:])
    assert (tmp_path / ("b.png" if where == 0 else "a.png")).exists()  # the other one is drawn


def test_what_the_plotter_is_handed_needs_no_store_to_draw(asha_run, tmp_path):
    """The plotter imports matplotlib only: a run's plot jobs come to it without the store, the
    ORM or the experiment schema (a tenth of a second and more of its CPU, beside the run's)."""
    store_url, run_id = asha_run
    jobs = tmp_path / "jobs.pickle"
    jobs.write_bytes(pickle.dumps(run_plot_jobs(Store(store_url), run_id, tmp_path / "out")))
    code = (
        "import pickle, sys; jobs = pickle.loads(open(sys.argv[1], 'rb').read()); "
        "[job.draw() for job in jobs.values()]; "
        "print(sorted(m for m in ('sqlalchemy', 'basht.store', 'basht.experiment') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(jobs)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
    assert len(list((tmp_path / "out").glob("*.png"))) == 4
