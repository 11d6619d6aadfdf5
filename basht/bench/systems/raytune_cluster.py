"""A local Ray for one run, bound to 127.0.0.1, that leaves no process and no file behind.

Ray keeps its sessions, sockets and logs under a temporary directory (by default /tmp/ray, shared
by every Ray on the machine); here each run gets its own, and the environment its processes
inherit points TMPDIR there too, so removing that directory removes everything Ray wrote. With
RAY_ADDRESS set, the run connects to that cluster instead and leaves it running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

from basht.engine.ray_session import ENABLE_RAY_CLUSTER_ENV, WORKER_NICENESS_ENV, ray_on_loopback

log = logging.getLogger(__name__)

#: Set in the environment of Ray and of every process it starts (see the module docstring).
RAY_ENV = {
    ENABLE_RAY_CLUSTER_ENV: "0",  # one local node on 127.0.0.1; never expose a cluster
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage reports leave the machine
    "RAY_AIR_NEW_OUTPUT": "0",  # with verbose=0, Tune prints nothing per trial
    "TUNE_DISABLE_SIGINT_HANDLER": "1",  # Ctrl-C reaches Basht, which aborts and undeploys
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # Basht's store is the record; no CSV/JSON logs
}


class LocalRay:
    """Start (or join) Ray with `num_cpus`; `stop()` shuts it down and cleans up after it."""

    def __init__(self, num_cpus: int, address: str | None = None):
        self.num_cpus, self.address = num_cpus, address
        self.temp_dir: Path | None = None
        self._saved_env: dict[str, str | None] = {}
        self._started = False

    def start(self) -> None:
        import ray

        env = dict(RAY_ENV)
        if self.address is None:
            # Short, so Ray's socket paths stay under the 107-byte limit of Unix sockets.
            self.temp_dir = Path(tempfile.mkdtemp(prefix="basht-raytune-"))
            env["TMPDIR"] = str(self.temp_dir)
            # its trials at the priority of native and Optuna workers, unless the user says
            env[WORKER_NICENESS_ENV] = os.environ.get(WORKER_NICENESS_ENV, "0")
        # Ray's workers import the workload: give them the driver's import path.
        paths = [os.path.abspath(p or os.curdir) for p in sys.path]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if os.path.isdir(p)))
        for key, value in env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
        if self.address is None:
            options.update(
                num_cpus=self.num_cpus,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                _temp_dir=str(self.temp_dir),
            )
        else:
            options["address"] = self.address
        self._started = True
        with ray_on_loopback() if self.address is None else contextlib.nullcontext():
            ray.init(**options)

    def stop(self) -> None:
        """Shut Ray down, wait for (or end) the processes it started, remove its directory."""
        if self._started:
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()
            self._started = False
        if self.temp_dir is not None:
            self._reap(str(self.temp_dir))
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    @staticmethod
    def _reap(marker: str, timeout_s: float = 10.0) -> None:
        """The processes of this Ray (their command lines name its directory), ended for sure."""
        mine = []
        for process in psutil.process_iter(["cmdline", "environ"]):
            if process.pid == os.getpid():
                continue  # the driver itself has the marker in its environment
            with contextlib.suppress(psutil.Error):
                cmdline = " ".join(process.info["cmdline"] or [])
                environ = process.info["environ"] or {}
                if marker in cmdline or environ.get("TMPDIR") == marker:
                    mine.append(process)
        if not mine:
            return
        _, alive = psutil.wait_procs(mine, timeout=timeout_s)
        for process in alive:
            log.warning("Ray left process %d running after shutdown; ending it", process.pid)
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _, alive = psutil.wait_procs(alive, timeout=5)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
