"""`basht bso ...`: serve the batch size optimizer, migrate its database, replay the Zeus trace.

Imports of the server stack happen inside the commands, so `basht --help` works without the `bso`
extra installed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

app = typer.Typer(
    name="bso",
    help="Batch size optimizer (Zeus-compatible): server, database migrations, trace simulator.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # paragraphs reflow to the terminal; `code` shows as code
)
console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL: sqlite:///file.db (default sqlite:///basht-bso.db) or "
        "postgresql://user:pw@host/db. Env: BASHT_BSO_DB.",
    ),
]


@app.command()
def serve(
    db: DbOption = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address to bind (default 127.0.0.1). Env: BASHT_BSO_HOST."),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (default 8000). Env: BASHT_BSO_PORT.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require this bearer token on every route that changes state (every route but "
            "`GET /health`, `GET /jobs` and the docs). Prefer the environment variable "
            "BASHT_BSO_TOKEN: arguments are visible to other users.",
        ),
    ] = None,
    protect_reads: Annotated[
        bool | None,
        typer.Option(
            "--protect-reads",
            help="Require the token on the read routes too (`GET /jobs`, the docs): all but "
            "`GET /health`. Needs a token. Env: BASHT_BSO_PROTECT_READS.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Server processes (default 1). Env: BASHT_BSO_WORKERS."),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(help="uvicorn log level (default info). Env: BASHT_BSO_LOG_LEVEL."),
    ] = None,
    trial_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a running trial may go without an epoch report before it is "
            "abandoned and its batch size handed out again; keep it above your longest epoch "
            "(default 86400, one day; 0: never). Env: BASHT_BSO_TRIAL_TIMEOUT.",
        ),
    ] = None,
    crash_limit: Annotated[
        int | None,
        typer.Option(
            help="Pruning probes of one batch size that may crash in a row (end without a "
            "result, or be abandoned) before the size counts as failing its round, so a size "
            "that kills the script every time is not probed for ever (default 2; 0: never, "
            "as Zeus). Env: BASHT_BSO_CRASH_LIMIT.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            help="The largest request body taken, in bytes; a larger one is answered 413 "
            "without being read (default 1048576, 1 MiB; a job spec takes under 1 KiB). "
            "Env: BASHT_BSO_MAX_BODY_BYTES.",
        ),
    ] = None,
) -> None:
    """Serve the batch size optimizer over HTTP (Zeus's BSO protocol), until Ctrl-C."""
    import os

    import uvicorn

    from basht.bso.config import ServerSettings
    from basht.bso.db.engine import redact
    from basht.bso.db.migrate import ensure_ready

    settings = ServerSettings.from_env(
        db=db,
        host=host,
        port=port,
        token=token,
        workers=workers,
        log_level=log_level,
        trial_timeout=trial_timeout,
        crash_limit=crash_limit,
        max_body_bytes=max_body_bytes,
        protect_reads=protect_reads or None,  # not given: the environment decides
    )
    settings.check_can_listen()  # before the database: a taken port creates nothing
    revision = ensure_ready(settings.db)
    if settings.host not in LOOPBACK:
        err_console.print(
            f"[yellow]warning:[/yellow] serving on {settings.host}: reachable from other machines"
            + ("" if settings.token else "; anyone who reaches it can change jobs (set a token)"),
            highlight=False,
        )
    os.environ.update(settings.to_env())  # the workers rebuild the settings from these
    console.print(
        f"basht bso: http://{settings.host}:{settings.port} ({_reach_words(settings.host)}; "
        f"docs at /docs), database "
        f"{redact(settings.db)} at revision {revision}, {settings.workers} worker(s), "
        f"{_timeout_words(settings.trial_timeout)}, {_crash_words(settings.crash_limit)}"
        f"{_token_words(settings)}",
        highlight=False,
        soft_wrap=True,  # one line in a log file too, whatever its width
    )
    uvicorn.run(
        "basht.bso.server:app_from_env",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
    )


@app.command()
def migrate(
    db: DbOption = None,
    sql: Annotated[
        bool, typer.Option("--sql", help="Print the SQL instead of running it (offline).")
    ] = False,
) -> None:
    """Create or upgrade the optimizer's tables (Alembic revisions shipped in the package)."""
    from basht.bso.config import ServerSettings
    from basht.bso.db import migrate as migrations
    from basht.bso.db.engine import redact

    url = ServerSettings.from_env(db=db).db
    if sql:
        typer.echo(migrations.upgrade_sql(url))
        return
    import asyncio  # here: every `basht` command, --help too, loads this module

    before, after = asyncio.run(migrations.upgrade(url))
    if before == after:
        console.print(f"{redact(url)}: already at revision {after}", highlight=False)
    else:
        console.print(
            f"{redact(url)}: migrated from {before or 'empty'} to revision {after}", highlight=False
        )


@app.command()
def simulate(
    workload: Annotated[
        str,
        typer.Option(
            help="Trace workload: cifar100, imagenet, librispeech, movielens-1m, squad, "
            "sentiment140."
        ),
    ] = "librispeech",
    gpu: Annotated[str, typer.Option(help="Power trace: v100, a40, p100, rtx6000.")] = "v100",
    recurrences: Annotated[int, typer.Option(help="How many times the job recurs.")] = 50,
    seed: Annotated[int, typer.Option(help="Seeds the training paths and the bandit.")] = 1,
    eta: Annotated[float, typer.Option(help="eta_knob: 1 = energy only, 0 = time only.")] = 0.5,
    beta: Annotated[float, typer.Option(help="beta_knob: early stop at beta × min cost.")] = 2.0,
    no_early_stop: Annotated[
        bool, typer.Option("--no-early-stop", help="beta_knob = null.")
    ] = False,
    power_limits: Annotated[
        bool,
        typer.Option(
            "--power-limits",
            help="Optimize the GPU power limit too (`optimize_power_limit`): each batch size's "
            "first run profiles the trace's limits in its first epoch, later runs use the "
            "cheapest.",
        ),
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(help="A running BSO server; by default one is started on 127.0.0.1."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Bearer token of --server.", envvar="BASHT_BSO_TOKEN")
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            help="epoch: report every epoch like a real client; zeus: Zeus's reference harness."
        ),
    ] = "epoch",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the runs of every policy here.")
    ] = None,
) -> None:
    """Replay recurrences of a Zeus-trace job against a real server; compare with fixed sizes."""
    import tempfile
    from contextlib import ExitStack

    from basht.bso.embedded import serve_in_thread
    from basht.bso.errors import BSOError
    from basht.bso.http import BSOClient
    from basht.bso.simulate import best_fixed, simulate_fixed, simulate_server
    from basht.bso.spec import INT64_MAX
    from basht.bso.trace import TraceJob

    if protocol not in ("epoch", "zeus"):
        raise BSOError(f"protocol {protocol!r}: expected epoch or zeus")
    if power_limits and protocol != "epoch":
        raise BSOError("--power-limits: needs --protocol epoch")
    if not 0.0 <= eta <= 1.0:
        raise BSOError(
            f"--eta {eta:g}: expected a value in [0, 1] (1 = energy only, 0 = time only)"
        )
    if not no_early_stop and not (beta > 0 and math.isfinite(beta)):
        raise BSOError(f"--beta {beta:g}: expected a finite value above 0 (or --no-early-stop)")
    if recurrences < 1:
        raise BSOError(f"--recurrences {recurrences}: expected 1 or more")
    if not 0 <= seed <= INT64_MAX:  # the job's mab_seed, and numpy takes no negative seed
        raise BSOError(f"--seed {seed}: expected 0 to {INT64_MAX}")
    trace = TraceJob(workload, gpu)
    with ExitStack() as stack:
        if server is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="basht-bso-"))
            server = stack.enter_context(serve_in_thread(f"sqlite:///{tmp}/bso.db"))
        client = stack.enter_context(BSOClient(server, token=token))
        ours = simulate_server(
            trace,
            client,
            recurrences,
            seed,
            eta,
            None if no_early_stop else beta,
            protocol,  # type: ignore[arg-type]
            power_limits=power_limits,
        )
    default = simulate_fixed(trace, trace.default_batch_size, recurrences, seed, eta)
    best = best_fixed(trace, recurrences, seed, eta)
    console.print(_recurrence_table(ours))
    console.print(_summary_table(trace, [ours, default, best], default))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(
            json.dumps(
                {
                    "trace": trace.name,
                    "policies": [r.to_dict() for r in (ours, default, best) if r],
                },
                indent=2,
            )
        )


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _reach_words(host: str) -> str:
    return "this machine only" if host in LOOPBACK else "reachable from other machines"


