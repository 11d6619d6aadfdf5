"""CPU package and DRAM energy from Intel/AMD RAPL counters under /sys/class/powercap."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from basht.energy.base import EnergyUnavailable, Reading

log = logging.getLogger(__name__)

POWERCAP_ROOT = Path("/sys/class/powercap")
# A bound on package power for choosing the poll interval, so at most one wrap falls between two
# reads: the counter range divided by this power, halved. 500 W covers today's largest sockets.
_MAX_DOMAIN_POWER_W = 500.0


@dataclass
class _Domain:
    name: str  # package-0, dram, ...
    component: str  # cpu | dram
    energy_file: Path
    max_uj: int
    last_uj: int
    total_uj: int = 0


class RaplSource:
    """Package domains summed as `cpu`, dram domains as `dram`; psys, core and uncore left out.

    psys contains the packages and core/uncore sit inside them, so adding any of them would count
    the same joules twice. Each domain keeps a wrap-corrected running total: a reading below the
    last one means the counter passed `max_energy_range_uj` once (the monitor polls often enough
    that it cannot pass twice). A domain whose range cannot be read is dropped with a warning
    rather than risk a negative or silently wrong number.
    """

    name = "rapl"

    def __init__(self, root: Path | str = POWERCAP_ROOT):
        self.root = Path(root)
        self.domains = self._discover()

    def _discover(self) -> list[_Domain]:
        if not self.root.is_dir():
            raise EnergyUnavailable(f"RAPL: {self.root} does not exist (no powercap driver)")
        zones = sorted(p for p in self.root.iterdir() if p.name.startswith("intel-rapl"))
        chosen: dict[str, Path] = {}
        for zone in zones:
            for candidate in [zone, *sorted(zone.glob(f"{zone.name}:*"))]:
                name = _read_text(candidate / "name")
                if name is None:
                    continue
                if not (name.startswith("package") or name == "dram"):
                    continue  # psys, core, uncore: inside or around the packages
                key = f"{name}@{_socket(candidate)}"
                # The MMIO interface reports the same domain again; keep one of each.
                if key not in chosen or candidate.name.startswith("intel-rapl-mmio"):
                    chosen[key] = candidate
        domains = []
        for key, zone in sorted(chosen.items()):
            name = key.split("@")[0]
            max_text = _read_text(zone / "max_energy_range_uj")
            if max_text is None or not max_text.isdigit() or int(max_text) <= 0:
                log.warning("RAPL: %s has no readable max_energy_range_uj; leaving it out", zone)
                continue
            try:
                first = int((zone / "energy_uj").read_text())
            except PermissionError:
                raise EnergyUnavailable(
                    f"RAPL: {zone / 'energy_uj'} is readable by root only (since CVE-2020-8694); "
                    "run `sudo chmod -R a+r /sys/class/powercap` or use a Prometheus exporter"
                ) from None
            except (OSError, ValueError) as err:
                log.warning("RAPL: cannot read %s (%s); leaving it out", zone / "energy_uj", err)
                continue
            component = "dram" if name == "dram" else "cpu"
            domains.append(_Domain(name, component, zone / "energy_uj", int(max_text), first))
        if not any(d.component == "cpu" for d in domains):
            raise EnergyUnavailable(f"RAPL: no readable package domain under {self.root}")
        return domains

    def read(self) -> Reading:
        totals: dict[str, float] = {}
        for d in self.domains:
            try:
                now = int(d.energy_file.read_text())
            except (OSError, ValueError):
                now = d.last_uj  # a failed read adds nothing rather than something wrong
            delta = now - d.last_uj if now >= d.last_uj else (d.max_uj - d.last_uj) + now
            d.total_uj += delta
            d.last_uj = now
            totals[d.component] = totals.get(d.component, 0.0) + d.total_uj * 1e-6
        return Reading(time.time(), totals)

    def max_interval_s(self) -> float | None:
        return min(d.max_uj * 1e-6 / _MAX_DOMAIN_POWER_W / 2 for d in self.domains)

    def describe(self) -> str:
        names = ", ".join(sorted({d.name for d in self.domains}))
        return f"RAPL counters ({names}) under {self.root}"

    def close(self) -> None:
        pass


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _socket(zone: Path) -> str:
    """The socket index of a zone: intel-rapl:1:0 -> 1 (MMIO and MSR zones share it)."""
    return zone.name.split(":")[1] if ":" in zone.name else zone.name
