"""The BSO server under load: many clients at once run recurring jobs through `basht bso serve`.

Starts `basht bso serve` as a real subprocess on 127.0.0.1 (a free port, a bearer token, uvicorn's
access log off) on each store: PostgreSQL (a throwaway cluster, as the tests start one) with
`--workers 4`, and SQLite with `--workers 1`. Then `--clients` clients (asyncio, one httpx
connection each) run the real protocol at once, as fast as answers come: each `--recurrences`
times registers its job, takes a trial, reports epochs until the server says stop (or, one run in
seven, crashes after its first epoch and ends the trial without a result), then ends the trial.
Four clients share each job (`--clients-per-job`), so their requests contend for the job's row
lock. Meanwhile `--readers` clients read the jobs' states (GET /jobs) one after another.

Afterwards the database is read directly and checked against what the clients were told:

* lost: a report answered 2xx that the trial does not hold (its latest report must be the last one
  acknowledged; a final one must have finished the trial), a trial handed out that is not stored, an
  end acknowledged on a trial still running;
* duplicates: a (job, trial number) handed out twice, or stored twice;
* torn reads: a job state read during the load that never was (a minimum cost other than the
  lowest cost of the Succeeded trials shown with it);
* errors: answers other than 2xx, and requests with no answer (timeouts, resets); 5xx counted apart;
* tracebacks in the server's log.

Latency is per request, measured by the client (so it includes the client's own event loop under
load); all processes share this machine. Prints a table and writes JSON to
benchmarks/results/bso_load.json.

    python benchmarks/bso_load.py [--clients 200] [--recurrences 3] [--epochs 4] [--timeout 600]
        [--clients-per-job 4] [--readers 4] [--stores postgresql sqlite]
        [--postgresql-workers 4] [--sqlite-workers 1]

Exits 1 if anything was lost, duplicated or torn, or a request got a 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402

ROUTES = ("register", "batch_size", "report", "end", "read")
BATCH_SIZES = [32, 64, 128, 256, 512]
CLIENTS_PER_JOB = 4
CRASH_EVERY = 7  # one run in seven ends its trial after its first epoch, without a result


# -- what the clients were told ---------------------------------------------------------------


@dataclass
class Call:
    route: str
    status: int  # 0: no answer (a timeout, a reset connection)
    latency_s: float


@dataclass
class Ledger:
    """Every request's outcome and every promise the server made to a client."""

    calls: list[Call] = field(default_factory=list)
    handed_out: list[tuple[str, int, int]] = field(default_factory=list)  # job, number, size
    acked: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    ended: set[tuple[str, int]] = field(default_factory=set)
    registered: list[str] = field(default_factory=list)  # jobs the readers may read
    reads: int = 0
    torn_reads: int = 0  # job states that never were (see `torn`)
    failures: list[str] = field(default_factory=list)  # the first few, for the reader
    unfinished_clients: int = 0
    wall_s: float = 0.0

    def note(self, message: str) -> None:
        if len(self.failures) < 10:
            self.failures.append(message)


def job_spec(job_id: str, epochs: int) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "job_id_prefix": job_id.split("-")[0],
        "batch_sizes": BATCH_SIZES,
        "default_batch_size": 128,
        "eta_knob": 0.5,
        "beta_knob": 2.0,
        "target_metric": 0.5,
        "higher_is_better_metric": True,
        "max_epochs": epochs,
        "num_pruning_rounds": 1,
        "mab_num_explorations": 2,
        "max_power": 300.0,
        "number_of_gpus": 1,
        "gpu_model": "load-test",
    }


def epoch_result(trial: dict[str, Any], epoch: int, epochs: int, client: int) -> dict[str, Any]:
    """A made-up but consistent run: larger sizes are faster per epoch but need more epochs; the
    client's number makes every report's values its own."""
    size = trial["batch_size"]
    need = 1 + BATCH_SIZES.index(size) if size in BATCH_SIZES else epochs
    time_s = epoch * (5.0 + 640.0 / size) + client / 1000
    return {
        **trial,
        "time": time_s,
        "energy": 200.0 * time_s,
        "metric": 0.9 if epoch >= min(need, epochs) else 0.1 + epoch / 100,
        "current_epoch": epoch,
    }


async def _call(ledger: Ledger, route: str, request: Any) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        response = await request
    except httpx.HTTPError as err:
        ledger.calls.append(Call(route, 0, time.perf_counter() - started))
        ledger.note(f"{route}: no answer ({type(err).__name__}: {err})")
        return None
    ledger.calls.append(Call(route, response.status_code, time.perf_counter() - started))
    if not 200 <= response.status_code < 300:
        ledger.note(f"{route}: {response.status_code} {response.text[:300]}")
    return response


