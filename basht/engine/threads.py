"""Hold a process to a number of threads in every math library it may load."""

from __future__ import annotations

import os
import sys

_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def thread_env(threads: int) -> dict[str, str]:
    return {name: str(threads) for name in _THREAD_VARS}


def limit_threads(threads: int) -> None:
    """Apply now and for libraries loaded later (env vars are read when a library loads)."""
    os.environ.update(thread_env(threads))
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
    except ImportError:  # pragma: no cover - threadpoolctl is a core dependency
        pass
