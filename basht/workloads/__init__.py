"""Built-in workloads and the lookup of user workloads given as `package.module:attr`."""

from __future__ import annotations

import importlib
from typing import Any

from basht.errors import WorkloadError
from basht.workloads.base import Resources, StopTrial, TrialReporter, Workload

BUILTIN: dict[str, str] = {
    "digits-mlp": "basht.workloads.digits:DigitsMLP",
    "digits-sgd": "basht.workloads.digits:DigitsSGD",
    "mnist-mlp": "basht.workloads.mnist:MnistMLP",
    "sleep": "basht.workloads.synthetic:Sleep",
    "lcbench": "basht.workloads.lcbench:LCBench",  # YAHPO Gym's surrogate (onnxruntime)
    "command": "basht.workloads.command:CommandWorkload",  # `workload: {command: ...}`
    # Training code from outside: each framework's ready workload (basht.integrations).
    "lightning": "basht.integrations.lightning:LightningWorkload",
    "hf-trainer": "basht.integrations.hf_trainer:TrainerWorkload",
    "lightgbm": "basht.integrations.lightgbm:LightGBMWorkload",
    "xgboost": "basht.integrations.xgboost:XGBoostWorkload",
}

__all__ = [
    "BUILTIN",
    "Resources",
    "StopTrial",
    "TrialReporter",
    "Workload",
    "can_checkpoint",
    "factory_can_checkpoint",
    "check_workload_name",
    "is_function_workload",
    "resolve_workload",
]


def check_workload_name(name: str) -> None:
    """Raise ValueError (for the schema) unless `name` is built in or looks like `module:attr`."""
    if name in BUILTIN:
        return
    if ":" not in name:
        raise ValueError(
            f"unknown workload {name!r} (expected one of {', '.join(BUILTIN)} or 'package.module:attr')"
        )
    try:
        resolve_workload(name)
    except WorkloadError as err:
        raise ValueError(str(err)) from None


def resolve_workload(name: str) -> Any:
    """The workload class or function behind a built-in name or `package.module:attr`."""
    target = BUILTIN.get(name, name)
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise WorkloadError(f"workload {name!r}: expected 'package.module:attr'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise WorkloadError(f"workload {name!r}: cannot import {module_name!r} ({err})") from None
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise WorkloadError(
            f"workload {name!r}: {module_name!r} has no attribute {attr!r}"
        ) from None
    if not callable(obj):
        raise WorkloadError(f"workload {name!r}: {attr!r} is neither a class nor a function")
    return obj


def is_function_workload(obj: Any) -> bool:
    """Plain functions `objective(config, trial)` are stopped, never paused (no checkpoint)."""
    return not isinstance(obj, type)


def can_checkpoint(ref: Any) -> bool:
    """Whether trials of workload `ref` (a WorkloadRef) can be paused and resumed: a plain
    function cannot; a class can unless its `can_checkpoint(**params)` says otherwise (a
    command that saves no state)."""
    return factory_can_checkpoint(resolve_workload(ref.name), ref.params)


def factory_can_checkpoint(factory: Any, params: dict[str, Any]) -> bool:
    """`can_checkpoint` for a workload already resolved (its class or function)."""
    if is_function_workload(factory):
        return False
    decide = getattr(factory, "can_checkpoint", None)
    return bool(decide(**params)) if callable(decide) else True
