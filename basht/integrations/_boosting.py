"""What the LightGBM and XGBoost integrations share: data, key checks and metric names.

The ready workloads train on a dataset bundled with scikit-learn (nothing is downloaded) or on
the user's own arrays, split once per experiment seed. Both libraries name their metrics their
own way (`multi_error`, `merror`); `accuracy` and `logloss` are added under one name each, so
one experiment file tunes either library.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from basht.errors import WorkloadError
from basht.integrations._user_code import load_target

__all__ = [
    "DATASETS",
    "EARLY_STOPPING",
    "NOT_TUNABLE",
    "ROUNDS",
    "SEED",
    "THREADS",
    "Data",
    "Dataset",
    "check_reserved",
    "check_source",
    "common_metrics",
    "describe_data",
    "load_data",
    "named_metrics",
]


@dataclass(frozen=True)
class Dataset:
    """A dataset bundled with scikit-learn: its loader and what Table 1 says about it."""

    loader: str  # the function in sklearn.datasets
    description: str
    rows: int
    columns: int
    n_classes: int  # 0: regression

    @property
    def size_mb(self) -> float:
        """Features and labels as float64, as scikit-learn loads them."""
        return self.rows * (self.columns + 1) * 8 / 1e6


DATASETS: dict[str, Dataset] = {
    "digits": Dataset(
        "load_digits", "scikit-learn digits: 1,797 8x8 images, 10 classes", 1797, 64, 10
    ),
    "breast_cancer": Dataset(
        "load_breast_cancer",
        "scikit-learn breast cancer: 569 rows, 30 features, 2 classes",
        569,
        30,
        2,
    ),
    "wine": Dataset("load_wine", "scikit-learn wine: 178 rows, 13 features, 3 classes", 178, 13, 3),
    "iris": Dataset("load_iris", "scikit-learn iris: 150 rows, 4 features, 3 classes", 150, 4, 3),
    "diabetes": Dataset(
        "load_diabetes", "scikit-learn diabetes: 442 rows, 10 features, regression", 442, 10, 0
    ),
}


@dataclass(frozen=True)
class Data:
    """Train/validation/test splits. `n_classes` is 0 for regression; labels of a classification
    are 0..n_classes-1, as both libraries want them."""

    X_train: Any
    y_train: np.ndarray
    X_val: Any
    y_val: np.ndarray
    X_test: Any
    y_test: np.ndarray
    n_classes: int


def check_source(dataset: str | None, data: str | None, where: str) -> str:
    """The data's name (a built-in dataset or the user's `module:function`), checked cheaply."""
    if data is not None:
        if dataset is not None:
            raise WorkloadError(f"{where}: give either dataset or data, not both")
        if not isinstance(data, str) or ":" not in data:
            raise WorkloadError(
                f"{where}.data: expected 'package.module:function' returning "
                f"(X_train, y_train, X_val, y_val, X_test, y_test), got {data!r}"
            )
        return data
    name = "digits" if dataset is None else dataset
    if name not in DATASETS:
        raise WorkloadError(
            f"{where}.dataset: unknown dataset {name!r} (expected one of: {', '.join(DATASETS)})"
        )
    return name


def describe_data(source: str) -> tuple[str, float | None]:
    """Table 1's t and ts without loading anything."""
    known = DATASETS.get(source)
    if known is not None:
        return known.description, known.size_mb
    return f"the user's own, from {source}", None


@functools.lru_cache(maxsize=4)
def load_data(source: str, seed: int = 0) -> Data:
    """The splits of `source`, cached: every trial in a worker reuses them.

    A built-in dataset is split 60/20/20 (stratified for a classification) by the experiment's
    `seed`, so every trial sees the same split. The user's function is called with `seed=` when
    it takes one. Labels of an integer, bool or string type mean a classification.
    """
    known = DATASETS.get(source)
    if known is not None:
        return _split_builtin(known, seed)
    load = load_target(source, "workload.params.data")
    kwargs = {"seed": seed} if _takes_seed(load) else {}
    parts = load(**kwargs)
    if not isinstance(parts, (tuple, list)) or len(parts) != 6:
        raise WorkloadError(
            f"data {source!r}: expected (X_train, y_train, X_val, y_val, X_test, y_test), "
            f"got {type(parts).__name__}"
        )
    return _checked(source, *parts)