def _token_words(settings: Any) -> str:
    if settings.token is None:
        return ", no token"
    return ", token required" + (" (reads too)" if settings.protect_reads else " to write")


def _timeout_words(seconds: float) -> str:
    if seconds == 0:
        return "trials never abandoned"
    return f"trials abandoned after {seconds:g} s without a report"


def _crash_words(limit: int) -> str:
    if limit == 0:
        return "crashed probes always probed again"
    return f"a size failing after {limit} crashed probe{'s' if limit > 1 else ''} in a row"


def _recurrence_table(result: Any) -> Any:
    from rich.table import Table

    table = Table(title=f"{result.policy} on {result.job}, seed {result.seed}")
    for column in ("rec", "batch sizes (✓ reached, ✗ failed)", "energy (MJ)", "time (h)", "cost"):
        table.add_column(column, justify="left" if column.startswith("batch") else "right")
    table.add_column("cumulative cost", justify="right")
    total = 0.0
    for number, runs in enumerate(result.by_recurrence(), start=1):
        cost = sum(r.cost for r in runs)
        total += cost
        table.add_row(
            str(number),
            " → ".join(f"{_knobs(r)}{'✓' if r.converged else '✗'}" for r in runs),
            f"{sum(r.energy_j for r in runs) / 1e6:.2f}",
            f"{sum(r.time_s for r in runs) / 3600:.2f}",
            f"{cost:.4g}",
            f"{total:.4g}",
        )
    return table


def _knobs(run: Any) -> str:
    """A run's batch size, and its power limit where one was chosen: 128@100W."""
    return f"{run.batch_size}" + ("" if run.power_limit_w is None else f"@{run.power_limit_w:g}W")


def _summary_table(trace: Any, results: list[Any], default: Any) -> Any:
    from rich.table import Table

    table = Table(
        title=f"{trace.name}: {results[0].recurrences} recurrences, cost = eta·energy + "
        f"(1 − eta)·{trace.max_power_w:g} W·time, eta {results[0].eta_knob:g}"
    )
    for column in ("policy", "runs", "energy (MJ)", "time (h)", "cost", "vs default"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for result in results:
        if result is None:
            continue
        ratio = f"{result.cost / default.cost:.3f}×" if default is not None else "-"
        table.add_row(
            result.policy,
            str(len(result.runs)),
            f"{result.energy_j / 1e6:.2f}",
            f"{result.time_s / 3600:.2f}",
            f"{result.cost:.4g}",
            ratio,
        )
    return table