async def one_client(
    url: str, token: str | None, client: int, job_id: str, recurrences: int, epochs: int, ledger
) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    spec = job_spec(job_id, epochs)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        for run in range(recurrences):
            answer = await _call(ledger, "register", http.post("/jobs", json=spec))
            if answer is None or answer.status_code not in (200, 201):
                continue
            if answer.status_code == 201:
                ledger.registered.append(job_id)
            answer = await _call(
                ledger, "batch_size", http.get("/jobs/batch_size", params={"job_id": job_id})
            )
            if answer is None or answer.status_code != 200:
                continue
            trial = answer.json()
            key = (trial["job_id"], trial["trial_number"])
            ledger.handed_out.append((*key, trial["batch_size"]))
            crash = (client + run) % CRASH_EVERY == 0
            for epoch in range(1, epochs + 1):
                body = epoch_result(trial, epoch, epochs, client)
                answer = await _call(ledger, "report", http.post("/report", json=body))
                if answer is None or answer.status_code != 200:
                    break
                decision = answer.json()
                ledger.acked.setdefault(key, []).append({**body, **decision})
                if decision["stop_train"] or crash:
                    break
            answer = await _call(ledger, "end", http.patch("/trials", json=trial))
            if answer is not None and answer.status_code == 200:
                ledger.ended.add(key)


def torn(state: dict[str, Any]) -> bool:
    """Whether a job's state (GET /jobs) shows a moment that never was: the job's minimum cost
    is set in the same transaction as the result that lowers it, so it must be the lowest cost
    of the Succeeded trials shown (and None while there is none)."""
    from basht.bso.cost import zeus_cost

    job = state["job"]
    costs = [
        zeus_cost(t["energy"], t["time"], job["eta_knob"], job["max_power"])
        for t in state["trials"]
        if t["status"] == "Succeeded"
    ]
    if not costs:
        return state["min_cost"] is not None
    return state["min_cost"] is None or not math.isclose(state["min_cost"], min(costs))


