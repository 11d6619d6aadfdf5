"""Ray for one run: a Ray of its own on this machine, or a connection to an existing cluster.

A Ray of its own binds to 127.0.0.1 only, uses token authentication, keeps its files in a temp
folder of its own, and leaves no process or folder behind once closed: undeploy is measured, and
a benchmark that leaks a Ray into the next run measures the wrong thing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil

from basht.engine.ray import watchdog
from basht.engine.ray.watchdog import GRACE_S, session_processes
from basht.errors import BashtError

log = logging.getLogger(__name__)

#: 0: Ray's node address stays 127.0.0.1 (see `ray_on_loopback`).
ENABLE_RAY_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Ray starts its workers at niceness 15; the trials of a Ray Basht starts run at the priority
#: local and Optuna workers run at (0), so systems compete for the CPU on equal terms.
WORKER_NICENESS_ENV = "RAY_worker_niceness"

_CLIENT_TRIES = 3
_CLIENT_RETRY_S = 5.0
# What a Ray Client head says when it could not start the server for this driver: its runtime-env
# agent not up yet, or the new server process gone before the proxy read its command line.
_CLIENT_SERVER_FAILED = ("Starting Ray client server failed", "in start_specific_server")


class RaySession:
    """`open` starts or joins Ray and returns the `ray` module; `close` undoes it. Safe twice.

    `env` is set in this process from `open` to `close` (and so in every process a Ray of our own
    starts): Ray Tune's settings, say, or the driver's import path for workers that import the
    workload. What was there before is put back at `close`.
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int = 1,
        gpus: bool = False,
        env: Mapping[str, str] | None = None,
    ):
        self.address, self.num_cpus, self.gpus = address, num_cpus, gpus
        self.env = dict(env or {})
        self._saved_env: dict[str, str | None] = {}
        self._temp_dir: Path | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._connected = False

    @property
    def local(self) -> bool:
        return self.address is None

    @property
    def temp_dir(self) -> Path | None:
        """The folder of a Ray of our own, while it runs (removed at `close`); None otherwise."""
        return self._temp_dir

    def open(self) -> Any:
        for key, value in self.env.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        # Read by Ray on import (a local Ray binds to 127.0.0.1 only) and by the processes it
        # starts (no usage report sent home); neither is left set in this process afterwards.
        loopback = self.local or _on_loopback(self.address)
        with (
            _env_defaults({"RAY_USAGE_STATS_ENABLED": "0"}),
            ray_on_loopback() if loopback else contextlib.nullcontext(),
        ):
            try:
                import ray
            except ImportError:
                raise BashtError("executor: ray needs Ray: pip install 'basht[ray]'") from None
            if ray.is_initialized():
                raise BashtError("Ray is already running in this process; executor: ray starts it")
            self._connected = True  # from here on, close has something to stop
            if self.local:
                self._start_local(ray)
            else:
                refused = _unreachable(self.address)
                if refused is not None:
                    raise BashtError(f"cannot join the Ray cluster at {self.address}: {refused}")
                try:
                    self._join(ray)
                except (ConnectionError, RuntimeError, ValueError) as err:
                    # Refused (a token missing or wrong, another Ray version) or not an address.
                    reason = " ".join(str(err).split())[:500]
                    if reason.startswith("Failed to connect"):  # it answered, then refused us
                        reason += (
                            " (it answers: check the cluster's token in RAY_AUTH_TOKEN and that it"
                            f" runs Ray {ray.__version__})"
                        )
                    raise BashtError(
                        f"cannot join the Ray cluster at {self.address}: {reason}"
                    ) from None
        return ray

    def _join(self, ray: Any) -> None:
        """`ray.init` on the cluster; again, a few seconds later, when a Ray Client head could
        not start the server for this driver (on a head that has just started: its runtime-env
        agent is not up yet, or the server process went before the proxy could read it)."""
        for attempt in range(1, _CLIENT_TRIES + 1):
            held = _HeldStderr()
            try:
                with held, warnings.catch_warnings():
                    # Ray Client warns before it raises; the caller says it in one line.
                    warnings.filterwarnings("ignore", "Ray Client connection timed out")
                    ray.init(address=self.address, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError) as err:
                log.debug("Ray, while joining %s:\n%s", self.address, held.text)
                retry = any(sign in str(err) for sign in _CLIENT_SERVER_FAILED)
                if not retry or attempt == _CLIENT_TRIES:
                    said = held.last_line()
                    if said is None or said in str(err):
                        raise
                    raise ConnectionError(f"{err}; Ray said: {said}") from err
                with contextlib.suppress(Exception):
                    ray.shutdown()
                log.warning(
                    "the Ray Client server at %s could not start a server for this driver; "
                    "trying again in %.0f s (%d of %d)",
                    self.address,
                    _CLIENT_RETRY_S,
                    attempt + 1,
                    _CLIENT_TRIES,
                )
                time.sleep(_CLIENT_RETRY_S)
            except BaseException:  # interrupted: what Ray said is the user's to see
                held.release()
                raise
            else:
                held.release()
                return

    def _start_local(self, ray: Any) -> None:
        _local_token_auth()
        self._temp_dir = Path(tempfile.mkdtemp(prefix="basht-ray-", dir=_temp_root()))
        # Cleans up after us if this process dies without `close` (see watchdog.py). Run as a
        # file, not `-m`: it needs psutil alone, not the package (14 MiB instead of 70).
        self._watchdog = subprocess.Popen(
            [sys.executable, str(Path(watchdog.__file__)), str(self._temp_dir)]
            + [str(os.getpid())],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        with _env_defaults({WORKER_NICENESS_ENV: "0"}):
            ray.init(
                address="local",  # never a cluster named by RAY_ADDRESS
                num_cpus=self.num_cpus,
                num_gpus=None if self.gpus else 0,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                _temp_dir=str(self._temp_dir),
                logging_level=logging.WARNING,
            )
        log.info("started a local Ray in %s", self._temp_dir)

    def close(self, timeout_s: float = 10.0) -> None:
        """Disconnect; a Ray of our own is stopped, waited for, and its folder removed."""
        if self._connected:
            import ray

            keep = {os.getpid()} | ({self._watchdog.pid} if self._watchdog is not None else set())
            ours = session_processes(self._temp_dir, keep) if self._temp_dir is not None else []
            ray.shutdown()
            self._connected = False
            _gone, alive = psutil.wait_procs(ours, timeout=timeout_s)
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            psutil.wait_procs(alive, timeout=timeout_s)
        if self._watchdog is not None:  # told we are done: it ends what is left, and exits
            with contextlib.suppress(OSError):
                self._watchdog.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout_s + GRACE_S)
            self._watchdog = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()


