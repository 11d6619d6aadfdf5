"""What every power source gives the monitor: cumulative joules per component, never decreasing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class EnergyUnavailable(Exception):
    """A source cannot be used on this machine; the reason is meant for the user."""


@dataclass(frozen=True)
class Reading:
    """Cumulative energy per component (joules since the source was opened) at one instant."""

    at: float  # unix seconds
    energy_j: dict[str, float]


class EnergySource(Protocol):
    """A node-level energy meter. `name` is what every figure it produces is labelled with."""

    name: str  # rapl | nvml | estimate | prometheus

    def read(self) -> Reading:
        """Cumulative joules per component; wrap-arounds and integration are the source's job."""

    def max_interval_s(self) -> float | None:
        """The longest safe gap between reads (a RAPL counter must not wrap twice), if any."""

    def describe(self) -> str:
        """One line: which devices, which model or counters."""

    def close(self) -> None: ...
