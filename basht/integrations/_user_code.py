"""Finding and calling a user's own training code: `package.module:attr` targets, the framework
each needs (imported on first use), and the trial's configuration shared out among them."""

from __future__ import annotations

import importlib
import inspect
import numbers
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Protocol

from basht.errors import WorkloadError

__all__ = ["TrialResources", "call_with", "floats", "load_target", "plain", "require", "share_out"]


class TrialResources(Protocol):
    """What a ready workload reads of `basht.workloads.base.Resources` (a sibling package, so
    named here by its shape)."""

    @property
    def cpus(self) -> int: ...
    @property
    def accelerator(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def device_share(self) -> float: ...


def require(module: str, extra: str) -> ModuleType:
    """Import a framework on first use; its absence is one line that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise WorkloadError(f"{top} is not installed: pip install 'basht[{extra}]'") from None


def load_target(target: Any, where: str) -> Any:
    """The object named by `package.module:attr` (an attribute path may be dotted)."""
    if not isinstance(target, str) or ":" not in target:
        raise WorkloadError(f"{where}: expected 'package.module:attr', got {target!r}")
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        if isinstance(err, ModuleNotFoundError) and err.name == module_name.split(".")[0]:
            raise WorkloadError(
                f"{where}: cannot import {module_name!r} ({err}; run basht from the folder "
                "that holds it, or put that folder on PYTHONPATH)"
            ) from None
        raise WorkloadError(f"{where}: importing {module_name!r} failed ({err})") from None
    try:
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise WorkloadError(f"{where}: {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise WorkloadError(f"{where}: {target!r} is not a class or a function")
    return obj


def _named(call: Callable[..., Any]) -> set[str] | None:
    """The keyword arguments `call` takes; None when it takes any (`**kwargs`)."""
    try:
        parameters = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def share_out(
    config: Mapping[str, Any],
    takers: Mapping[str, Callable[..., Any] | set[str] | None],
    where: str,
) -> dict[str, dict[str, Any]]:
    """The keys of `config` each taker gets: those its signature names (a set: those names;
    None: it takes them all). A key that no taker takes is an error naming what they take."""
    named = {
        name: t if isinstance(t, set) or t is None else _named(t) for name, t in takers.items()
    }
    shares: dict[str, dict[str, Any]] = {name: {} for name in takers}
    for key, value in config.items():
        takes = [name for name, keys in named.items() if keys is None or key in keys]
        if not takes:
            known = sorted(set().union(*(keys for keys in named.values() if keys is not None)))
            raise WorkloadError(
                f"{where}: unknown key {key!r}: no one takes it "
                f"({', '.join(takers)} take: {', '.join(known) or 'nothing'})"
            )
        for name in takes:
            shares[name][key] = value
    return shares


def call_with(call: Callable[..., Any], kwargs: Mapping[str, Any], where: str) -> Any:
    """`call(**kwargs)`, a wrong argument or value said in one line as the user's to fix."""
    try:
        return call(**kwargs)
    except (TypeError, ValueError) as err:
        name = getattr(call, "__qualname__", repr(call))
        raise WorkloadError(f"{where}: {name}: {' '.join(str(err).split())}") from err


def plain(value: Any) -> Any:
    """A configuration value as plain Python (a sampler may hand over numpy scalars), so that
    frameworks that save hyperparameters in their checkpoints save only plain data."""
    if isinstance(value, bool | str | int | float) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics that are single numbers (tensors of one element included), as floats."""
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            continue
        number = value
        if not isinstance(value, numbers.Real):
            numel = getattr(value, "numel", None)
            if not callable(numel) or numel() != 1:
                continue
            number = value.item()
        try:
            out[str(name)] = float(number)
        except (TypeError, ValueError):
            continue
    return out
