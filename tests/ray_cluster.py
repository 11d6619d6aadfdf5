"""A real two-node Ray cluster on 127.0.0.1 for the tests (and benchmarks/fluid_ray.py).

Both nodes run in a network namespace of their own, where only `lo` is up, so the cluster is on
127.0.0.1 and reaches nothing else; the second node has a PID namespace of its own too, so its
processes are out of the driver's sight as on another machine. Token authentication is on. Needs
root and iproute2 (`need_tool("ip")` skips the test without them).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cli import cli_env
from tests.tools import need_tool

# Runs a command as a child subreaper: processes it leaves behind are re-parented here rather than
# to init, so the test can list (into argv[1]) and end every one. Ray's agents outlive a raylet.
REAPER = """
import ctypes, os, subprocess, sys
import psutil
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
main = subprocess.Popen(sys.argv[2:])
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == main.pid:
        break
left = psutil.Process().children(recursive=True)
lines = []
for p in left:
    try:
        lines.append(f"{p.pid} {' '.join(p.cmdline())[:120]}\\n")
    except psutil.Error:
        lines.append(f"{p.pid} (exiting)\\n")
    try:
        p.kill()
    except psutil.Error:
        pass
with open(sys.argv[1], "w") as f:
    f.write("".join(lines))
psutil.wait_procs(left, timeout=10)
sys.exit(os.waitstatus_to_exitcode(status))
"""

_names = itertools.count()


def short_temp() -> Path:
    """Ray puts Unix sockets (at most 107 bytes of path) under its temp folder: keep it short."""
    return Path(tempfile.mkdtemp(prefix="bt", dir="/tmp"))


def reaped(report: Path, *command: str) -> list[str]:
    return [sys.executable, "-c", REAPER, str(report), *command]


@dataclass
class Cluster:
    namespace: str
    address: str
    env: dict[str, str]
    root: Path
    head: subprocess.Popen[bytes]
    node: subprocess.Popen[bytes]
    cpus_per_node: int = 1
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)  # nodes added later

    def run(self, *command: str) -> subprocess.Popen[str]:
        """Start a command inside the cluster's network namespace, where 127.0.0.1 is the cluster."""
        return subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, *command],
            cwd=self.root,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def add_node(self) -> subprocess.Popen[bytes]:
        """Start one more worker node (PID namespace of its own) and wait until it runs."""
        name = f"node-{next(_names)}"
        proc = _worker_node(self, name)
        self.extra.append(proc)
        await_node(self.root, name, proc)
        return proc


def _sh(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=30)


def ray_node(
    namespace: str,
    root: Path,
    name: str,
    env: dict[str, str],
    *args: str,
    own_pids: bool = False,
    cpus: int = 1,
) -> subprocess.Popen[bytes]:
    """`ray start --block` for one node, inside the namespace and under a reaper of its own;
    with `own_pids`, in a PID namespace of its own too, so that its processes are out of the
    driver's sight as on another machine."""
    command = [
        "ip",
        "netns",
        "exec",
        namespace,
        *(["unshare", "--pid", "--fork", "--mount-proc"] if own_pids else []),
        *reaped(root / f"{name}.left", sys.executable, "-m", "ray.scripts.scripts", "start"),
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--num-cpus={cpus}",
        "--num-gpus=0",
        f"--temp-dir={root / name}",  # per node: tells the nodes' files apart
        f"--object-store-memory={100 * 2**20}",
        *args,
    ]
    with open(root / f"{name}.log", "wb") as log:  # the node keeps its own copy of the file
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _worker_node(cluster: Cluster, name: str) -> subprocess.Popen[bytes]:
    # `ray start --address` refuses to add a node when this is 0 (it means "no clusters").
    env = {**cluster.env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}
    return ray_node(
        cluster.namespace,
        cluster.root,
        name,
        env,
        f"--address={cluster.address}",
        own_pids=True,
        cpus=cluster.cpus_per_node,
    )


def await_node(root: Path, name: str, proc: subprocess.Popen[bytes]) -> None:
    log, deadline = root / f"{name}.log", time.monotonic() + 180  # a guard against hanging
    while "Ray runtime started" not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"ray start ({name}) exited:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"ray start ({name}) hangs:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def kill_tree(proc: subprocess.Popen[bytes]) -> list[str]:
    """SIGKILL every process below `proc` (a node's crash); returns their names."""
    try:
        below = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    names = []
    for p in below:
        try:
            names.append(p.name())
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(below, timeout=10)
    return names


