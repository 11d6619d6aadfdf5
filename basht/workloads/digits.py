"""The built-in digits workloads: an MLP (torch) and a linear SGD classifier on sklearn's 8x8 digits."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from basht.errors import WorkloadError
from basht.workloads._torch_mlp import Splits, TorchMLP
from basht.workloads.base import Resources

__all__ = ["DigitsMLP", "DigitsSGD", "digits_splits"]


@functools.lru_cache(maxsize=4)
def digits_splits(seed: int = 0) -> Splits:
    """sklearn's digits, 60/20/20 stratified by `seed`; cached because every trial reuses it.

    Pixel values (0..16) are scaled to [0, 1]. The arrays are read-only since they are shared.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32) / 16.0
    y = y.astype(np.int64)
    state = int(seed) % 2**32  # sklearn wants a non-negative 32-bit seed
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.4, stratify=y, random_state=state
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=state
    )
    arrays = [np.ascontiguousarray(a) for a in (X_train, y_train, X_val, y_val, X_test, y_test)]
    for a in arrays:
        a.flags.writeable = False
    return Splits(*arrays, n_classes=10)


DIGITS = "scikit-learn digits: 1,797 8x8 images, 10 classes"
DIGITS_MB = 1797 * (64 + 1) * 8 / 1e6  # features and labels as float64/int64, as sklearn loads them


class DigitsMLP(TorchMLP):
    """digits-mlp: a small PyTorch MLP; an epoch takes milliseconds, so trials are cheap to run.

    Config keys: lr (learning_rate), hidden (hidden_layer_config), dropout, weight_decay,
    batch_size, optimizer ("adam", "sgd", "adamw").
    """

    workload_name = "digits-mlp"

    def _splits(self) -> Splits:
        return digits_splits(self.seed)

    def _dataset(self) -> tuple[str, float | None]:
        return DIGITS, DIGITS_MB


_SGD_DEFAULTS: dict[str, Any] = {
    "alpha": 1e-4,
    "loss": "log_loss",
    "penalty": "l2",
    "learning_rate": "optimal",
}
_SGD_KEYS = ("alpha", "loss", "penalty", "learning_rate", "eta0", "l1_ratio", "power_t")


