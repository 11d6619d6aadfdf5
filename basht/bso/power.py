"""GPU power limits through NVML: the supported range, setting a limit, and putting it back.

Setting a power limit needs root (CAP_SYS_ADMIN). `open_power_limits("auto")` degrades to None with
one logged warning saying why; `open_power_limits("nvml")`, where the user asked for it, raises a
`PowerLimitError` instead. The candidate limits are Zeus's: from the highest supported limit down
to the lowest in 25 W steps (`GlobalPowerLimitOptimizer`'s `pl_step`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Literal, Protocol

from basht.bso.errors import BSOError
from basht.bso.hardware import visible_indices

log = logging.getLogger(__name__)

PowerLimitMode = Literal["auto", "nvml", "off"]
PL_STEP_W = 25  # Zeus's default stride between profiled power limits (zeus.optimizer.power_limit)
NVML_ERROR_NO_PERMISSION = 4  # nvml.h: NVML_ERROR_NO_PERMISSION


class PowerLimitError(BSOError):
    """This machine's GPU power limits cannot be read or set (no GPU, no NVML, not root)."""


class PowerLimits(Protocol):
    """What the client needs to change its GPUs' power limit (NVML's or a test's fake)."""

    def candidates_w(self) -> list[float]: ...

    def set_w(self, limit_w: float) -> None: ...

    def restore(self) -> None: ...


class NvmlPowerLimits:
    """The power limit of the visible NVIDIA GPUs, all set alike (they must support one range).

    Opening checks the permission at once, by setting each GPU's current limit again, so a
    machine where limits cannot be set is known before training starts, not in the middle.
    """

    def __init__(self, step_w: int = PL_STEP_W) -> None:
        try:
            import pynvml
        except ImportError:
            raise PowerLimitError(
                "nvidia-ml-py is not installed (pip install 'basht[gpu]')"
            ) from None
        self._nvml = pynvml
        self.step_w = step_w
        self._open = False
        try:
            pynvml.nvmlInit()
            self._open = True
            count = pynvml.nvmlDeviceGetCount()
            if count == 0:
                raise PowerLimitError("NVML sees no GPU")
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in visible_indices(count)]
            ranges = {
                tuple(pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)) for h in self._handles
            }
            if len(ranges) != 1:
                raise PowerLimitError(f"the GPUs support different power limit ranges: {ranges}")
            self.min_mw, self.max_mw = (int(v) for v in ranges.pop())
            self._original_mw = [
                int(pynvml.nvmlDeviceGetPowerManagementLimit(h)) for h in self._handles
            ]
            for handle, limit_mw in zip(self._handles, self._original_mw, strict=True):
                self._set(handle, limit_mw)
        except PowerLimitError:
            self._shutdown()
            raise
        except Exception as err:  # pynvml.NVMLError: no driver, no device
            self._shutdown()
            raise PowerLimitError(f"NVML: {err}") from None
        self.current_w: float = self._original_mw[0] / 1000

    def candidates_w(self) -> list[float]:
        """Highest to lowest supported limit in `step_w` steps, as Zeus profiles them."""
        step_mw = self.step_w * 1000
        return [mw / 1000 for mw in range(self.max_mw, self.min_mw - 1, -step_mw)]

    def set_w(self, limit_w: float) -> None:
        """Set every GPU to `limit_w` (clipped to the supported range)."""
        limit_mw = min(max(round(limit_w * 1000), self.min_mw), self.max_mw)
        for handle in self._handles:
            self._set(handle, limit_mw)
        self.current_w = limit_mw / 1000
        log.info("GPU power limit %g W", self.current_w)

    def restore(self) -> None:
        """Put back the limits found at opening and release NVML (safe to call twice)."""
        if not self._open:
            return
        try:
            for handle, limit_mw in zip(self._handles, self._original_mw, strict=True):
                self._set(handle, limit_mw)
        finally:
            self._shutdown()

    def _set(self, handle: Any, limit_mw: int) -> None:
        try:
            self._nvml.nvmlDeviceSetPowerManagementLimit(handle, limit_mw)
        except Exception as err:
            if getattr(err, "value", None) == NVML_ERROR_NO_PERMISSION:
                raise PowerLimitError(
                    "setting a GPU power limit needs root (CAP_SYS_ADMIN); run the training as "
                    "root, or in a container with --cap-add SYS_ADMIN"
                ) from None
            raise PowerLimitError(f"NVML could not set the power limit: {err}") from None

    def _shutdown(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


def open_power_limits(mode: PowerLimitMode) -> PowerLimits | None:
    """The GPUs' power limits for `mode`: "off" None; "nvml" NVML or a `PowerLimitError`; "auto"
    NVML, or None with a warning that says why the job trains at the GPUs' current limit."""
    if mode == "off":
        return None
    if mode not in ("auto", "nvml"):
        raise BSOError(f"power limit mode {mode!r}: expected auto, nvml or off")
    try:
        return NvmlPowerLimits()
    except PowerLimitError as err:
        if mode == "nvml":
            raise
        log.warning(
            "power limit not optimized on this machine: %s; training at the current limit", err
        )
        return None
