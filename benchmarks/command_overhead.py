"""What running a trial as a command costs, against the in-process function path.

Each way runs the same job through `basht.run`: `--trials` (100) trials of peers_overhead's
zero-cost 27-epoch curve, ASHA (min 1, max 27, eta 3), on `--workers` (2) workers:

* function: the curve as a plain-function workload (`peers_overhead:curve`), in the worker;
* command, regex: a Python script that prints 27 lines of metrics and exits, read through the
  `metrics` regex (an unchanged script; ASHA stops it by ending its process group);
* command, reporter: a Python script that reports each epoch through `basht.integrations.report`
  and waits for the decision (what a script that can be paused does).

ms/trial is the run phase's wall time over the trials; the ratio is over the function path's.
A command trial pays for starting a Python interpreter (here about 20 ms) and for its pipes; the
function path pays for neither. Medians of `--repeats` (3) runs, interleaved.

    python benchmarks/command_overhead.py [--trials 100] [--workers 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402
from peers_overhead import EPOCHS, SPACE, asha_experiment  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

#: Prints the curve's 27 epochs and exits: the regex reads them.
PRINTING = """
import math, sys
x, n = float(sys.argv[1]), int(sys.argv[2])
for epoch in range(1, {epochs} + 1):
    print(f"epoch {{epoch}} accuracy {{(1 - math.exp(-0.5 * epoch)) / (1 + abs(x) + n):.6f}}")
"""
#: Reports the curve's epochs through the reporter, ending when told.
REPORTING = """
import math
from basht.integrations import config, report
c = config()
for epoch in range(1, {epochs} + 1):
    if report(step=epoch, accuracy=(1 - math.exp(-0.5 * epoch)) / (1 + abs(c["x"]) + c["n"])) != "continue":
        break
"""
WAYS = ("function", "command, regex", "command, reporter")


def workload(way: str, folder: Path) -> dict[str, Any]:
    if way == "function":
        return {"name": "peers_overhead:curve"}
    if way == "command, regex":
        (folder / "printing.py").write_text(PRINTING.format(epochs=EPOCHS))
        return {
            "command": "{python} printing.py {x} {n}",
            "metrics": r"epoch (?P<step>\d+) accuracy (?P<accuracy>[0-9.]+)",
            "cwd": str(folder),
        }
    (folder / "reporting.py").write_text(REPORTING.format(epochs=EPOCHS))
    return {"command": "{python} reporting.py", "cwd": str(folder)}


def run(way: str, trials: int, workers: int) -> dict[str, Any]:
    import basht

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        experiment = {
            **asha_experiment("command-overhead", trials, workers, seed=0),
            "workload": workload(way, folder),
            "space": SPACE,
            "store": f"sqlite:///{folder / 'bench.db'}",
        }
        start = time.perf_counter()
        result = basht.run(experiment, results_root=folder / "results")
        total_s = time.perf_counter() - start
    if result.status != "completed":
        raise RuntimeError(f"{way}: the run ended {result.status}")
    counts = dict(result.trial_counts)
    return {
        "way": way,
        "run_s": result.phases["run"],
        "total_s": total_s,
        "trials": sum(counts.values()),
        "trial_counts": counts,
        "ms_per_trial": result.phases["run"] / sum(counts.values()) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "command_overhead.json")
    args = parser.parse_args()
    samples: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    for _ in range(args.repeats):
        for way in WAYS:  # interleaved: a burst of load hits every way alike
            samples[way].append(run(way, args.trials, args.workers))
    rows = []
    for way in WAYS:
        ms = statistics.median(s["ms_per_trial"] for s in samples[way])
        rows.append({"way": way, "ms_per_trial": ms, "runs": samples[way]})
    base = rows[0]["ms_per_trial"]
    table = Table(
        title=f"{args.trials} trials of a 27-epoch zero-cost curve, ASHA, {args.workers} workers"
    )
    for column in ("way", "ms/trial (run phase)", "x function"):
        table.add_column(column, justify="right" if column != "way" else "left")
    for row in rows:
        row["ratio"] = row["ms_per_trial"] / base
        table.add_row(row["way"], f"{row['ms_per_trial']:.1f}", f"{row['ratio']:.1f}x")
    Console(width=120).print(table)
    write_results(
        args.out,
        "command_overhead",
        {"settings": vars(args) | {"out": str(args.out)}, "rows": rows},
    )


if __name__ == "__main__":
    main()
