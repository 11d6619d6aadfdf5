"""Carbon-aware shifting of tuning jobs, simulated: what waiting for cleaner hours saves, and
whether deadlines and results survive it.

The 2020 carbon intensity series of Germany, Great Britain and France from "Let's Wait Awhile"
(Wiesner, Behnke, Scheinert, Gontarska, Thamsen: "Let's Wait Awhile: How Temporal Workload
Shifting Can Reduce Carbon Emissions in the Cloud", Middleware 2021,
doi:10.1145/3464298.3493399), read from `--series-dir` (ger_ci.csv, gb_ci.csv, fr_ci.csv,
`Time,Carbon Intensity`, UTC; never copied into the project). On each, a tuning job starts at
09:00 UTC on every `--days-step`-th day of 2020 and runs through the real Tuner on the simulated
executor's virtual clock, 4 workers:

* `lcbench-3945`: LCBench's surrogate for OpenML task 3945, its per-epoch seconds unscaled; 729
  random configurations, budgets 1..52 epochs, eta 3 (nine SHA brackets of 81);
* `digits`: the measured digits-mlp curves (benchmarks/data/digits-curves.json.gz), 243 random
  configurations, budgets 1..27, eta 3; a measured second stands for an hour of the grid (the
  replay rate of examples/carbon-aware.yaml), a workload 3,600 times the digits MLP's size;
  otherwise the whole job would fit in one quarter-hour slot and there would be nothing to shift.

each with SHA and ASHA (promotion), sampler random, seed 0. Each job runs once carbon-agnostic:
its length L (makespan) and its best configuration. Then, with the same seed, behind a
`CarbonGate` (`basht.tune.carbon_gate`, the gate `basht run` uses) with deadlines of 1x, 1.5x,
2x and 3x L from the start, with the persistence forecast (the same hour a day earlier) and
with the perfect one (the series itself; `--forecasts` also takes `persistence-N`, the mean of
the same hours over N earlier days, `schedule.forecast_days: N`), quarter-hour slots and the
shifter's default 10 % margin. The gate is told the job's epochs: what the carbon-agnostic run
trained (`--work exact`, the default: SHA's count is `expected_epochs` exactly, ASHA's is not),
or `expected_epochs` (`--work expected`, what `basht run` tells it).

Energy: each worker draws 100 W while busy (loading or training an epoch) and nothing while
idle; the savings in percent do not depend on the power. The emissions of a run are exact: each
epoch occupied its worker from `at - train_s` to `at` (the executor's reports), carried onto the
series from the job's start and integrated over the step series. Carbon-agnostic: the
carbon-agnostic run's own intervals from the same start (not W/M at full width). Oracle:
`oracle_emissions_g`, the same worker-seconds as divisible work in the cleanest hours before the
deadline at full width, a lower bound no real schedule reaches. Placement:
`placed_emissions_g`, the same divisible work at full width in the quarter hours the forecast
(made at the start) ranks cleanest: what the forecast alone allows, so the gap between it and
the oracle is the forecast's, and the gap between the run and it the job's shape and the
deadline guard's. A deadline is missed when the shifted run ends after it.

Per (workload, algorithm, region, deadline, forecast), over the start days: the median and the
10th percentile of the saving against carbon-agnostic, the oracle's median saving, the share of
it reached (the median saving over the oracle's median saving, the targets' measure; the JSON
also has the share of all jobs' grams together), deadline misses, how many runs were exactly
carbon-agnostic's schedule (same emissions and end), in how many the best configuration found
differs from the carbon-agnostic run's, and in how many the epochs trained differ (ASHA's
promotions depend on timing). The summary lines check the targets: no deadline missed;
at 1x every run is carbon-agnostic's schedule; with the persistence forecast at 2x, the median
saving is at least 80 % of the oracle's on each series (all jobs of the series pooled).

A whole year (366 days, the default) takes about 45 minutes on two cores (`--jobs`, one
process per core by default); every 5th day (`--days-step 5`: 74 days, every weekday in turn)
a fifth of that.

    python benchmarks/carbon_shift.py [--series-dir /work/shared/data/carbon-2020]
        [--days-step 1] [--jobs N] [--regions DE GB FR] [--workloads lcbench digits]
        [--algorithms sha asha] [--factors 1 1.5 2 3] [--work exact|expected]
        [--forecasts persistence perfect persistence-7] [--out FILE]

`results/carbon_shift_forecast_days.json` is `--workloads lcbench --days-step 10 --forecasts
persistence persistence-7 --jobs 1`: yesterday against the mean of the last seven days.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from _results import write_results  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from basht.energy.carbon import CarbonIntensity, TimeSeriesIntensity  # noqa: E402
from basht.energy.shifting import (  # noqa: E402
    CarbonShifter,
    PerfectForecast,
    PersistenceForecast,
    emissions_g,
    oracle_emissions_g,
    placed_emissions_g,
)
from basht.engine.messages import TrialEvent  # noqa: E402
from basht.engine.simulated import LearningCurve, SimulatedExecutor  # noqa: E402
from basht.experiment import Experiment  # noqa: E402
from basht.states import EventKind  # noqa: E402
from basht.tune.carbon_gate import CarbonGate  # noqa: E402
from basht.tune.factory import expected_epochs, make_algorithm  # noqa: E402
from basht.tune.tuner import Tuner  # noqa: E402
from basht.workloads.base import WorkloadRef  # noqa: E402

#: The three 2020 series of "Let's Wait Awhile" (Wiesner et al. 2021), by the region they cover.
REGIONS = {"DE": "ger_ci.csv", "GB": "gb_ci.csv", "FR": "fr_ci.csv"}
FACTORS = (1.0, 1.5, 2.0, 3.0)
FORECASTS = ("persistence", "perfect")
ALGORITHMS = ("sha", "asha")
WORKERS = 4
#: Each busy worker draws this much (an accelerator under load; illustrative: idle workers are
#: counted as off, and the savings in percent do not depend on the number).
POWER_W = 100.0
STEP_S = 900.0  # the shifter's slots: a quarter hour, the default of `basht.energy.shifting`
DIGITS = HERE / "data" / "digits-curves.json.gz"
DAYS_STEP = 1  # the default run: every day of 2020
LCBENCH_TRIALS = 729  # nine SHA brackets of 81 (rungs 1, 3, 9, 27, 52)
DIGITS_TRIALS = 243  # three brackets of 81 (rungs 1, 3, 9, 27)
DIGITS_TIME_SCALE = 3600.0  # a measured second stands for an hour, as examples/carbon-aware.yaml


def load_series(path: Path) -> TimeSeriesIntensity:
    """A `Time,Carbon Intensity` CSV of the Let's Wait Awhile repository (UTC) as a step series."""
    times: list[float] = []
    values: list[float] = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = [c.strip() for c in next(reader)]
        i_t, i_v = header.index("Time"), header.index("Carbon Intensity")
        for row in reader:
            if not row:
                continue
            moment = datetime.fromisoformat(row[i_t].strip()).replace(tzinfo=UTC)
            times.append(moment.timestamp())
            values.append(float(row[i_v]))
    return TimeSeriesIntensity(times, values, source=path.name)


