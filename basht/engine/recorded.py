"""Learning curves measured on a real workload, replayed by the simulated executor.

A synthetic landscape is one the project designed; a recorded one is what a real workload did.
Record it with any run that trains every configuration to the maximum budget (`pruner: none`,
e.g. `examples/digits-curves.yaml`): the store keeps each epoch's validation value and seconds.
`RecordedCurves.from_run` turns that run into a table, `save`/`load` keep it in a file, and the
simulator replays it, so tuning algorithms can be compared at 500 workers on curves that were
measured, not modelled (Syne Tune's tabulated benchmarks do the same).

Each new configuration takes the next row of a seeded shuffle of the table, so a run draws every
row once before any twice (Syne Tune's searchers likewise suggest no configuration twice on a
tabulated benchmark), then goes on with a new shuffle; the same configuration, met again (a
resumed trial), replays its own row. With as many trials as rows a run replays exactly the
recorded population. The search space's values choose nothing else, so the table suits random
search and early stopping, not model-based samplers.
"""

from __future__ import annotations

import gzip
import json
import random
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from basht.engine.simulated import ConfigDigest
from basht.errors import BashtError

FORMAT = "basht-recorded-curves/1"


@dataclass
class RecordedCurves:
    """A table of measured learning curves: row i is configuration i's value and seconds after
    epochs 1..`epochs`. Call it as a `LearningCurve`; `with_seed` draws rows in another order.

    `load_s` is the median seconds a trial took to load (build the model, read the data), which
    `simulate(..., load_s=...)` can charge to every start and resume.
    """

    metric: str
    mode: str
    configs: list[dict[str, Any]]
    values: list[list[float]]
    seconds: list[list[float]]
    load_s: float = 0.0
    source: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # id(config) -> (config, row): the stored reference keeps the id from being reused
    _rows: dict[int, tuple[dict[str, Any], int]] = field(init=False, repr=False, compare=False)
    _digest: ConfigDigest = field(init=False, repr=False, compare=False)
    # every configuration met so far (by digest) -> its row, and the rows this pass has left
    _drawn: dict[bytes, int] = field(init=False, repr=False, compare=False)
    _left: list[int] = field(init=False, repr=False, compare=False)
    _shuffle: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in ("max", "min"):
            raise BashtError(f"recorded curves: mode must be 'max' or 'min', not {self.mode!r}")
        if not self.values:
            raise BashtError("recorded curves: the table has no configurations")
        rows = (len(self.configs), len(self.values), len(self.seconds))
        if len(set(rows)) != 1:
            raise BashtError(
                f"recorded curves: {rows[0]} configurations, {rows[1]} value rows and "
                f"{rows[2]} seconds rows; they must match"
            )
        epochs = {len(row) for row in (*self.values, *self.seconds)}
        if len(epochs) != 1 or 0 in epochs:
            raise BashtError("recorded curves: every row must have the same number of epochs")
        self._rows, self._drawn, self._left = {}, {}, []
        self._digest = ConfigDigest(self.seed)
        self._shuffle = random.Random(self.seed)

    @property
    def epochs(self) -> int:
        return len(self.values[0])

    def __len__(self) -> int:
        return len(self.values)

    def with_seed(self, seed: int) -> RecordedCurves:
        """The same table, rows drawn afresh in the order of `seed` (one landscape per benchmark
        seed; give each simulation its own, since drawing moves through the shuffle)."""
        return replace(self, seed=seed)

    def row(self, config: dict[str, Any]) -> int:
        """The recorded row that stands for `config`: its own if it was met before, else the
        next of the shuffle (a new shuffle once every row has been drawn)."""
        cached = self._rows.get(id(config))
        if cached is not None and cached[0] is config:
            return cached[1]
        key = self._digest(config)
        row = self._drawn.get(key)
        if row is None:
            if not self._left:
                self._left = list(range(len(self.values)))
                self._shuffle.shuffle(self._left)
            row = self._drawn[key] = self._left.pop()
        if len(self._rows) >= 65536:
            self._rows.clear()  # bounded: only running trials' configs need to stay
        self._rows[id(config)] = (config, row)
        return row

    def __call__(self, config: dict[str, Any], epoch: int) -> tuple[float, float]:
        if not 1 <= epoch <= self.epochs:
            raise BashtError(
                f"recorded curves end at epoch {self.epochs}; epoch {epoch} was asked "
                "(lower max_budget or record longer curves)"
            )
        row = self.row(config)
        return self.values[row][epoch - 1], self.seconds[row][epoch - 1]

    def best(self) -> list[float]:
        """Each row's best value over all its epochs (highest for `max`, lowest for `min`)."""
        pick = max if self.mode == "max" else min
        return [pick(row) for row in self.values]

    def target(self, fraction: float) -> float:
        """The value that the best `fraction` of configurations reach at some epoch: a target
        as rare as asked, whatever the workload's scale (0.01: one configuration in a hundred)."""
        if not 0.0 < fraction <= 1.0:
            raise BashtError(f"recorded curves: the fraction must be in (0, 1], not {fraction}")
        best = sorted(self.best(), reverse=self.mode == "max")
        return best[max(0, round(fraction * len(best)) - 1)]

    @classmethod
    def from_run(cls, store_url: str, run_id: str = "latest") -> RecordedCurves:
        """The curves of every trial of a run that reported each epoch up to the run's maximum
        budget; others (failed, stopped, shorter) are left out and counted in `source`."""
        from basht.store import Store

        store = Store(store_url, create=False)
        try:
            run = store.get_run(run_id)
            spec = store.get_experiment(run.experiment_id).spec
            search = spec.get("search", {})
            epochs = int(search.get("max_budget") or 0)
            if epochs < 1:
                raise BashtError(f"run {run.id} has no search.max_budget to record up to")
            reports: dict[int, dict[int, Any]] = {}
            for report in store.reports(run.id):
                reports.setdefault(report.trial_id, {})[report.epoch] = report
            trials = store.trials(run.id)
        finally:
            store.close()
        configs, values, seconds, loads = [], [], [], []
        for trial in trials:
            by_epoch = reports.get(trial.id, {})
            curve = [by_epoch.get(epoch) for epoch in range(1, epochs + 1)]
            if any(r is None or r.value is None for r in curve):
                continue
            configs.append(trial.config)
            values.append([r.value for r in curve])
            seconds.append([r.train_s + r.validate_s for r in curve])
            loads.append(trial.load_s)
        if not configs:
            raise BashtError(
                f"run {run.id} has no trial with a value at every epoch 1..{epochs}; record "
                "with `pruner: none` so every configuration trains to max_budget"
            )
        source = {
            "run": run.id,
            "experiment": run.experiment_id,
            "workload": (spec.get("workload") or {}).get("name"),
            "trials": len(trials),
            "left_out": len(trials) - len(configs),
        }
        return cls(
            metric=str(search.get("metric", "value")),
            mode=str(search.get("mode", "max")),
            configs=configs,
            values=values,
            seconds=seconds,
            load_s=statistics.median(loads),
            source=source,
        )

    def save(self, path: str | Path) -> Path:
        """Write the table as JSON, gzipped when the name ends in `.gz`."""
        path = Path(path)
        payload = {
            "format": FORMAT,
            "metric": self.metric,
            "mode": self.mode,
            "epochs": self.epochs,
            "load_s": self.load_s,
            "source": self.source,
            "configs": self.configs,
            "values": [[round(v, 6) for v in row] for row in self.values],
            "seconds": [[float(f"{s:.4g}") for s in row] for row in self.seconds],
        }
        text = json.dumps(payload, separators=(",", ":"))
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            path.write_text(text)
        return path

    @classmethod
    def load(cls, path: str | Path, seed: int = 0) -> RecordedCurves:
        """Read a table that `save` wrote."""
        path = Path(path)
        try:
            raw = path.read_bytes()
            data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        except OSError as err:
            raise BashtError(f"cannot read recorded curves {path}: {err.strerror or err}") from err
        except (ValueError, EOFError) as err:
            raise BashtError(f"{path} is not a recorded-curves file: {err}") from err
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BashtError(f"{path} is not a recorded-curves file (format {FORMAT!r})")
        try:
            table = {key: data[key] for key in ("metric", "mode", "configs", "values", "seconds")}
        except KeyError as err:
            raise BashtError(f"{path}: recorded curves miss the key {err.args[0]!r}") from err
        try:
            _check_table(table)
        except ValueError as err:
            raise BashtError(f"{path}: recorded curves: {err}") from None
        return cls(
            **table,
            load_s=float(data.get("load_s", 0.0)),
            source=data.get("source", {}),
            seed=seed,
        )


def _check_table(data: dict[str, Any]) -> None:
    """A file made or edited by hand fails here in one line, not deep in a simulation."""
    configs = data["configs"]
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise ValueError("configs must be a list of objects")
    for name in ("values", "seconds"):
        rows = data[name]
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise ValueError(
                f"{name} must be a list of rows, one list of numbers per configuration"
            )
        for i, row in enumerate(rows):
            for v in row:
                # bool is an int to Python, not a measurement; NaN and negative seconds break
                # the simulated clock
                if type(v) not in (int, float) or not (v >= 0.0 if name == "seconds" else v == v):
                    raise ValueError(
                        f"{name} row {i} holds {v!r}, not a number"
                        + (" of seconds >= 0" if name == "seconds" else "")
                    )