class DigitsSGD:
    """digits-sgd: sklearn's SGDClassifier, one `partial_fit` pass per epoch; needs no torch.

    Config keys: alpha, loss, penalty, learning_rate (the sklearn schedule), eta0, l1_ratio,
    power_t. Inputs are standardised with train statistics, as SGD is sensitive to scale.
    """

    workload_name = "digits-sgd"
    metrics = ("accuracy", "loss")  # loss: when the estimator gives probabilities

    def __init__(self, seed: int = 0, **params: Any) -> None:
        self.seed = int(seed)
        self._defaults = _sgd_keys(params, f"{self.workload_name}: workload.params")
        self._clf: Any = None
        self._rng: np.random.Generator | None = None
        self._splits: Splits | None = None
        self._params: dict[str, Any] = {}
        self._threads = 1
        self.epochs_done = 0

    def set_threads(self, threads: int) -> None:
        """A new width between epochs (Fluid)."""
        self._threads = max(1, int(threads))

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        loss = self._defaults.get("loss", _SGD_DEFAULTS["loss"])
        return {
            "dataset": DIGITS,
            "dataset_mb": DIGITS_MB,
            "model": "linear classifier (scikit-learn SGDClassifier)",
            "training": f"SGD on {loss} unless the config says otherwise",
        }

    @classmethod
    def check_config(cls, config: Mapping[str, Any], where: str = "config") -> None:
        """The preflight hook (see `basht.workloads.base.Workload`): the key check `load` makes.

        Values are left to sklearn, which checks them only when fitting (at `load`).
        """
        _sgd_keys(config, where)

    @classmethod
    def prepare(cls, seed: int = 0, **params: Any) -> None:
        """The setup phase: import scikit-learn and split the data once per worker."""
        import sklearn.linear_model  # noqa: F401

        digits_splits(seed)

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        """Build the estimator for `config`, seeded from `resources.seed`; fails early on bad values."""
        from sklearn.base import clone
        from sklearn.linear_model import SGDClassifier

        where = f"{self.workload_name}: config"
        self._params = {**_SGD_DEFAULTS, **self._defaults, **_sgd_keys(config, where)}
        self._threads = max(1, int(resources.cpus))
        self._splits = digits_splits(self.seed).standardised()
        seed = int(resources.seed) % 2**32
        # shuffle=False: the epoch order comes from our own generator, whose state we checkpoint.
        self._clf = SGDClassifier(**self._params, random_state=seed, shuffle=False)
        try:
            # A throwaway fit on a few rows runs all of sklearn's parameter checks now.
            probe = slice(0, 4 * self._splits.n_classes)
            clone(self._clf).partial_fit(
                self._splits.X_train[probe], self._splits.y_train[probe], classes=self._classes
            )
        except (TypeError, ValueError) as err:
            raise WorkloadError(f"{where}: {' '.join(str(err).split())}") from None
        self._rng = np.random.default_rng(resources.seed)
        self.epochs_done = 0

    def train(self, epochs: int) -> None:
        """One shuffled `partial_fit` pass over the train split per epoch."""
        from threadpoolctl import threadpool_limits

        splits, rng = self._require_loaded()
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: epochs must be >= 0, got {epochs}")
        with threadpool_limits(self._threads):
            for _ in range(epochs):
                order = rng.permutation(len(splits.y_train))
                self._clf.partial_fit(
                    splits.X_train[order], splits.y_train[order], classes=self._classes
                )
                self.epochs_done += 1

    def validate(self) -> dict[str, float]:
        """Accuracy, and log-loss as `loss` when the estimator gives probabilities."""
        splits, _ = self._require_loaded()
        return self._evaluate(splits.X_val, splits.y_val)

    def test(self) -> dict[str, float]:
        """Accuracy, and log-loss as `loss` when the estimator gives probabilities."""
        splits, _ = self._require_loaded()
        return self._evaluate(splits.X_test, splits.y_test)

    def state_dict(self) -> dict[str, Any]:
        """A picklable copy of the estimator plus the shuffling generator's state."""
        _, rng = self._require_loaded()
        return {
            "workload": self.workload_name,
            "estimator": copy.deepcopy(self._clf),
            "generator": copy.deepcopy(rng.bit_generator.state),
            "epochs": self.epochs_done,
        }

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`; the current config's parameters apply from here on."""
        _, rng = self._require_loaded()
        try:
            clf = copy.deepcopy(state["estimator"])
            rng.bit_generator.state = copy.deepcopy(state["generator"])
            epochs = int(state["epochs"])
        except (KeyError, TypeError, ValueError) as err:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload") from err
        if type(clf) is not type(self._clf):
            raise WorkloadError(f"{self.workload_name}: checkpoint holds a {type(clf).__name__}")
        clf.set_params(**self._clf.get_params())
        self._clf = clf
        self.epochs_done = epochs

    # -- helpers -----------------------------------------------------------------------------

    @property
    def _classes(self) -> np.ndarray:
        assert self._splits is not None
        return np.arange(self._splits.n_classes)

    def _require_loaded(self) -> tuple[Splits, np.random.Generator]:
        if self._splits is None or self._rng is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")
        return self._splits, self._rng

    def _evaluate(self, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
        from threadpoolctl import threadpool_limits

        clf = self._clf
        has_proba = hasattr(clf, "predict_proba")
        if not hasattr(clf, "classes_"):
            # Untrained: all weights zero, so every class scores alike (argmax picks the first).
            metrics = {"accuracy": float(np.mean(y == 0))}
            if has_proba:
                metrics["loss"] = float(np.log(len(self._classes)))
            return metrics
        with threadpool_limits(self._threads):
            metrics = {"accuracy": float(np.mean(clf.predict(X) == y))}
            if has_proba:
                proba = clf.predict_proba(X)
                p = proba[np.arange(len(y)), np.searchsorted(clf.classes_, y)]
                metrics["loss"] = float(-np.mean(np.log(np.clip(p, 1e-15, 1.0))))
        return metrics


def _sgd_keys(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Reject unknown keys so a misspelt hyperparameter is an error, not a silent default."""
    for key in values:
        if key not in _SGD_KEYS:
            raise WorkloadError(
                f"{where}: unknown key {key!r} (expected one of: {', '.join(_SGD_KEYS)})"
            )
    return dict(values)
