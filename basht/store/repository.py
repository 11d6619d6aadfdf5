"""The repository every other module writes through: one store per run, SQLite by default.

SQLite and PostgreSQL go through the same code; `resolve_url` decides which driver a URL gets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine, ExceptionContext
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    IntegrityError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.orm import Session, sessionmaker

from basht.errors import StoreError
from basht.store.creation import create_if_new
from basht.store.migrations import HEAD_REVISION, VERSION_TABLE
from basht.store.schema import (
    Base,
    CheckpointRow,
    DecisionRow,
    EnergyAccountRow,
    ExperimentRow,
    InstanceRow,
    MetricRow,
    PhaseRow,
    PowerSampleRow,
    RunRow,
    StageRow,
    TrialReportRow,
    TrialRow,
)
from basht.store.urls import StoreURLError, one_line, resolve_url, shown_url

log = logging.getLogger(__name__)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (`basht runs`, a live report) see the store while a run writes to it.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def _utc_now() -> datetime:
    """Now in UTC, without its zone: PostgreSQL turns an aware time into the session's local time
    for a column without one, so `basht runs` (which says UTC) and `latest` would depend on the
    client's or server's time zone. SQLite stores an aware time as this."""
    return datetime.now(UTC).replace(tzinfo=None)


def nan_to_null(value: Any) -> Any:
    """`value` with every NaN or infinite float as None: JSON has neither (results.json and
    PostgreSQL's json type write null for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nan_to_null(v) for v in value]
    return value


def _json_without_nan(value: Any) -> str:
    """JSON for PostgreSQL, whose json type has no NaN or infinity: such a value (a diverged
    loss in a report, a test loss) is stored as null, as results.json shows it, instead of
    failing the write and the run."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(nan_to_null(value), allow_nan=False)


def open_engine(url: str, create: bool = True, read_only: bool = False) -> Engine:
    """An engine for `url` (as `resolve_url` reads it); a SQLite file's folder is made, unless
    `create` is off, when a SQLite file that is not there is an error (a reader must not leave an
    empty store behind). `read_only` (implies `create` off) is for viewers that must never change
    the store: see `_read_only_options`."""
    parsed = resolve_url(url)
    create = create and not read_only
    server = parsed.get_backend_name() != "sqlite"
    options: dict[str, Any] = {"json_serializer": _json_without_nan} if server else {}
    if read_only:
        options.update(_read_only_options(parsed))
    try:
        engine = create_engine(parsed, **options)
    except (ArgumentError, ValueError) as err:
        raise StoreURLError(f"not a valid SQLAlchemy URL, got {url!r} ({one_line(err)})") from None
    if server:
        event.listen(engine, "handle_error", _server_gone(url))
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database and database != ":memory:":
            if not create and not Path(database).is_file():
                raise StoreError(
                    f"store {shown_url(url)!r}: there is no {database} (no run was stored there)"
                )
            if create:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
        event.listen(engine, "connect", _sqlite_reader_pragmas if read_only else _sqlite_pragmas)
    return engine


def _read_only_options(parsed: Any) -> dict[str, Any]:
    """Engine options under which nothing can be written: a SQLite file opened as a `mode=ro`
    URI, a PostgreSQL session whose transactions are read-only. Other databases are opened as
    they are (their users' grants decide)."""
    database = parsed.database
    if parsed.get_backend_name() == "sqlite" and database and database != ":memory:":
        uri = f"{Path(database).resolve().as_uri()}?mode=ro"
        return {"creator": lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)}
    if parsed.get_backend_name() == "postgresql":
        return {"connect_args": {"options": "-c default_transaction_read_only=on"}}
    return {}


def _sqlite_reader_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """A read-only connection's settings: it waits for a writer's lock as a writer would, and
    leaves the journal mode (a write) to the writers."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def _server_gone(url: str) -> Any:
    """A database server that stopped, restarted or cannot be reached (at open or under a run):
    one line that says so, as a StoreError (exit code 2), instead of the driver's traceback.
    What was committed before stays; a killed run resumes once the server is back."""

    def handle(context: ExceptionContext) -> None:
        reason = one_line(context.original_exception)
        if context.is_disconnect:
            raise StoreError(
                f"store {shown_url(url)!r}: lost the connection to the database ({reason})"
            )
        if context.connection is None:  # no connection could be made
            raise StoreError(f"store {shown_url(url)!r}: cannot open ({reason})")

    return handle


# The hot path (a few writes per trial and per epoch) uses statements built once, with the values
# passed as parameters: building a statement per call costs more than the SQLite write itself.
_INSERT_TRIAL = insert(TrialRow)
_INSERT_DECISION = insert(DecisionRow)
_INSERT_REPORT = insert(TrialReportRow)
_UPDATE_TRIAL = update(TrialRow).where(TrialRow.id == bindparam("_id"))
_TRIAL_COLUMNS = frozenset(TrialRow.__table__.columns.keys()) - {"id"}
_ADD_LOAD_TIME = _UPDATE_TRIAL.values(load_s=TrialRow.load_s + bindparam("_load_s"))
_ADD_TRAIN_TIME = _UPDATE_TRIAL.values(train_s=TrialRow.train_s + bindparam("_train_s"))
_ADD_REPORT_TIMES = _UPDATE_TRIAL.values(
    train_s=TrialRow.train_s + bindparam("_train_s"),
    validate_s=TrialRow.validate_s + bindparam("_validate_s"),
)


_MIGRATE_TRIES = 20
#: New suffixes a run id may draw when the one drawn is taken (4 hex digits, within a second).
_ID_TRIES = 20
#: What SQLite says when another process holds the store's lock in a way it does not wait for
#: (switching a new file to WAL, say): the migration is tried again.
_RACING = ("database is locked",)
#: The store's schema revision, read on every open: when it is the newest, nothing else is done.
_SELECT_REVISION = text(f"SELECT version_num FROM {VERSION_TABLE}")


class Store:
    """All reads and writes of experiments, runs, phases, trials, reports, checkpoints and metrics."""

    def __init__(
        self, url: str = "sqlite:///basht.db", *, create: bool = True, read_only: bool = False
    ):
        """Open the store at `url`, made or brought to the newest schema revision first (see
        `basht.store.migrate`); with `create` off, a SQLite file must be there already. A
        `read_only` store (a viewer's: `basht dashboard`) is never written, nor migrated."""
        self.url = url
        create = create and not read_only
        self.engine = open_engine(url, create, read_only)
        try:
            # A reader must not turn an empty or unrelated database into a store.
            if not create and not self._tables() & Base.metadata.tables.keys():
                raise StoreError(
                    f"store {shown_url(url)!r}: not a Basht store (none of its tables are "
                    "there; no run was stored there)"
                )
            if self._revisions() != (HEAD_REVISION,):
                if read_only:
                    raise StoreError(
                        f"store {shown_url(url)!r}: written by another version of Basht; "
                        f"`basht runs --store {shown_url(url)}` brings it up to date"
                    )
                self._migrate()
        except DatabaseError as err:  # also a file that is not SQLite, or a corrupt one
            raise StoreError(
                f"store {shown_url(url)!r}: cannot open ({one_line(err.orig)})"
            ) from None
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._local = threading.local()

    def _tables(self) -> set[str]:
        """The tables there now. A SQLite file is read read-only, so one that is not a store is
        left as it was (no switch to WAL, no header written into an empty file)."""
        database = self.engine.url.database
        if self.engine.dialect.name != "sqlite" or not database or database == ":memory:":
            return set(inspect(self.engine).get_table_names())
        uri = f"{Path(database).resolve().as_uri()}?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
                query = "SELECT name FROM sqlite_master WHERE type = 'table'"
                return {name for (name,) in conn.execute(query)}
        except sqlite3.DatabaseError as err:
            raise StoreError(
                f"store {shown_url(self.url)!r}: cannot open ({one_line(err)})"
            ) from None

    def _revisions(self) -> tuple[str, ...]:
        """The revisions the store's version table names; none when there is no such table (a
        new store, one from before migrations) or it cannot be read now (`_migrate` finds out
        which, under the schema lock)."""
        try:
            with self.engine.connect() as conn:
                return tuple(row[0] for row in conn.execute(_SELECT_REVISION))
        except (OperationalError, ProgrammingError):
            return ()

    def _migrate(self) -> None:
        """Create the store's tables, or bring them to the newest revision (Alembic is imported
        only for a store an older Basht left, not for a new one or one that is up to date)."""
        for attempt in range(_MIGRATE_TRIES):
            try:
                if not create_if_new(self.engine):
                    from basht.store.migrate import migrate

                    migrate(self.engine, shown_url(self.url))
                return
            except OperationalError as err:
                raced = any(sign in str(err.orig) for sign in _RACING)
                if not raced or attempt == _MIGRATE_TRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def close(self) -> None:
        self.engine.dispose()

    def session(self) -> Session:
        return self._session()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        """This thread's batch if it has one (`batch()`), else a transaction of its own."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write of this thread inside the block goes into one transaction."""
        with self.engine.begin() as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def _write(self, *statements: Any) -> Any:
        with self._tx() as conn:
            result = None
            for statement in statements:
                result = conn.execute(statement)
            return result

    # -- experiments and runs ---------------------------------------------------------------

    def add_experiment(self, name: str, spec: dict[str, Any]) -> int:
        row = ExperimentRow(name=name, spec=spec, created_at=_utc_now())
        with self.session() as s, s.begin():
            s.add(row)
        return row.id

    def create_run(
        self,
        experiment_id: int,
        name: str,
        system: str,
        executor: str,
        results_root: Path,
        host: dict[str, Any] | None = None,
    ) -> RunRow:
        tries = 0
        while True:
            run_id = f"{name}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
            row = RunRow(
                id=run_id,
                experiment_id=experiment_id,
                system=system,
                executor=executor,
                status="running",
                results_dir=str((results_root / run_id).resolve()),
                started_at=_utc_now(),
                host={"hostname": socket.gethostname(), **(host or {})},
            )
            try:
                with self.session() as s, s.begin():
                    s.add(row)
                return row
            except IntegrityError:
                # A run of this name (another process, say) started in this second and drew
                # the same 4-digit suffix: draw another.
                tries += 1
                if tries == _ID_TRIES:
                    raise

    def update_run(self, run_id: str, **values: Any) -> None:
        self._write(update(RunRow).where(RunRow.id == run_id).values(**values))

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        self.update_run(run_id, status=status, error=error, ended_at=_utc_now())

    def get_run(self, run_id: str) -> RunRow:
        """A run by id, a unique prefix of it, or `latest`."""
        with self.session() as s:
            if run_id == "latest":
                row = s.scalars(select(RunRow).order_by(RunRow.started_at.desc())).first()
                if row is None:
                    raise StoreError(f"no runs in {self.url}")
                return row
            row = s.get(RunRow, run_id)
            if row is None:
                # Accept a unique prefix, as git does for commits.
                query = select(RunRow).where(RunRow.id.startswith(run_id, autoescape=True))
                rows = s.scalars(query.order_by(RunRow.started_at.desc())).all()
                if not rows:
                    raise StoreError(f"no run matching {run_id!r} in {self.url}")
                if len(rows) > 1:
                    ids = ", ".join(r.id for r in rows[:5])
                    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
                    raise StoreError(
                        f"{len(rows)} runs matching {run_id!r} in {self.url}: {ids}{more}; "
                        "give more of the id"
                    )
                row = rows[0]
            return row

    def get_experiment(self, experiment_id: int) -> ExperimentRow:
        with self.session() as s:
            row = s.get(ExperimentRow, experiment_id)
            if row is None:
                raise StoreError(f"no experiment {experiment_id} in {self.url}")
            return row

    def list_runs(self, limit: int | None = None) -> Sequence[RunRow]:
        with self.session() as s:
            query = select(RunRow).order_by(RunRow.started_at.desc())
            if limit:
                query = query.limit(limit)
            return s.scalars(query).all()

    # -- phases -----------------------------------------------------------------------------

    def add_phase(
        self,
        run_id: str,
        name: str,
        start: float,
        end: float,
        aborted: bool = False,
        error: str | None = None,
        attempt: int = 1,
    ) -> None:
        self._write(
            insert(PhaseRow).values(
                run_id=run_id,
                name=name,
                attempt=attempt,
                start=start,
                end=end,
                duration_s=end - start,
                aborted=aborted,
                error=error,
            )
        )

    def phases(self, run_id: str) -> Sequence[PhaseRow]:
        with self.session() as s:
            return s.scalars(
                select(PhaseRow).where(PhaseRow.run_id == run_id).order_by(PhaseRow.id)
            ).all()

    # -- instances (elastic clusters) -------------------------------------------------------

    def add_instance(
        self,
        run_id: str,
        number: int,
        stage: int,
        workers: Sequence[int],
        launched_at: float,
        ready_at: float | None = None,
        attempt: int = 1,
    ) -> None:
        self._write(
            insert(InstanceRow).values(
                run_id=run_id,
                number=number,
                stage=stage,
                attempt=attempt,
                workers=list(workers),
                launched_at=launched_at,
                ready_at=ready_at,
            )
        )

    def update_instance(self, run_id: str, number: int, attempt: int, **values: Any) -> None:
        """Set `ready_at` or `released_at` of a run's instance."""
        self._write(
            update(InstanceRow)
            .where(
                InstanceRow.run_id == run_id,
                InstanceRow.number == number,
                InstanceRow.attempt == attempt,
            )
            .values(**values)
        )

    def instances(self, run_id: str) -> Sequence[InstanceRow]:
        with self.session() as s:
            return s.scalars(
                select(InstanceRow)
                .where(InstanceRow.run_id == run_id)
                .order_by(InstanceRow.attempt, InstanceRow.number)
            ).all()

    def add_stage(self, run_id: str, attempt: int = 1, **values: Any) -> None:
        self._write(insert(StageRow).values(run_id=run_id, attempt=attempt, **values))

    def end_stage(self, run_id: str, stage: int, attempt: int, ended_at: float) -> None:
        self._write(
            update(StageRow)
            .where(StageRow.run_id == run_id, StageRow.stage == stage, StageRow.attempt == attempt)
            .values(ended_at=ended_at)
        )

    def stages(self, run_id: str) -> Sequence[StageRow]:
        with self.session() as s:
            return s.scalars(
                select(StageRow)
                .where(StageRow.run_id == run_id)
                .order_by(StageRow.attempt, StageRow.started_at)
            ).all()

    # -- trials -----------------------------------------------------------------------------

    def add_trial(
        self,
        run_id: str,
        number: int,
        config: dict[str, Any],
        target_budget: int | None,
        decision: dict[str, Any] | None = None,
        **values: Any,
    ) -> int:
        """A new trial; `decision` (the suggestion that made it) is logged in the same transaction."""
        row = {"state": "pending", "budget": 0, "load_s": 0.0, "train_s": 0.0, "validate_s": 0.0}
        row.update(values, run_id=run_id, number=number, config=config, target_budget=target_budget)
        with self._tx() as conn:
            result = conn.execute(_INSERT_TRIAL, row)
            if decision is not None:
                conn.execute(_INSERT_DECISION, decision)
        return int(result.inserted_primary_key[0])

    def update_trial(
        self, trial_id: int, decision: dict[str, Any] | None = None, **values: Any
    ) -> None:
        unknown = values.keys() - _TRIAL_COLUMNS
        if unknown:
            raise ValueError(f"update_trial: not a trial column: {', '.join(sorted(unknown))}")
        with self._tx() as conn:
            if values:
                conn.execute(_UPDATE_TRIAL, {"_id": trial_id, **values})
            if decision is not None:
                conn.execute(_INSERT_DECISION, decision)

    def add_trial_time(self, trial_id: int, *, load_s: float = 0.0, train_s: float = 0.0) -> None:
        """Time the trial held its worker outside an epoch's report: a load, or the unfinished
        segment of a trial that failed or was aborted."""
        with self._tx() as conn:
            conn.execute(_ADD_LOAD_TIME, {"_id": trial_id, "_load_s": load_s})
            if train_s:
                conn.execute(_ADD_TRAIN_TIME, {"_id": trial_id, "_train_s": train_s})

    def add_report(
        self,
        trial_id: int,
        epoch: int,
        value: float | None,
        metrics: dict[str, float],
        train_s: float,
        validate_s: float,
        decision: dict[str, Any] | None = None,
        at: float | None = None,
    ) -> None:
        """One epoch's result; the trial's totals and the algorithm's decision in one transaction.
        `at` is when it was reported (by default now: a write-behind writer passes the event's
        time, or a busy writer would spread a run's reports over the time it took to write them)."""
        with self._tx() as conn:
            if decision is not None:
                conn.execute(_INSERT_DECISION, decision)
            conn.execute(
                _INSERT_REPORT,
                {
                    "trial_id": trial_id,
                    "epoch": epoch,
                    "value": value,
                    "metrics": metrics,
                    "train_s": train_s,
                    "validate_s": validate_s,
                    "at": time.time() if at is None else at,
                },
            )
            conn.execute(
                _ADD_REPORT_TIMES,
                {
                    "_id": trial_id,
                    "budget": epoch,
                    "value": value,
                    "_train_s": train_s,
                    "_validate_s": validate_s,
                },
            )

    def drop_reports_after(self, trial_id: int, epoch: int) -> None:
        """Forget the reports a trial made past `epoch`, the epoch it restarts from after an
        interruption: it makes them again, and a curve has one value per epoch. The time spent
        on them stays in the trial's totals (work lost to the interruption)."""
        self._write(
            delete(TrialReportRow).where(
                TrialReportRow.trial_id == trial_id, TrialReportRow.epoch > epoch
            )
        )

    def trials(self, run_id: str, states: Iterable[str] | None = None) -> Sequence[TrialRow]:
        with self.session() as s:
            query = select(TrialRow).where(TrialRow.run_id == run_id)
            if states is not None:
                query = query.where(TrialRow.state.in_(list(states)))
            return s.scalars(query.order_by(TrialRow.number)).all()

    def trial_counts(self, run_id: str) -> dict[str, int]:
        with self.session() as s:
            rows = s.execute(
                select(TrialRow.state, func.count())
                .where(TrialRow.run_id == run_id)
                .group_by(TrialRow.state)
            ).all()
        return {state: count for state, count in rows}

    def reports(self, run_id: str) -> Sequence[TrialReportRow]:
        with self.session() as s:
            query = (
                select(TrialReportRow)
                .join(TrialRow, TrialRow.id == TrialReportRow.trial_id)
                .where(TrialRow.run_id == run_id)
                .order_by(TrialReportRow.id)
            )
            return s.scalars(query).all()

    def decisions(self, run_id: str) -> Sequence[DecisionRow]:
        with self.session() as s:
            query = select(DecisionRow).where(DecisionRow.run_id == run_id)
            return s.scalars(query.order_by(DecisionRow.seq)).all()

    def log_decision(self, decision: dict[str, Any]) -> None:
        with self._tx() as conn:
            conn.execute(_INSERT_DECISION, decision)

    # -- checkpoints ------------------------------------------------------------------------

    def add_checkpoint(
        self,
        trial_id: int,
        epoch: int,
        path: str,
        kind: str,
        size_bytes: int | None = None,
        at: float | None = None,
    ) -> None:
        """A checkpoint written at `at` (by default now; see `add_report`)."""
        if size_bytes is None:
            try:
                size_bytes = Path(path).stat().st_size
            except OSError:
                size_bytes = 0
        size = size_bytes
        self._write(
            insert(CheckpointRow).values(
                trial_id=trial_id,
                epoch=epoch,
                path=path,
                kind=kind,
                size_bytes=size,
                at=time.time() if at is None else at,
            )
        )

    def checkpoints(self, trial_id: int) -> Sequence[CheckpointRow]:
        with self.session() as s:
            query = select(CheckpointRow).where(CheckpointRow.trial_id == trial_id)
            return s.scalars(query.order_by(CheckpointRow.id)).all()

    def mark_checkpoint_deleted(self, path: str) -> None:
        self._write(update(CheckpointRow).where(CheckpointRow.path == path).values(deleted=True))

    # -- measurements -----------------------------------------------------------------------

    def add_power_samples(self, run_id: str, samples: Iterable[dict[str, Any]]) -> None:
        rows = [{"run_id": run_id, **sample} for sample in samples]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(PowerSampleRow), rows)

    def last_sample_at(self, run_id: str) -> float | None:
        """When the run's driver last wrote a power sample (every few seconds while it lives)."""
        with self.session() as s:
            query = select(func.max(PowerSampleRow.at)).where(PowerSampleRow.run_id == run_id)
            return s.scalar(query)

    def last_record_at(self, run_id: str, since: float, before: float) -> float | None:
        """The latest time in [since, before) at which the run's records show its driver alive:
        a trial starting or ending, an epoch reported, a power sample. None if there is none."""
        trial = TrialRow.run_id == run_id
        columns = [
            (TrialRow.started_at, trial),
            (TrialRow.ended_at, trial),
            (TrialReportRow.at, TrialReportRow.trial_id.in_(select(TrialRow.id).where(trial))),
            (PowerSampleRow.at, PowerSampleRow.run_id == run_id),
        ]
        with self.session() as s:
            found = [
                s.scalar(select(func.max(column)).where(where, column >= since, column < before))
                for column, where in columns
            ]
        return max((t for t in found if t is not None), default=None)

    def power_samples(self, run_id: str) -> Sequence[PowerSampleRow]:
        with self.session() as s:
            query = select(PowerSampleRow).where(PowerSampleRow.run_id == run_id)
            return s.scalars(query.order_by(PowerSampleRow.at)).all()

    def replace_energy_accounts(self, run_id: str, rows: Iterable[dict[str, Any]]) -> None:
        """The run's energy accounts as they stand now (they only grow; this rewrites them)."""
        rows = [{"run_id": run_id, **row} for row in rows]
        with self.engine.begin() as conn:
            conn.execute(delete(EnergyAccountRow).where(EnergyAccountRow.run_id == run_id))
            if rows:
                conn.execute(insert(EnergyAccountRow), rows)

    def energy_accounts(self, run_id: str) -> Sequence[EnergyAccountRow]:
        with self.session() as s:
            query = select(EnergyAccountRow).where(EnergyAccountRow.run_id == run_id)
            return s.scalars(query.order_by(EnergyAccountRow.id)).all()

    def add_metrics(
        self, run_id: str, metrics: Iterable[tuple[str, float | None, str, str | None]]
    ) -> None:
        rows = [
            {"run_id": run_id, "name": name, "value": value, "unit": unit, "source": source}
            for name, value, unit, source in metrics
        ]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(MetricRow), rows)

    def replace_metrics(
        self, run_id: str, metrics: Iterable[tuple[str, float | None, str, str | None]]
    ) -> None:
        """The run's metrics, computed anew (a resumed run recomputes them from all its records)."""
        with self.engine.begin() as conn:
            conn.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
        self.add_metrics(run_id, metrics)

    def metrics(self, run_id: str) -> Sequence[MetricRow]:
        with self.session() as s:
            query = select(MetricRow).where(MetricRow.run_id == run_id).order_by(MetricRow.id)
            return s.scalars(query).all()
