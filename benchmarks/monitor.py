"""What energy tracking costs: Basht's monitor beside CodeCarbon's tracker, as a share of one core.

Each tracker runs in a fresh Python process of its own whose main thread only sleeps, beside two
busy worker processes (the real work of a run), for `--seconds`, reading power every 1/hz s. Its
cost is that process's CPU time, every thread's, over the wall time while it samples. Imports
are not counted; starting and stopping (reading data files, the first and the last reading) are
counted apart. A process that only sleeps gives the floor. Every setting runs `--repeats` times,
interleaved, and the table gives the medians.

Basht's `EnergyMonitor` also attributes the machine's energy to the two workers (it reads their
CPU times at every sample), work that CodeCarbon's tracker, which sums the machine, does not do.
CodeCarbon runs as `OfflineEmissionsTracker(country_iso_code="DEU", measure_power_secs=1/hz,
save_to_file=False)` (its own constants, no network); without it installed (`pip install
codecarbon`, or the `bench` extra) its rows are left out, and the table says so.

Both read the same counters where the machine has them. On a machine without them (this one)
both estimate, each with its own model, so the energy column shows what each tool says, labelled
with its method, and checks neither.

    python benchmarks/monitor.py [--seconds 10] [--hz 1 10] [--repeats 3] [--source auto]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _results import write_results
from rich.console import Console
from rich.table import Table

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass"

# A tracker's process: imports, then start (timed), sleep while it samples, stop (timed), and
# one JSON line with what the tracker said. argv: seconds, hz, worker pids, energy source.
_PROCESS = """import json, sys, time
seconds, hz = float(sys.argv[1]), float(sys.argv[2])
pids = [int(p) for p in sys.argv[3].split(",")]
{imports}
c0 = time.process_time()
{start}
c1, w1 = time.process_time(), time.perf_counter()
time.sleep(seconds)
c2, w2 = time.process_time(), time.perf_counter()
{stop}
times = {{"start_s": c1 - c0, "cpu_s": c2 - c1, "wall_s": w2 - w1, "stop_s": time.process_time() - c2}}
print(json.dumps({{**times, **said}}))
"""
TRACKERS = {
    "sleep only (floor)": _PROCESS.format(
        imports="",
        start="",
        stop='said = {"energy_kwh": None, "method": "-"}',
    ),
    "basht EnergyMonitor": _PROCESS.format(
        imports="from basht.energy import EnergyMonitor, open_sources",
        start="""monitor = EnergyMonitor(
    source=open_sources(sys.argv[4]), sample_interval_s=1 / hz, slots=len(pids)
)
for slot, pid in enumerate(pids):
    monitor.assign(slot, pid, slot)""",
        stop="""monitor.close()
said = {"energy_kwh": sum(monitor.total_j.values()) / 3.6e6,
        "method": "+".join(sorted(set(monitor.source_of.values()))),
        "samples": monitor.samples_taken}""",
    ),
    "CodeCarbon": _PROCESS.format(
        imports="from codecarbon import OfflineEmissionsTracker",
        start="""tracker = OfflineEmissionsTracker(
    country_iso_code="DEU", measure_power_secs=1 / hz, save_to_file=False, log_level="error"
)
tracker.start()""",
        stop="""tracker.stop()
said = {"energy_kwh": tracker.final_emissions_data.energy_consumed,
        "method": "; ".join(tracker._conf.get("hardware", []))}  # what it read""",
    ),
}
CODECARBON = "CodeCarbon"


def has_codecarbon() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import codecarbon"], capture_output=True)
    return probe.returncode == 0


def run_tracker(name: str, seconds: float, hz: float, pids: list[int], source: str) -> dict:
    argv = [str(seconds), str(hz), ",".join(map(str, pids)), source]
    done = subprocess.run(
        [sys.executable, "-c", TRACKERS[name], *argv],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr.strip().splitlines()[-1:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"tool": name, "hz": hz, **result, "core_pct": 100 * result["cpu_s"] / result["wall_s"]}


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median core share per (hz, tool), and each tool's ratio to Basht's at that rate."""
    rows = []
    for hz in sorted({r["hz"] for r in runs}):
        ours = None
        for tool in TRACKERS:
            mine = [r for r in runs if r["hz"] == hz and r["tool"] == tool]
            if not mine:
                continue
            row = {
                "hz": hz,
                "tool": tool,
                "core_pct": statistics.median(r["core_pct"] for r in mine),
                "start_stop_ms": statistics.median(
                    1e3 * (r["start_s"] + r["stop_s"]) for r in mine
                ),
                "energy_kwh": statistics.median(
                    r["energy_kwh"] if r["energy_kwh"] is not None else 0.0 for r in mine
                ),
                "method": mine[0]["method"],
                "repeats": len(mine),
            }
            if tool == "basht EnergyMonitor":
                ours = row["core_pct"]
            row["vs_basht"] = row["core_pct"] / ours if ours else None
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hz", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--source", default="auto")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "monitor.json"
    )
    args = parser.parse_args()
    tools = list(TRACKERS)
    if not has_codecarbon():
        tools.remove(CODECARBON)
        print("CodeCarbon is not installed (pip install codecarbon): its rows are left out")
    started = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, "-c", BUSY.format(s=10**6)]) for _ in range(2)]
    try:
        pids = [w.pid for w in workers]
        runs = [
            run_tracker(tool, args.seconds, hz, pids, args.source)
            for _ in range(args.repeats)
            for hz in args.hz
            for tool in tools
        ]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    rows = summarise(runs)

    table = Table(
        title=f"energy tracking beside 2 busy workers: CPU cost over {args.seconds:g} s, "
        f"median of {args.repeats}"
    )
    columns = ("Hz", "tool", "sampling (% of a core)", "vs Basht", "start+stop (CPU ms)")
    for column in (*columns, "energy (kWh)", "energy from"):
        table.add_column(column, justify="left" if column in ("tool", "energy from") else "right")
    for r in rows:
        floor = r["tool"].startswith("sleep")
        table.add_row(
            f"{r['hz']:g}",
            r["tool"],
            f"{r['core_pct']:.3f}",
            "-" if floor else f"{r['vs_basht']:.1f}x",
            f"{r['start_stop_ms']:.1f}",
            "-" if floor else f"{r['energy_kwh']:.3g}",
            r["method"],
        )
    Console(width=130).print(table)
    print(f"{len(runs)} tracker runs in {time.perf_counter() - started:.0f} s")
    write_results(
        args.out,
        "monitor",
        {
            "seconds": args.seconds,
            "repeats": args.repeats,
            "codecarbon": CODECARBON in tools,
            "summary": rows,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
