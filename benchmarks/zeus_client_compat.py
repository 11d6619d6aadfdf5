"""Zeus's unmodified client against `basht bso serve`: a recurring job of several recurrences.

Starts `basht bso serve` (SQLite, a token, 127.0.0.1, a free port) in a subprocess, then runs the
recurrences one process at a time in the separate Zeus venv (zeus[bso], pydantic 1; created on
first use, ~40 s): each process is `zeus_client_driver.py`, a training script that uses Zeus's own
`BatchSizeOptimizer`, replaying a Zeus trace job. A run the server gives up on
(ZeusBSOTrainFailError) is relaunched, as Zeus's docs tell users to. The Zeus client cannot send
headers, so it authenticates with the token as the password of its server URL
(http://bso:TOKEN@127.0.0.1:PORT), which httpx turns into basic auth.

At the end the job's state is read back from the server: every trial must have ended, trial
numbers must run 1..n, and the job must have left pruning if enough recurrences ran. Prints a table
and writes JSON to benchmarks/results/zeus_client_compat.json.

    python benchmarks/zeus_client_compat.py [--recurrences 12] [--workload imagenet] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from zeus_venv import ZEUS_VERSION, zeus_python  # noqa: E402

from basht.bso.trace import TraceJob  # noqa: E402


def trace_job_json(trace: TraceJob, job_id: str, seed: int) -> dict[str, object]:
    w = trace.workload
    return {
        "spec": {
            "job_id": job_id,
            "job_id_prefix": job_id.split("-")[0],
            "batch_sizes": trace.batch_sizes,
            "default_batch_size": trace.default_batch_size,
            "target_metric": w.target_metric,
            "higher_is_better_metric": w.higher_is_better,
            "max_epochs": w.max_epochs,
            "mab_seed": seed,
        },
        "gpu_model": f"Tesla {trace.gpu.upper()} (trace)",
        "max_power": trace.max_power_w,
        "epochs": {
            str(b): {"time_s": trace.epoch(b).time_s, "energy_j": trace.epoch(b).energy_j}
            for b in trace.batch_sizes
        },
        "paths": {str(b): trace.paths(b) for b in trace.batch_sizes},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str, port: int, token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BASHT_BSO_TOKEN": token}
    proc = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", "bso", "serve", "--db", db, "--port", str(port)],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"basht bso serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("basht bso serve did not come up in 60 s")


def run(recurrences: int, workload: str, gpu: str, seed: int, max_tries: int = 20) -> dict:
    python = zeus_python("client")
    trace = TraceJob(workload, gpu)
    job_id = f"zeuscompat-{workload}-{secrets.token_hex(3)}"
    job = trace_job_json(trace, job_id, seed)
    token = secrets.token_urlsafe(16)
    port = free_port()
    records = []
    with tempfile.TemporaryDirectory(prefix="basht-zeus-compat-") as tmp:
        server = start_server(f"sqlite:///{tmp}/bso.db", port, token, Path(tmp) / "server.log")
        try:
            url = f"http://bso:{token}@127.0.0.1:{port}"
            draw = seed * 1000
            for recurrence in range(1, recurrences + 1):
                for _ in range(max_tries):
                    draw += 1
                    proc = subprocess.run(
                        [
                            str(python),
                            str(HERE / "zeus_client_driver.py"),
                            "--server",
                            url,
                            "--job",
                            json.dumps(job),
                            "--seed",
                            str(draw),
                        ],
                        capture_output=True,
                        text=True,
                        timeout=120,
                    )
                    if proc.returncode not in (0, 3):
                        raise RuntimeError(
                            f"Zeus client failed ({proc.returncode}): {proc.stderr[-3000:]}"
                        )
                    record = json.loads(proc.stdout.strip().splitlines()[-1])
                    record["recurrence"] = recurrence
                    records.append(record)
                    if proc.returncode == 0:
                        break
                else:
                    raise RuntimeError(f"recurrence {recurrence} never reached the target")
            state = httpx.get(
                f"http://127.0.0.1:{port}/jobs", params={"job_id": job_id}, timeout=10
            ).json()
            unauthorized = httpx.get(
                f"http://127.0.0.1:{port}/jobs/batch_size", params={"job_id": job_id}, timeout=10
            ).status_code
        finally:
            server.terminate()
            server.wait(30)
    trials = state["trials"]
    checks = {
        "every trial ended": all(t["status"] != "Dispatched" for t in trials),
        "trial numbers 1..n": [t["trial_number"] for t in trials]
        == list(range(1, len(trials) + 1)),
        "one trial per Zeus client run": len(trials) == len(records),
        "server's converged == client's": all(
            t["converged"] == r["converged"] for t, r in zip(trials, records, strict=False)
        ),
        "no token: 401": unauthorized == 401,
    }
    return {
        "zeus": ZEUS_VERSION,
        "trace": trace.name,
        "job_id": job_id,
        "recurrences": recurrences,
        "runs": records,
        "stage": state["stage"],
        "arms": [a["batch_size"] for a in state["arms"]],
        "checks": checks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recurrences", type=int, default=12)
    parser.add_argument("--workload", default="imagenet")
    parser.add_argument("--gpu", default="v100")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "zeus_client_compat.json")
    args = parser.parse_args()
    start = time.perf_counter()
    result = run(args.recurrences, args.workload, args.gpu, args.seed)
    result["wall_s"] = time.perf_counter() - start

    console = Console()
    table = Table(
        title=f"Zeus {result['zeus']} client → basht bso serve: {result['trace']}, "
        f"{args.recurrences} recurrences"
    )
    for column in ("recurrence", "trial", "batch size", "epochs", "result"):
        table.add_column(column, justify="right" if column != "result" else "left")
    for r in result["runs"]:
        outcome = "reached target" if r["converged"] else "ZeusBSOTrainFailError → relaunch"
        table.add_row(
            str(r["recurrence"]),
            str(r["trial_number"]),
            str(r["batch_size"]),
            str(r["epochs"]),
            outcome,
        )
    console.print(table)
    console.print(f"job stage after the last run: {result['stage']}, arms {result['arms']}")
    for name, ok in result["checks"].items():
        console.print(f"{'ok  ' if ok else 'FAIL'} {name}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.out} ({result['wall_s']:.1f} s)")
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