def _takes_seed(call: Any) -> bool:
    try:
        return "seed" in inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False


def _split_builtin(known: Dataset, seed: int) -> Data:
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    X, y = getattr(sklearn.datasets, known.loader)(return_X_y=True)
    state = int(seed) % 2**32  # sklearn wants a non-negative 32-bit seed
    stratify = y if known.n_classes else None
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.4, stratify=stratify, random_state=state
    )
    stratify = y_rest if known.n_classes else None
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=stratify, random_state=state
    )
    arrays = [np.ascontiguousarray(a) for a in (X_train, y_train, X_val, y_val, X_test, y_test)]
    for a in arrays:
        a.flags.writeable = False  # shared by every trial of the worker
    return Data(*arrays, n_classes=known.n_classes)


def _checked(source: str, X_train: Any, *rest: Any) -> Data:
    X_val, X_test = rest[1], rest[3]
    labels = [np.asarray(y) for y in (rest[0], rest[2], rest[4])]
    for name, X, y in zip(("train", "val", "test"), (X_train, X_val, X_test), labels, strict=True):
        if y.ndim != 1 or len(X) != len(y):
            raise WorkloadError(
                f"data {source!r}: the {name} split has {len(X)} rows but labels of shape {y.shape}"
            )
    n_classes = 0
    if all(y.dtype.kind in "iubUS" for y in labels):
        classes = np.unique(np.concatenate(labels))
        n_classes = len(classes)
        if n_classes < 2:
            raise WorkloadError(f"data {source!r}: the labels hold a single class")
        # Both libraries want 0..K-1: other class labels are mapped onto them, in order.
        labels = [np.searchsorted(classes, y) for y in labels]
    return Data(X_train, labels[0], X_val, labels[1], X_test, labels[2], n_classes=n_classes)


def check_reserved(keys: Iterable[str], reserved: Mapping[str, str], where: str) -> None:
    """Refuse keys Basht sets itself (rounds, threads, seed): a value there would be ignored or
    fight the budget. `reserved` maps each such key to why, as the end of a sentence."""
    for key in keys:
        why = reserved.get(key)
        if why is not None:
            raise WorkloadError(f"{where}: {key!r} {why}")


#: Why each key Basht sets itself is refused, by what it sets (the libraries' aliases map here).
ROUNDS = "is set by Basht: the budget (search.min_budget, max_budget) counts boosting rounds"
THREADS = "is set by Basht from resources.cpus_per_worker"
SEED = "is set by Basht: each trial's seed comes from the experiment's seed"
EARLY_STOPPING = "is the pruner's job in Basht (search.pruner)"
#: The workload's own parameters are fixed for the run; a space cannot tune them.
NOT_TUNABLE = {
    "dataset": "is a workload parameter (workload.params), not a hyperparameter",
    "data": "is a workload parameter (workload.params), not a hyperparameter",
}


def named_metrics(
    results: Iterable[tuple[str, str, float]], main: str | None = None
) -> dict[str, float]:
    """`<set>-<metric>` for every evaluation set (the libraries' own log format), and the bare
    metric names for `main` (by default the last set, the one early stopping watches)."""
    rows = [(str(s), str(m), float(v)) for s, m, v in results]
    if main is None and rows:
        main = rows[-1][0]
    found = {f"{s}-{m}": v for s, m, v in rows}
    found.update({m: v for s, m, v in rows if s == main})
    return found


def common_metrics(
    metrics: Mapping[str, float], error: Iterable[str], logloss: Iterable[str]
) -> dict[str, float]:
    """`metrics` plus `accuracy` (1 - the library's error rate) and `logloss`, when the library
    computed them under one of the given names."""
    found = dict(metrics)
    for name in error:
        if name in metrics and "accuracy" not in found:
            found["accuracy"] = 1.0 - float(metrics[name])
    for name in logloss:
        if name in metrics and "logloss" not in found:
            found["logloss"] = float(metrics[name])
    return found