@contextlib.contextmanager
def two_node_cluster(cpus_per_node: int = 1) -> Iterator[Cluster]:
    """A head and a worker node of `cpus_per_node` CPUs each; everything removed afterwards."""
    need_tool("ip")  # network namespaces, as root (the tests are marked needs_root)
    namespace, root = f"basht-ray-{os.getpid()}-{secrets.token_hex(2)}", short_temp()
    env = {
        **cli_env(),
        "TMPDIR": str(root),
        # Token authentication in every Ray process, the driver's too.
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        # The driver and the head take 127.0.0.1 as their address without looking outside.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # A dead node is declared dead after ~3 s instead of ~15 s.
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
    }
    _sh("ip", "netns", "add", namespace)
    head = None
    cluster: Cluster | None = None
    try:
        _sh("ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up")
        head = ray_node(
            namespace,
            root,
            "head",
            env,
            "--head",
            "--port=6379",
            "--include-dashboard=false",
            "--ray-client-server-port=10001",
            cpus=cpus_per_node,
        )
        await_node(root, "head", head)
        cluster = Cluster(namespace, "127.0.0.1:6379", env, root, head, head, cpus_per_node)
        cluster.node = _worker_node(cluster, "node")
        await_node(root, "node", cluster.node)
        yield cluster
    finally:
        procs = [*cluster.extra, cluster.node] if cluster is not None else []
        for proc in dict.fromkeys([*procs, head]):  # the node is the head until it starts
            if proc is not None:
                kill_tree(proc)
                proc.kill()
                proc.wait(10)
        subprocess.run(["ip", "netns", "del", namespace], check=False, timeout=30)
        shutil.rmtree(root, ignore_errors=True)


# -- a node lost in the middle of a real run -------------------------------------------------------


def finish(driver: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    """The driver's stdout and stderr once it ends. Past `timeout_s` it is killed and the test
    fails with the end of what it wrote: a stuck driver must not outlive its test, holding the
    cluster's workers and the machine's cores through the tests after it."""
    try:
        return driver.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        driver.kill()
        _, err = driver.communicate()
        pytest.fail(f"the driver ran past {timeout_s:g} s and was killed:\n{(err or '')[-3000:]}")


def finished_trials(store: Any, run_id: str) -> dict[int, tuple[str, float | None, int]]:
    """Each trial that is done for now (completed, paused, stopped): its state, value, budget."""
    done = ("completed", "paused", "stopped")
    return {t.number: (t.state, t.value, t.budget) for t in store.trials(run_id) if t.state in done}


def lose_a_node_mid_run(
    cluster: Cluster, path: Path, db: Path, url: str, timeout_s: float = 600
) -> tuple[dict[int, tuple[str, float | None, int]], list[str], float, str]:
    """`basht run path` inside the cluster; once 8 trials are done, the second node is killed.
    Returns what was done before the kill, the processes killed, when, and the driver's stderr
    (it must end with exit 0)."""
    from basht.errors import StoreError
    from basht.store import Store

    driver = cluster.run(sys.executable, "-m", "basht.cli", "run", "-q", str(path))
    try:
        before: dict[int, tuple[str, float | None, int]] = {}
        while driver.poll() is None and len(before) < 8:
            time.sleep(0.2)
            if db.exists():
                with contextlib.suppress(StoreError):  # the driver may still be creating it
                    store = Store(url)
                    runs = store.list_runs()
                    before = finished_trials(store, runs[0].id) if runs else {}
        assert driver.poll() is None, "the run ended before a node could be lost"
        killed_at, killed = time.time(), kill_tree(cluster.node)
        _, err = driver.communicate(timeout=timeout_s)
    finally:
        if driver.poll() is None:
            driver.kill()
    # A worker was on the second node, and the driver saw it go.
    assert any(name.startswith("ray::TrialActor") for name in killed), killed
    assert driver.returncode == 0, err[-3000:]
    assert "was lost" in err
    return before, killed, killed_at, err


def assert_nothing_finished_was_lost(
    store: Any, before: dict[int, tuple[str, float | None, int]], trials: int = 32
) -> Any:
    """The run completed with all its trials; every trial done before the loss kept its result,
    and no epoch was reported twice. Returns the run."""
    (run,) = store.list_runs()
    after = {t.number: t for t in store.trials(run.id)}
    assert run.status == "completed" and run.executor == "ray"
    assert sorted(after) == list(range(trials))
    assert {t.state for t in after.values()} <= {"completed", "stopped"}
    for number, (state, value, budget) in before.items():
        if state == "completed":
            assert (after[number].state, after[number].value) == ("completed", value)
        assert after[number].budget >= budget
    heard = [(r.trial_id, r.epoch) for r in store.reports(run.id)]
    assert len(heard) == len(set(heard))  # a replayed trial reported nothing twice
    return run