async def one_reader(url: str, token: str | None, ledger: Ledger, stop: asyncio.Event) -> None:
    """Read the states of registered jobs, one after another, until `stop`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        n = 0
        while not stop.is_set():
            if not ledger.registered:
                await asyncio.sleep(0.01)
                continue
            job_id = ledger.registered[n % len(ledger.registered)]
            n += 7  # another job each time
            answer = await _call(ledger, "read", http.get("/jobs", params={"job_id": job_id}))
            if answer is None or answer.status_code != 200:
                continue
            ledger.reads += 1
            if torn(answer.json()):
                ledger.torn_reads += 1
                ledger.note(f"read: a state that never was: {answer.text[:300]}")


async def drive(
    url: str,
    *,
    clients: int,
    recurrences: int,
    epochs: int,
    timeout_s: float,
    token: str | None = None,
    prefix: str = "load",
    clients_per_job: int = CLIENTS_PER_JOB,
    readers: int = 4,
) -> Ledger:
    """Run `clients` clients at once against `url`, and `readers` that read job states while
    they run; stop waiting for the clients after `timeout_s`."""
    ledger = Ledger()
    stop = asyncio.Event()
    reading = [asyncio.create_task(one_reader(url, token, ledger, stop)) for _ in range(readers)]
    jobs = max(1, clients // clients_per_job)
    tasks = [
        asyncio.create_task(
            one_client(url, token, i, f"{prefix}-{i % jobs}", recurrences, epochs, ledger)
        )
        for i in range(clients)
    ]
    started = time.perf_counter()
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    ledger.wall_s = time.perf_counter() - started
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    ledger.unfinished_clients = len(pending)
    stop.set()
    await asyncio.gather(*reading)
    for task in done:
        if task.exception() is not None:
            ledger.note(f"a client failed: {task.exception()!r}")
    return ledger


# -- what the database holds -------------------------------------------------------------------


async def stored_trials(db: str, prefix: str) -> list[dict[str, Any]]:
    """Every stored trial of the jobs named `<prefix>-*`, straight from the database."""
    from sqlalchemy import select

    from basht.bso.db.engine import open_engine
    from basht.bso.db.schema import TrialRow

    engine = open_engine(db)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                select(TrialRow.__table__).where(TrialRow.job_id.like(f"{prefix}-%"))
            )
            return [dict(row._mapping) for row in rows]
    finally:
        await engine.dispose()


@dataclass
class Verdict:
    lost_reports: int
    lost_trials: int
    lost_ends: int
    duplicates: int
    requests: int
    no_answer: int
    non_2xx: int
    server_errors_5xx: int
    torn_reads: int
    stored: int

    @property
    def lost(self) -> int:
        return self.lost_reports + self.lost_trials + self.lost_ends

    @property
    def errors(self) -> int:
        return self.no_answer + self.non_2xx


def check(ledger: Ledger, stored: list[dict[str, Any]]) -> Verdict:
    """Compare what the clients were told with what the database holds."""
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    duplicates = 0
    for row in stored:
        key = (row["job_id"], row["trial_number"])
        duplicates += key in by_key
        by_key[key] = row
    handed = Counter((job, number) for job, number, _ in ledger.handed_out)
    duplicates += sum(n - 1 for n in handed.values())
    lost_trials = sum(
        1
        for job, number, size in ledger.handed_out
        if (row := by_key.get((job, number))) is None or row["batch_size"] != size
    )
    lost_reports = 0
    for key, reports in ledger.acked.items():
        row = by_key.get(key)
        if row is None:
            lost_reports += len(reports)
            continue
        last = reports[-1]
        missing = sum(1 for r in reports if (row["epochs"] or 0) < r["current_epoch"])
        held = (row["epochs"], row["time_s"], row["energy_j"], row["metric"])
        if missing:
            lost_reports += missing
        elif held != (last["current_epoch"], last["time"], last["energy"], last["metric"]):
            lost_reports += 1  # the trial holds another report than the last acknowledged
        elif last["stop_train"] and (
            row["status"] != "Succeeded" or row["converged"] != last["converged"]
        ):
            lost_reports += 1
    lost_ends = sum(
        1 for key in ledger.ended if (row := by_key.get(key)) and row["status"] == "Dispatched"
    )
    statuses = [c.status for c in ledger.calls]
    return Verdict(
        lost_reports=lost_reports,
        lost_trials=lost_trials,
        lost_ends=lost_ends,
        duplicates=duplicates,
        requests=len(statuses),
        no_answer=statuses.count(0),
        non_2xx=sum(1 for s in statuses if s and not 200 <= s < 300),
        server_errors_5xx=sum(1 for s in statuses if s >= 500),
        torn_reads=ledger.torn_reads,
        stored=len(stored),
    )


def percentile_ms(latencies: list[float], q: float) -> float | None:
    if not latencies:
        return None
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def latency_summary(ledger: Ledger) -> dict[str, dict[str, Any]]:
    summary = {}
    for route in (*ROUTES, "all"):
        lat = [c.latency_s for c in ledger.calls if route in ("all", c.route)]
        summary[route] = {
            "requests": len(lat),
            "p50_ms": percentile_ms(lat, 50),
            "p99_ms": percentile_ms(lat, 99),
            "mean_ms": 1000 * statistics.fmean(lat) if lat else None,
            "max_ms": 1000 * max(lat) if lat else None,
        }
    return summary


# -- one store ---------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A migrated database on a throwaway PostgreSQL cluster (tests/postgres.py's)."""
    from tests.bso.support import basht
    from tests.postgres import postgres_server

    with postgres_server() as server:
        url = server.create_database("bso_load")
        migrated = basht("bso", "migrate", "--db", url)
        if migrated.returncode != 0:
            raise RuntimeError(f"basht bso migrate failed: {migrated.stderr}")
        yield url


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid` and its children (the server's workers)."""
    import psutil

    process = psutil.Process(pid)
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def run_store(store: str, workers: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from tests.bso.support import basht_env, start_server

    token = secrets.token_urlsafe(16)
    with contextlib.ExitStack() as stack:
        if store == "postgresql":
            db = stack.enter_context(postgres_database())
        else:
            db = f"sqlite:///{tmp / 'bso-load.db'}"
        log = tmp / f"server-{store}.log"
        server = start_server(
            db,
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            log=log,
            env=basht_env(BASHT_BSO_TOKEN=token),
        )
        stack.callback(server.stop)
        client_cpu = time.process_time()
        server_cpu = cpu_s(server.process.pid)
        ledger = asyncio.run(
            drive(
                server.url,
                clients=args.clients,
                recurrences=args.recurrences,
                epochs=args.epochs,
                timeout_s=args.timeout,
                token=token,
                clients_per_job=args.clients_per_job,
                readers=args.readers,
            )
        )
        client_cpu = time.process_time() - client_cpu
        server_cpu = cpu_s(server.process.pid) - server_cpu
        stored = asyncio.run(stored_trials(db, "load"))
        server.stop()
    verdict = check(ledger, stored)
    tracebacks = log.read_text(errors="replace").count("Traceback")
    return {
        "store": store,
        "workers": workers,
        "clients": args.clients,
        "jobs": max(1, args.clients // args.clients_per_job),
        "recurrences": args.recurrences,
        "wall_s": round(ledger.wall_s, 3),
        "requests_per_s": round(verdict.requests / ledger.wall_s, 1) if ledger.wall_s else None,
        # CPU seconds during the load, out of wall_s × the machine's cores (PostgreSQL's own
        # processes not counted): where the time went on a machine the clients share.
        "client_cpu_s": round(client_cpu, 2),
        "server_cpu_s": round(server_cpu, 2),
        "latency": latency_summary(ledger),
        "trials_handed_out": len(ledger.handed_out),
        "trials_stored": verdict.stored,
        "reports_acknowledged": sum(len(r) for r in ledger.acked.values()),
        "job_states_read": ledger.reads,
        "torn_reads": verdict.torn_reads,
        "requests": verdict.requests,
        "lost": verdict.lost,
        "lost_reports": verdict.lost_reports,
        "lost_trials": verdict.lost_trials,
        "lost_ends": verdict.lost_ends,
        "duplicates": verdict.duplicates,
        "errors": verdict.errors,
        "no_answer": verdict.no_answer,
        "non_2xx": verdict.non_2xx,
        "server_errors_5xx": verdict.server_errors_5xx,
        "server_tracebacks": tracebacks,
        "unfinished_clients": ledger.unfinished_clients,
        "first_failures": ledger.failures,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def tables(results: list[dict[str, Any]]) -> tuple[Table, Table]:
    summary = Table(title="basht bso serve under load (127.0.0.1, one machine)")
    for column in (
        "store",
        "workers",
        "clients",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "lost",
        "duplicates",
        "errors",
        "5xx",
        "torn reads",
        "tracebacks",
    ):
        summary.add_column(column, justify="left" if column == "store" else "right")
    routes = Table(title="latency per request (ms)")
    for column in ("store", "request", "count", "p50", "p99", "max"):
        routes.add_column(column, justify="left" if column in ("store", "request") else "right")
    for r in results:
        every = r["latency"]["all"]
        summary.add_row(
            r["store"],
            str(r["workers"]),
            str(r["clients"]),
            str(r["requests"]),
            f"{r['requests_per_s']:.0f}" if r["requests_per_s"] else "-",
            _ms(every["p50_ms"]),
            _ms(every["p99_ms"]),
            str(r["lost"]),
            str(r["duplicates"]),
            str(r["errors"]),
            str(r["server_errors_5xx"]),
            str(r["torn_reads"]),
            str(r["server_tracebacks"]),
        )
        for route in (*ROUTES, "all"):
            lat = r["latency"][route]
            routes.add_row(
                r["store"],
                route,
                str(lat["requests"]),
                _ms(lat["p50_ms"]),
                _ms(lat["p99_ms"]),
                _ms(lat["max_ms"]),
            )
    return summary, routes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--recurrences", type=int, default=3, help="runs per client")
    parser.add_argument("--epochs", type=int, default=4, help="max epochs per run")
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds to wait for the clients, per store"
    )
    parser.add_argument(
        "--clients-per-job",
        type=int,
        default=CLIENTS_PER_JOB,
        help="clients sharing one job (and its row lock)",
    )
    parser.add_argument(
        "--stores", nargs="+", default=["postgresql", "sqlite"], choices=["postgresql", "sqlite"]
    )
    parser.add_argument(
        "--readers", type=int, default=4, help="clients reading job states during the load"
    )
    parser.add_argument("--postgresql-workers", type=int, default=4)
    parser.add_argument("--sqlite-workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bso_load.json")
    args = parser.parse_args()
    workers = {"postgresql": args.postgresql_workers, "sqlite": args.sqlite_workers}
    console = Console()
    results = []
    with tempfile.TemporaryDirectory(prefix="basht-bso-load-") as tmp:
        for store in args.stores:
            console.print(f"{store}: {args.clients} clients, {workers[store]} worker(s) ...")
            results.append(run_store(store, workers[store], args, Path(tmp)))
            for failure in results[-1]["first_failures"]:
                console.print(f"  [red]{failure}[/red]", highlight=False)
    for table in tables(results):
        console.print(table)
    write_results(
        args.out,
        "bso_load",
        {
            "settings": {
                "clients": args.clients,
                "recurrences": args.recurrences,
                "epochs": args.epochs,
                "timeout_s": args.timeout,
                "clients_per_job": args.clients_per_job,
                "crash_every": CRASH_EVERY,
                "readers": args.readers,
            },
            "stores": results,
        },
        machine_extra={"load_average": os.getloadavg()},
    )
    checks = ("lost", "duplicates", "server_errors_5xx", "torn_reads", "server_tracebacks")
    bad = [r["store"] for r in results if any(r[c] for c in checks)]
    if bad:
        console.print(f"[red]lost, duplicated, 5xx or torn reads on {', '.join(bad)}[/red]")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
