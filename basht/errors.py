"""The one error hierarchy: the CLI turns a BashtError into one line and exit code 2."""

from __future__ import annotations


class BashtError(Exception):
    """Something the user can fix: bad input, a missing resource, a run that cannot go on."""


class ExperimentError(BashtError):
    """An experiment file or object that does not follow the schema."""


class ArgumentError(ExperimentError, ValueError):
    """A wrong argument to an algorithm, a sampler or a search space built in Python: one line
    naming the argument, raised when the object is built (a ValueError, as Python's own are)."""


class SpecError(ExperimentError):
    """A value the schema accepts but a run cannot use (an instance not in the price sheet, an
    unknown carbon zone). `key` is its key path (`measure.price.instance`), so whoever names the
    file puts both in front of `reason` as they are, without reading the message for a key."""

    def __init__(self, reason: str, key: str | None = None) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.reason, self.key = reason, key

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, str | None]]:
        return type(self), (self.reason, self.key)


class WorkloadError(BashtError):
    """A workload that cannot be found, imported or loaded."""


class StoreError(BashtError):
    """A store URL that cannot be opened, or a run that is not in it."""


class TrialError(BashtError):
    """A trial that raised inside its worker; carries the worker's one-line reason."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the run is stored as interrupted, its finished trials kept."""

    def __init__(self, run_id: str, store: str, system: str = "native"):
        super().__init__(run_id)
        self.run_id, self.store, self.system = run_id, store, system
