"""How fast `sampler: tpe` proposes: Basht's TPE against Optuna's own study, side by side.

Basht's TPE is Optuna's TPESampler fitted on the results of one budget (basht/tune/tpe.py); it
asks with the log of the normal CDF evaluated over whole arrays (basht/tune/log_ndtr.py) where
Optuna evaluates it one number at a time in Python, and converts each result's parameters to
Optuna's internal form once (basht/tune/fast_tpe.py) where Optuna converts them all at every
suggestion. For a growing number of results on the LCBench search space (7 parameters, results
from the surrogate's validation accuracy after one epoch), each row times the same suggestions
three ways, on one machine in one process:

- Basht's TPE as it runs;
- Basht's TPE with Optuna's TPESampler and log-CDF as shipped (what it cost before), whose
  proposals must be the same configurations, bit for bit (the `same` column);
- an Optuna study with the same results and a TPESampler (`n_startup_trials=0`), asked through
  Optuna's ask-and-tell interface: the peer, as Optuna ships it.

    python benchmarks/tpe_speed.py [--results 100 300 1000] [--asks 30] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import Any

from _results import write_results
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
TASK = "3945"


def told_results(count: int) -> list[tuple[dict, float]]:
    """`count` random LCBench configurations and their validation accuracy after one epoch."""
    from basht.tune.samplers import RandomSampler
    from basht.workloads.lcbench import OUTPUTS, predict, space

    sampler = RandomSampler(space(), 7)
    configs = [sampler.next() for _ in range(count)]
    accuracy = predict(TASK, configs)[:, 0, OUTPUTS.index("val_accuracy")]
    return [(c, float(v)) for c, v in zip(configs, accuracy, strict=True)]


def basht_asks(results: list[tuple[dict, float]], asks: int) -> tuple[list[dict], float]:
    """The next `asks` proposals of Basht's TPE after `results`, and the seconds they took."""
    from basht.tune import TPESampler
    from basht.workloads.lcbench import space

    sampler = TPESampler(space(), seed=0, mode="max", min_observations=len(results))
    for config, value in results:
        sampler.observe(config, 1, value)
    sampler.next()  # builds the study and adds the results: not a suggestion's cost
    start = time.perf_counter()
    proposed = [sampler.next() for _ in range(asks)]
    return proposed, time.perf_counter() - start


def optuna_asks(results: list[tuple[dict, float]], asks: int) -> float:
    """Seconds Optuna's own TPE study takes for `asks` suggestions after the same results."""
    import optuna

    from basht.space import SearchSpace
    from basht.tune.optuna_space import params, suggest
    from basht.tune.tpe import drawn_distributions
    from basht.workloads.lcbench import space

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lcbench = SearchSpace.coerce(space())
    distributions = drawn_distributions(optuna, lcbench)
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=0)
    )
    for config, value in results:
        study.add_trial(
            optuna.trial.create_trial(
                params=params(config, lcbench), distributions=distributions, value=value
            )
        )
    start = time.perf_counter()
    for _ in range(asks):
        trial = study.ask()
        suggest(trial, lcbench)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return time.perf_counter() - start


def _plain_tpe(optuna: Any, **kwargs: Any) -> Any:
    return optuna.samplers.TPESampler(**kwargs)


def measure(count: int, asks: int) -> dict[str, Any]:
    from basht.tune import tpe

    results = told_results(count)
    fast, fast_s = basht_asks(results, asks)
    own = tpe.vectorised_log_ndtr, tpe.cached_tpe_sampler
    tpe.vectorised_log_ndtr, tpe.cached_tpe_sampler = contextlib.nullcontext, _plain_tpe
    try:
        slow, slow_s = basht_asks(results, asks)
    finally:
        tpe.vectorised_log_ndtr, tpe.cached_tpe_sampler = own
    optuna_s = optuna_asks(results, asks)
    return {
        "results": count,
        "asks": asks,
        "basht_ms_per_ask": 1000 * fast_s / asks,
        "basht_plain_optuna_ms_per_ask": 1000 * slow_s / asks,
        "optuna_ms_per_ask": 1000 * optuna_s / asks,
        "speedup_over_plain_optuna": slow_s / fast_s,
        "optuna_over_basht": optuna_s / fast_s,
        "same_proposals": fast == slow,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--asks", type=int, default=30)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "tpe_speed.json")
    args = parser.parse_args()
    rows = [measure(count, args.asks) for count in args.results]
    table = Table(title="TPE: milliseconds per suggestion (LCBench space, 7 parameters)")
    for column in (
        "results",
        "Basht",
        "Basht, Optuna's TPE as shipped",
        "Optuna study",
        "speed-up",
        "Optuna / Basht",
        "same",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["results"]),
            f"{r['basht_ms_per_ask']:.1f}",
            f"{r['basht_plain_optuna_ms_per_ask']:.1f}",
            f"{r['optuna_ms_per_ask']:.1f}",
            f"{r['speedup_over_plain_optuna']:.1f}x",
            f"{r['optuna_over_basht']:.1f}x",
            "yes" if r["same_proposals"] else "NO",
        )
    Console().print(table)
    write_results(args.out, "tpe_speed", {"task": TASK, "rows": rows})


if __name__ == "__main__":
    main()