# -- workloads -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A tuning job's search and where its trial times come from. `time_scale` series seconds
    pass per virtual second: a recorded curve measured in seconds stands for a workload that
    many times bigger."""

    name: str
    experiment: dict[str, Any]
    curve: Callable[[int], LearningCurve]  # a fresh curve for a run of this seed
    load_s: float = 0.0
    time_scale: float = 1.0

    def with_pruner(self, pruner: str) -> Experiment:
        data = dict(self.experiment)
        data["search"] = {**data["search"], "pruner": pruner}
        return Experiment.from_dict(data)


def lcbench_workload(task: str = "3945", max_trials: int = LCBENCH_TRIALS) -> Workload:
    from basht.workloads.lcbench import LCBenchCurve, space

    curve = LCBenchCurve(task)  # pure: one instance serves every run
    return Workload(
        f"lcbench-{task}",
        {
            "name": "carbon-shift-lcbench",
            "seed": 0,
            "workload": {"name": "lcbench", "params": {"task": task}},
            "space": space(),
            "search": {
                "sampler": "random",
                "metric": "val_accuracy",
                "mode": "max",
                "min_budget": 1,
                "max_budget": 52,
                "eta": 3,
                "max_trials": max_trials,
            },
        },
        lambda seed: curve,
    )


def digits_workload(
    path: Path = DIGITS, max_trials: int = DIGITS_TRIALS, time_scale: float = DIGITS_TIME_SCALE
) -> Workload:
    from basht.engine import RecordedCurves

    curves = RecordedCurves.load(path)
    return Workload(
        "digits",
        {
            "name": "carbon-shift-digits",
            "seed": 0,
            "workload": {"name": "digits-mlp"},
            "space": {
                "lr": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True},
                "hidden": {"type": "int", "low": 32, "high": 256, "log": True},
                "dropout": {"type": "float", "low": 0.0, "high": 0.3, "step": 0.1},
                "weight_decay": {"type": "float", "low": 1.0e-6, "high": 1.0e-3, "log": True},
                "batch_size": {"type": "choice", "values": [32, 64, 128]},
                "optimizer": {"type": "choice", "values": ["adam", "sgd"]},
            },
            "search": {
                "sampler": "random",
                "metric": curves.metric,
                "mode": curves.mode,
                "min_budget": 1,
                "max_budget": 27,
                "eta": 3,
                "max_trials": max_trials,
            },
        },
        curves.with_seed,  # drawing rows moves through a shuffle: each run its own table
        load_s=curves.load_s,
        time_scale=time_scale,
    )


# -- one run ------------------------------------------------------------------------------------


class _Recording(SimulatedExecutor):
    """The simulated executor, keeping when each worker was busy (loads and epochs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.busy: list[tuple[float, float]] = []
        self.epochs = 0

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        events = super().poll(timeout_s)
        busy = self.busy
        for e in events:
            if e.kind == EventKind.REPORT:
                busy.append((e.at - e.train_s - e.validate_s, e.at))
                self.epochs += 1
            elif e.kind == EventKind.LOADED and e.load_s > 0:
                busy.append((e.at - e.load_s, e.at))
        return events


@dataclass
class Run:
    """One simulated run, on the virtual clock."""

    makespan_s: float
    busy: list[tuple[float, float]]
    epochs: int
    trials: int
    best_value: float | None
    best_config: dict[str, Any] | None
    gate_log: list[dict[str, Any]] = field(default_factory=list)


def run(
    experiment: Experiment, workload: Workload, seed: int, gate: CarbonGate | None = None
) -> Run:
    """The experiment's search through the real Tuner (as `basht.tune.simulate.simulate` runs
    it), keeping each worker's busy intervals and the best configuration."""
    algorithm = make_algorithm(experiment)
    executor = _Recording(
        WORKERS,
        workload.curve(seed),
        load_s=workload.load_s,
        seed=seed,
        metric=algorithm.metric,
    )
    tuner = Tuner(
        algorithm,
        executor,
        store=None,
        run_id="carbon-shift",
        workload=WorkloadRef("simulated", experiment_seed=seed),
        checkpoint_dir=None,
        gate=gate,
    )
    status = tuner.run()
    return Run(
        makespan_s=executor.now(),
        busy=executor.busy,
        epochs=executor.epochs,
        trials=len(tuner.trials),
        best_value=status.best_value,
        best_config=status.best_config,
        gate_log=gate.log if gate is not None else [],
    )


# -- one job --------------------------------------------------------------------------------------


def forecast_of(kind: str, series: CarbonIntensity) -> PerfectForecast | PersistenceForecast:
    """`perfect`, `persistence` (yesterday) or `persistence-N` (the mean of N earlier days)."""
    if kind == "perfect":
        return PerfectForecast(series)
    _, _, days = kind.partition("-")
    return PersistenceForecast(series, days=int(days or 1))


def forecast_kind(text: str) -> str:
    """A `--forecasts` value, checked: perfect, persistence or persistence-N (N from 1 to 28)."""
    name, _, days = text.partition("-")
    if text == "perfect" or (
        name == "persistence" and (not days or (days.isdigit() and 1 <= int(days) <= 28))
    ):
        return text
    raise argparse.ArgumentTypeError(
        f"expected perfect, persistence or persistence-N, got {text!r}"
    )


def run_emissions_g(
    series: CarbonIntensity, busy: Sequence[tuple[float, float]], start: float, time_scale: float
) -> float:
    """The run's busy intervals placed from `start` on the series, `POWER_W` each: exact."""
    return emissions_g(
        series, [(start + a * time_scale, start + b * time_scale, POWER_W) for a, b in busy]
    )


def job(
    workload: Workload,
    pruner: str,
    series: CarbonIntensity,
    start: float,
    factors: Sequence[float] = FACTORS,
    forecasts: Sequence[str] = FORECASTS,
    *,
    seed: int = 0,
    base: Run | None = None,
    work: str = "exact",
) -> list[dict[str, Any]]:
    """One job started at `start` (unix seconds on `series`): run carbon-agnostic (or take
    `base`, that run), then once per deadline factor and forecast behind a `CarbonGate` with
    the same seed. A row per (factor, forecast): emissions as run, carbon-agnostic and the
    oracle's, the deadline met or missed, the same best configuration or not.

    `work`: the gate's total epochs, "exact" (what the carbon-agnostic run trained) or
    "expected" (`expected_epochs`, what `basht run` tells the gate)."""
    experiment = workload.with_pruner(pruner)
    if base is None:
        base = run(experiment, workload, seed)
    k = workload.time_scale
    length_s = base.makespan_s * k  # L, in series seconds
    work_s = sum(b - a for a, b in base.busy) * k  # worker-seconds, in series seconds
    agnostic_g = run_emissions_g(series, base.busy, start, k)
    expected = expected_epochs(experiment)
    total_epochs = base.epochs if work == "exact" else expected
    rows = []
    for factor in factors:
        deadline = start + factor * length_s
        oracle_g = oracle_emissions_g(series, start, deadline, work_s, WORKERS, POWER_W)
        for kind in forecasts:
            forecast = forecast_of(kind, series)
            placed_g = placed_emissions_g(
                series, forecast, start, deadline, work_s, WORKERS, POWER_W, STEP_S
            )
            shifter = CarbonShifter(forecast, deadline, WORKERS, step_s=STEP_S)
            gate = CarbonGate(
                shifter,
                WORKERS,
                total_epochs,
                to_series=lambda t: start + t * k,
                to_clock=lambda s: (s - start) / k,
                chain_epochs=experiment.search.max_budget,
            )
            shifted = run(experiment, workload, seed, gate)
            emitted_g = run_emissions_g(series, shifted.busy, start, k)
            finish = start + shifted.makespan_s * k
            rows.append(
                {
                    "factor": factor,
                    "forecast": kind,
                    "start": start,
                    "late_s": max(0.0, finish - deadline),
                    "missed": finish > deadline,
                    "emissions_g": emitted_g,
                    "agnostic_g": agnostic_g,
                    "oracle_g": oracle_g,
                    "placed_g": placed_g,
                    "saving": 1 - emitted_g / agnostic_g,
                    "oracle_saving": 1 - oracle_g / agnostic_g,
                    "placed_saving": 1 - placed_g / agnostic_g,
                    # the schedule is carbon-agnostic's: the same emissions and end
                    "as_agnostic": abs(emitted_g - agnostic_g) <= 1e-9 * agnostic_g
                    and shifted.makespan_s == base.makespan_s,
                    "same_best": shifted.best_config == base.best_config,
                    "same_work": shifted.epochs == base.epochs,
                }
            )
    return rows


# -- the benchmark --------------------------------------------------------------------------------


#: What every job of one workload and algorithm shares; set before the pool forks, so the
#: workers inherit it instead of unpickling a workload (its curves hold lambdas) per job.
_SHARED: dict[str, Any] = {}


def _jobs_on(region: str, start: float) -> list[dict[str, Any]]:
    """The shifted runs of one start on one region's series, as rows."""
    s = _SHARED
    return [
        {"workload": s["workload"].name, "algorithm": s["pruner"], "region": region, **r}
        for r in job(
            s["workload"],
            s["pruner"],
            s["series"][region],
            start,
            s["factors"],
            s["forecasts"],
            seed=s["seed"],
            base=s["base"],
            work=s["work"],
        )
    ]


def day_starts(days_step: int, hour: int = 9) -> list[float]:
    """09:00 UTC of every `days_step`-th day of 2020, from 1 January."""
    first = datetime(2020, 1, 1, hour, tzinfo=UTC)
    return [(first + timedelta(days=d)).timestamp() for d in range(0, 366, days_step)]


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def summarize(
    rows: list[dict[str, Any]], keys: tuple[str, ...] = ("workload", "algorithm", "region")
) -> list[dict[str, Any]]:
    """Per (workload, algorithm, region, factor, forecast): over the jobs (start days)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((*(r[k] for k in keys), r["factor"], r["forecast"]), []).append(r)
    out = []
    for key, group in groups.items():
        savings = [r["saving"] for r in group]
        oracle = [r["oracle_saving"] for r in group]
        median, median_oracle = statistics.median(savings), statistics.median(oracle)
        median_placed = statistics.median(r["placed_saving"] for r in group)
        gained = sum(r["agnostic_g"] - r["emissions_g"] for r in group)
        possible = sum(r["agnostic_g"] - r["oracle_g"] for r in group)
        out.append(
            {
                **dict(zip((*keys, "factor", "forecast"), key, strict=True)),
                "jobs": len(group),
                "median_saving": median,
                "p10_saving": float(np.percentile(savings, 10)),
                "median_oracle_saving": median_oracle,
                # the targets' measure: the median saving over the oracle's median saving
                "oracle_share": median / median_oracle if median_oracle > 0 else None,
                # the same over all jobs' grams together
                "oracle_share_total": gained / possible if possible > 0 else None,
                # the forecast's own placement of the work (divisible, full width), its share
                "median_placed_saving": median_placed,
                "placed_share": median_placed / median_oracle if median_oracle > 0 else None,
                "misses": sum(r["missed"] for r in group),
                "max_late_s": max(r["late_s"] for r in group),
                "as_agnostic": sum(r["as_agnostic"] for r in group),
                "best_differs": sum(not r["same_best"] for r in group),
                "work_differs": sum(not r["same_work"] for r in group),
            }
        )
    return out


def targets(rows: list[dict[str, Any]], regions: Sequence[str]) -> dict[str, Any]:
    """The three targets, checked over every simulated job: no deadline missed, every 1x run
    carbon-agnostic's schedule, and with the persistence forecast at 2x a median saving of at
    least 80 % of the oracle's on each series."""
    one = [r for r in rows if r["factor"] == 1.0]
    persistence = sorted({r["forecast"] for r in rows if r["forecast"].startswith("persistence")})
    by_forecast = {kind: _share_at_2x(rows, regions, kind) for kind in persistence}
    return {
        "jobs": len(rows),
        "deadline_misses": sum(r["missed"] for r in rows),
        "one_x_jobs": len(one),
        "one_x_as_agnostic": sum(r["as_agnostic"] for r in one),
        "best_differs": sum(not r["same_best"] for r in rows),
        "persistence_2x_share_by_region": by_forecast.get("persistence", {}),
        "persistence_2x_share_by_forecast": by_forecast,
    }


def _share_at_2x(rows: list[dict[str, Any]], regions: Sequence[str], kind: str) -> dict:
    """Per region, the median saving at 2x with forecast `kind` against the oracle's."""
    share: dict[str, Any] = {}
    for region in regions:
        at_2x = [
            r
            for r in rows
            if r["region"] == region and r["factor"] == 2.0 and r["forecast"] == kind
        ]
        if not at_2x:
            continue
        median = statistics.median(r["saving"] for r in at_2x)
        oracle = statistics.median(r["oracle_saving"] for r in at_2x)
        placed = statistics.median(r["placed_saving"] for r in at_2x)
        share[region] = {
            "jobs": len(at_2x),
            "median_saving": median,
            "median_oracle_saving": oracle,
            "oracle_share": median / oracle if oracle > 0 else None,
            # what the persistence forecast's own placement of divisible work reaches
            "median_placed_saving": placed,
            "placed_share": placed / oracle if oracle > 0 else None,
            "met": oracle > 0 and median >= 0.8 * oracle,
        }
    return share


def print_table(summary: list[dict[str, Any]], title: str) -> None:
    table = Table(title=title)
    columns = (
        "workload",
        "algorithm",
        "region",
        "deadline",
        "forecast",
        "jobs",
        "median saving %",
        "p10 saving %",
        "oracle median %",
        "placement median %",
        "share of oracle",
        "misses",
        "as agnostic",
        "best differs",
        "work differs",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in columns[:5] else "right")
    last = None
    for s in summary:
        group = (s["workload"], s["algorithm"], s["region"])
        if last is not None and group != last:
            table.add_section()
        last = group
        share = s["oracle_share"]
        table.add_row(
            s["workload"],
            s["algorithm"],
            s["region"],
            f"{s['factor']:g}x",
            s["forecast"],
            str(s["jobs"]),
            _percent(s["median_saving"]),
            _percent(s["p10_saving"]),
            _percent(s["median_oracle_saving"]),
            _percent(s["median_placed_saving"]),
            "-" if share is None else f"{share:.2f}",
            str(s["misses"]),
            f"{s['as_agnostic']}/{s['jobs']}",
            str(s["best_differs"]),
            str(s["work_differs"]),
        )
    Console(width=200).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--series-dir",
        type=Path,
        default=Path("/work/shared/data/carbon-2020"),
        help="the folder with ger_ci.csv, gb_ci.csv and fr_ci.csv (read there, never copied)",
    )
    parser.add_argument("--regions", nargs="+", choices=list(REGIONS), default=list(REGIONS))
    parser.add_argument(
        "--days-step", type=int, default=DAYS_STEP, help="every N-th day of 2020 (1: all 366)"
    )
    parser.add_argument("--workloads", nargs="+", choices=("lcbench", "digits"), default=None)
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument("--factors", type=float, nargs="+", default=list(FACTORS))
    parser.add_argument(
        "--forecasts",
        type=forecast_kind,
        nargs="+",
        default=list(FORECASTS),
        help="perfect, persistence (yesterday) or persistence-N (the mean of N earlier days)",
    )
    parser.add_argument(
        "--work",
        choices=("exact", "expected"),
        default="exact",
        help="the gate's total epochs: what the carbon-agnostic run trained (exact), or "
        "expected_epochs, what `basht run` tells it",
    )
    parser.add_argument("--lcbench-task", default="3945")
    parser.add_argument("--lcbench-trials", type=int, default=LCBENCH_TRIALS)
    parser.add_argument("--digits-trials", type=int, default=DIGITS_TRIALS)
    parser.add_argument("--digits-time-scale", type=float, default=DIGITS_TIME_SCALE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes running the days at once (default: one per CPU; Linux: forked)",
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "results" / "carbon_shift.json", help="the JSON"
    )
    args = parser.parse_args()
    if args.days_step < 1:
        parser.error(f"--days-step: expected 1 or more, got {args.days_step}")
    if args.jobs < 1:
        parser.error(f"--jobs: expected 1 or more, got {args.jobs}")
    if any(not f >= 1 for f in args.factors):
        parser.error("--factors: each must be 1 or more (the job's carbon-agnostic length)")
    series = {}
    for region in args.regions:
        path = args.series_dir / REGIONS[region]
        if not path.is_file():
            parser.error(f"--series-dir: no {path} (the Let's Wait Awhile series)")
        series[region] = load_series(path)
    makers = {
        "lcbench": lambda: lcbench_workload(args.lcbench_task, args.lcbench_trials),
        "digits": lambda: digits_workload(DIGITS, args.digits_trials, args.digits_time_scale),
    }
    workloads = [makers[name]() for name in args.workloads or makers]
    starts = day_starts(args.days_step)

    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    jobs_info = []
    for workload in workloads:
        for pruner in args.algorithms:
            experiment = workload.with_pruner(pruner)
            t0 = time.perf_counter()
            base = run(experiment, workload, args.seed)
            k = workload.time_scale
            _SHARED.update(
                workload=workload,
                pruner=pruner,
                series=series,
                factors=args.factors,
                forecasts=args.forecasts,
                seed=args.seed,
                base=base,
                work=args.work,
            )
            regions, days = zip(*((r, d) for r in series for d in starts), strict=True)
            if args.jobs > 1:  # in order, so the rows are the same as one process gives
                fork = multiprocessing.get_context("fork")
                with ProcessPoolExecutor(args.jobs, mp_context=fork) as pool:
                    for found in pool.map(_jobs_on, regions, days, chunksize=4):
                        rows += found
            else:
                for found in map(_jobs_on, regions, days):
                    rows += found
            wall_s = time.perf_counter() - t0
            jobs_info.append(
                {
                    "workload": workload.name,
                    "algorithm": pruner,
                    "max_trials": experiment.search.max_trials,
                    "max_budget": experiment.search.max_budget,
                    "eta": experiment.search.eta,
                    "time_scale": k,
                    "length_h": base.makespan_s * k / 3600,
                    "work_worker_h": sum(b - a for a, b in base.busy) * k / 3600,
                    "energy_kwh": sum(b - a for a, b in base.busy) * k * POWER_W / 3.6e6,
                    "epochs": base.epochs,
                    "expected_epochs": expected_epochs(experiment),
                    "trials": base.trials,
                    "best_value": base.best_value,
                    "jobs": len(series) * len(starts),
                    "wall_s": wall_s,
                }
            )
            print(
                f"{workload.name} {pruner}: {len(series) * len(starts)} jobs in {wall_s:.0f} s",
                flush=True,
            )
    total_s = time.perf_counter() - started

    summary = summarize(rows)
    done = targets(rows, list(series))
    print_table(
        summary,
        f"carbon-aware shifting against carbon-agnostic, {WORKERS} workers, start 09:00 UTC "
        f"every {args.days_step} day(s) of 2020 ({len(starts)} days)",
    )
    print(
        f"{done['jobs']} shifted runs: {done['deadline_misses']} deadline misses; at 1x "
        f"{done['one_x_as_agnostic']}/{done['one_x_jobs']} as carbon-agnostic; best "
        f"configuration differs in {done['best_differs']}"
    )
    for kind, by_region in done["persistence_2x_share_by_forecast"].items():
        for region, s in by_region.items():
            share = s["oracle_share"]
            print(
                f"{region}: {kind} at 2x saves {_percent(s['median_saving'])} % (median), the "
                f"oracle {_percent(s['median_oracle_saving'])} %: "
                f"{'-' if share is None else f'{share:.2f}'} of it "
                f"({'met' if s['met'] else 'NOT met'}); the forecast's own placement of the "
                f"work {_percent(s['median_placed_saving'])} %"
            )
    print(f"{len(rows)} shifted runs in {total_s:.0f} s")
    write_results(
        args.out,
        "carbon_shift",
        {
            "settings": {
                "series_dir": str(args.series_dir),
                "series": {r: series[r].describe() for r in series},
                "regions": list(series),
                "days_step": args.days_step,
                "days": len(starts),
                "start_hour_utc": 9,
                "factors": args.factors,
                "forecasts": args.forecasts,
                "workers": WORKERS,
                "power_w_per_worker": POWER_W,
                "step_s": STEP_S,
                "margin": CarbonShifter.__init__.__kwdefaults__["margin"],
                "work": args.work,
                "seed": args.seed,
                "lcbench_task": args.lcbench_task,
            },
            "jobs": jobs_info,
            "targets": done,
            "total_wall_s": total_s,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