def _host_port(address: str | None) -> tuple[str, int] | None:
    """(host, port) of a `host:port` or `scheme://host:port` address; None for `auto` or for
    anything else, which Ray looks up or rejects itself."""
    if not address or address == "auto":
        return None
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _on_loopback(address: str | None) -> bool:
    """Whether a `host:port` cluster address names this machine's loopback (not `ray://`, whose
    gRPC channel goes where it says)."""
    parsed = _host_port(address)
    if parsed is None or "://" in str(address):
        return False
    host = parsed[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unreachable(address: str | None, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at a `host:port` (or `ray://host:port`) address, or None if it does.

    Ray retries an unreachable head for many minutes before it gives up; a plain TCP connection
    tells in seconds.
    """
    parsed = _host_port(address)
    if parsed is None:
        return None
    try:
        with socket.create_connection(parsed, timeout=timeout_s):
            return None
    except OSError as err:
        host, port = parsed
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
        return f"nothing answers at {shown}:{port} ({err.strerror or err})"


def _temp_root() -> str:
    """Ray's sockets live under its temp folder and a socket path has at most 107 bytes."""
    root = tempfile.gettempdir()
    return root if len(root) <= 40 or not os.path.isdir("/tmp") else "/tmp"


class _HeldStderr:
    """Holds what this process writes to file descriptor 2, where Ray's C++ core logs past
    `sys.stderr`: joining with a wrong token, it repeats one warning a second for 20 s. What was
    held is written out after all if the join works; if not, its last line names the reason."""

    text = ""

    def __enter__(self) -> _HeldStderr:
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()

    def release(self) -> None:
        if self.text:
            sys.stderr.write(self.text)
            sys.stderr.flush()

    def last_line(self) -> str | None:
        """The last line held, without Ray's log prefix (`[time W pid tid] file.cc:210: `)."""
        lines = [line for line in self.text.splitlines() if line.strip()]
        return re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", lines[-1]).strip() if lines else None


def _local_token_auth() -> None:
    """Token authentication for our own Ray, without writing a token into the user's home.

    Left set for the life of the process, so every Ray it starts (and its children) agree.
    """
    has_token = any(os.environ.get(k) for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"))
    if not has_token and not (Path.home() / ".ray" / "auth_token").exists():
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    if "RAY_AUTH_MODE" in os.environ:
        return  # the user's choice, seen by Ray at import
    os.environ["RAY_AUTH_MODE"] = "token"
    # Ray builds its config from the environment at import: build it again (as Ray itself does
    # when it turns token authentication on). A Ray without tokens has nothing to rebuild.
    with contextlib.suppress(ImportError, AttributeError, TypeError):
        from ray._raylet import Config

        Config.initialize("")


@contextlib.contextmanager
def ray_on_loopback() -> Iterator[None]:
    """For the time of the block, a Ray started or joined in this process keeps to 127.0.0.1.

    Ray swaps a loopback address (`_node_ip_address="127.0.0.1"` too) for this machine's network
    address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER is 0, and reads that variable once, when it
    is first imported. So the variable is set (unless the user set it), for Ray's own processes
    and a first import, and a Ray imported before the block (Ray Tune's modules import it) is
    told through the constant it read.
    """
    with _env_defaults({ENABLE_RAY_CLUSTER_ENV: "0"}):
        constants = sys.modules.get("ray._private.ray_constants")
        before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
        if constants is not None:  # read as Ray reads it: "1" or "true" turns clusters on
            enabled = os.environ[ENABLE_RAY_CLUSTER_ENV].lower() in ("1", "true")
            constants.ENABLE_RAY_CLUSTER = enabled
        try:
            yield
        finally:
            if constants is not None:
                constants.ENABLE_RAY_CLUSTER = before


@contextlib.contextmanager
def _env_defaults(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables the user has not set, for the time of the block."""
    added = [k for k in values if k not in os.environ]
    os.environ.update({k: values[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
