"""The energy monitor's own CPU cost while sampling at 10 Hz, as a share of one core.

The sampler runs beside two busy worker processes whose trials it attributes (the real work of a
run), for `--seconds`; its thread's CPU time (time.thread_time) over the wall time is its
overhead: reading the counters (or /proc/stat for the estimate), the workers' CPU times, and
booking every interval.

    python benchmarks/monitor.py [--seconds 10] [--hz 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _results import write_results
from rich.console import Console
from rich.table import Table

from basht.energy import EnergyMonitor, open_sources

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass"


def measure_basht(seconds: float, hz: float, source: str) -> dict:
    workers = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds + 2)]) for _ in range(2)
    ]
    try:
        monitor = EnergyMonitor(
            source=open_sources(source), sample_interval_s=1 / hz, slots=len(workers)
        )
        for slot, worker in enumerate(workers):
            monitor.assign(slot, worker.pid, slot)
        start = time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - start
        monitor.close()
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    return {
        "tool": f"basht EnergyMonitor ({monitor.source.name})",
        "hz": hz,
        "samples": monitor.samples_taken,
        "cpu_s": monitor.cpu_time_s,
        "wall_s": wall,
        "core_share_pct": 100 * monitor.cpu_time_s / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--source", default="auto")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "monitor.json"
    )
    args = parser.parse_args()
    rows = [measure_basht(args.seconds, args.hz, args.source)]
    table = Table(title=f"sampler overhead at {args.hz:g} Hz over {args.seconds:g} s")
    for column in ("tool", "samples", "CPU (s)", "% of one core"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    for r in rows:
        table.add_row(
            r["tool"], str(r["samples"]), f"{r['cpu_s']:.4f}", f"{r['core_share_pct']:.3f}"
        )
    Console(width=120).print(table)
    write_results(
        args.out,
        "monitor",
        {
            "results": rows,
        },
    )


if __name__ == "__main__":
    main()
