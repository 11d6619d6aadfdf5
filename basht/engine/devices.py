"""Which accelerator devices each trial gets: shares of one device, or several whole devices.

Fluid's widths are in GPUs. Below one a trial shares a device, above one it trains data-parallel
over several. Widths are snapped to shares that always pack: fractions 1/2^k of a device (down to
the smallest share allowed) and whole numbers of devices. Sizes that divide each other fill unit
bins exactly under first-fit decreasing, so a plan whose widths sum to at most the number of
devices always finds a place for every trial, with no device over-committed.

Moving a trial to other devices costs a restart from its checkpoint, so placement first keeps
every trial whose width did not change where it is, and only places the others afresh.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from basht.engine.packing import TrialLoad, fluid_widths
from basht.workloads.base import check_share

_EPS = 1e-9


@dataclass(frozen=True)
class Placement:
    """Devices (indexes into the node's device list) and the share of each the trial may use."""

    devices: tuple[int, ...]
    share: float = 1.0

    @property
    def width(self) -> float:
        return self.share * len(self.devices)


def snap(width: float, min_share: float) -> float:
    """The largest packable width not above `width` (never below `min_share`)."""
    if width >= 1:
        return float(math.floor(width + _EPS))
    share = 1.0
    while share / 2 >= min_share - _EPS and share > width + _EPS:
        share /= 2
    return max(share, min_share)


def grow(width: float) -> float:
    """The next packable width up: double a share, or one device more."""
    return width * 2 if width < 1 else width + 1


def gpu_widths(
    trials: Sequence[TrialLoad], devices: int, min_share: float = 1.0
) -> dict[int, float]:
    """Fluid's widths on `devices` GPUs, snapped to packable shares, free capacity handed out
    again (to the trial that would finish last) in packable steps."""
    min_share = check_share(min_share)
    raw = fluid_widths(trials, float(devices), min_share)
    by_id = {t.trial_id: t for t in trials}
    widths = {i: snap(w, max(min_share, by_id[i].min_width)) for i, w in raw.items()}
    while True:
        free = devices - sum(widths.values())
        candidates = [
            i
            for i, w in widths.items()
            if grow(w) - w <= free + _EPS
            and grow(w) <= by_id[i].max_width + _EPS
            and by_id[i].gains(w, grow(w))
        ]
        if not candidates:
            return widths
        last = max(candidates, key=lambda i: by_id[i].height(widths[i]))
        widths[last] = grow(widths[last])


def place(
    widths: Mapping[int, float],
    devices: int,
    current: Mapping[int, Placement] | None = None,
) -> dict[int, Placement]:
    """Devices for every trial: unchanged widths stay put, the rest go best-fit decreasing.

    When the kept trials leave the free shares too fragmented, everything is placed afresh.
    Raises ValueError when the widths do not fit (more than the devices, or shares that do not
    pack); a plan from `gpu_widths` always fits.
    """
    if current:
        try:
            return _place(widths, devices, current)
        except ValueError:
            pass
    return _place(widths, devices, {})


def _place(
    widths: Mapping[int, float], devices: int, current: Mapping[int, Placement]
) -> dict[int, Placement]:
    free = [1.0] * devices
    out: dict[int, Placement] = {}
    for trial_id, width in widths.items():
        kept = current.get(trial_id)
        if kept is None or abs(kept.width - width) > _EPS:
            continue
        if all(d < devices and free[d] >= kept.share - _EPS for d in kept.devices):
            for d in kept.devices:
                free[d] -= kept.share
            out[trial_id] = kept
    for trial_id in sorted((i for i in widths if i not in out), key=lambda i: (-widths[i], i)):
        width = widths[trial_id]
        if width >= 1:
            whole = [d for d in range(devices) if free[d] >= 1 - _EPS][: int(round(width))]
            if len(whole) < round(width):
                raise ValueError(f"trial {trial_id} needs {width:g} whole GPUs; too few are free")
            for d in whole:
                free[d] = 0.0
            out[trial_id] = Placement(tuple(whole), 1.0)
        else:
            # Best fit: the fullest device it still fits on keeps whole devices free for others.
            fits = [d for d in range(devices) if free[d] >= width - _EPS]
            if not fits:
                raise ValueError(f"trial {trial_id} needs a {width:g} GPU share; none is free")
            d = min(fits, key=lambda d: (free[d], d))
            free[d] -= width
            out[trial_id] = Placement((d,), width)
    return out
