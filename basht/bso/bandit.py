"""Gaussian Thompson sampling over batch sizes, exactly as Zeus computes it (its quirks included).

Each arm (batch size) has a Gaussian belief about its mean reward (reward = −cost). The posterior
is refitted from the arm's whole reward window every time, with the reward precision learned as
1 / population variance. Rewards go through numpy in the order Zeus uses, so sums, variances and
samples are bit-identical and a seeded job picks the same batch sizes as Zeus's server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArmState:
    """The posterior N(param_mean, 1/param_precision) of one batch size's mean reward."""

    batch_size: int
    param_mean: float
    param_precision: float
    reward_precision: float
    num_observations: int

    @property
    def cold(self) -> bool:
        """No observation yet: the belief is only the prior."""
        return self.num_observations == 0


def fit_arm(
    batch_size: int, rewards: Sequence[float], prior_mean: float, prior_precision: float
) -> ArmState:
    """The posterior after `rewards` (Zeus's `GaussianTS._fit_arm`).

    One observation, or several identical ones, have zero variance and so infinite precision: the
    arm's sample is then exactly the observed mean. With the default flat prior (precision 0) the
    posterior is N(sample mean, variance / n).

    An empty window is not an error here (Zeus raises): it gives the prior, a cold arm. That only
    happens for the arms our fixes create (`num_pruning_rounds = 0`, or every size failed).
    """
    if len(rewards) == 0:
        return ArmState(batch_size, float(prior_mean), float(prior_precision), 0.0, 0)
    arr = np.asarray(rewards, dtype=np.float64)
    variance = np.var(arr)
    reward_prec = np.inf if variance == 0.0 else np.reciprocal(variance)
    if reward_prec == np.inf:
        new_prec = np.inf
        new_mean = arr.mean()
    else:
        new_prec = prior_precision + len(arr) * reward_prec
        new_mean = (prior_precision * prior_mean + reward_prec * arr.sum()) / new_prec
    return ArmState(batch_size, float(new_mean), float(new_prec), float(reward_prec), len(arr))


def choose_arm(arms: Sequence[ArmState], rng: np.random.Generator, num_explorations: int) -> int:
    """The batch size to run next (Zeus's `GaussianTS.predict`), given arms in ascending order.

    First a random permutation of the arms; the first one observed fewer than `num_explorations`
    times is explored. Otherwise every arm draws a sample from its posterior and the largest
    sample wins (ties: the smaller batch size). The random draws are Zeus's, in Zeus's order: one
    `choice` permutation, then one `normal` per arm.

    Fix over Zeus: a cold arm is always explored first, whatever `num_explorations` is, because
    a flat prior has infinite variance and its "sample" would be meaningless.
    """
    if not arms:
        raise ValueError("no arms to choose from")
    by_size = {arm.batch_size: arm for arm in arms}
    order = rng.choice(np.array([arm.batch_size for arm in arms]), len(arms), replace=False)
    for size in order:
        arm = by_size[int(size)]
        if arm.num_observations < num_explorations or arm.cold:
            return arm.batch_size
    samples: dict[int, float] = {}
    for arm in arms:
        scale = np.sqrt(np.reciprocal(arm.param_precision))
        samples[arm.batch_size] = float(rng.normal(arm.param_mean, scale))
    return max(samples, key=samples.__getitem__)


def mab_window(newest_first: Sequence[float], current: float, window_size: int) -> list[float]:
    """The rewards an arm is refitted on after a MAB report, in Zeus's order.

    `newest_first` are the arm's earlier results (at most `window_size` of them when the window
    is on). If the window is full the oldest is dropped and the rest turned oldest-first; without
    a window they stay newest-first. The current reward goes last. The order only matters for
    numpy's pairwise sums, i.e. for bit-identical posteriors.
    """
    history = list(newest_first)
    if window_size > 0 and len(history) >= window_size:
        history.pop()
        history.reverse()
    history.append(current)
    return history
