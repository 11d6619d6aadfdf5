"""Any command as a trial: a user's training script, unchanged, tuned by Basht.

The command is started in the trial's worker (its threads limited as the worker's are, its own
process group), with the configuration given three ways: filled into the command's `{key}`
placeholders (`{budget}` is the search's max_budget, `{python}` the interpreter running Basht),
as a JSON file named by `BASHT_CONFIG`,
and as environment variables `BASHT_HP_<KEY>`. Its results come back two ways:

- through the reporter (`basht.integrations.report`, or a line of JSON on `BASHT_REPORT_FD`),
  which answers each report with the decision, so the script can stop, or save its state in
  `BASHT_CHECKPOINT_DIR` and end when told to pause (`checkpoint: true`);
- from its output, unchanged: each line that the `metrics` regex matches is a report, its named
  groups the metrics (`step`, if there, the epoch). Stopping it ends its process group.

A command that ends non-zero, or says nothing for `timeout_s`, fails its trial with its last
lines of output as the reason. A paused trial's checkpoint is the files the script left in its
checkpoint folder, kept inside Basht's own checkpoint, so it resumes wherever the trial runs next.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from basht.errors import WorkloadError
from basht.workloads.base import Resources

#: Lines of output kept for a failed command's reason.
_TAIL_LINES = 5
_EXITED = object()  # queued when the command's output ends


class CommandWorkload:
    """A trial that runs `command`; see the module's docstring."""

    def __init__(
        self,
        seed: int = 0,
        *,
        command: str | list[str],
        metrics: str | None = None,
        checkpoint: bool = False,
        timeout_s: float | None = None,
        grace_s: float = 10.0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        max_budget: int | None = None,
    ):
        self.seed, self.command, self.checkpoint = seed, command, checkpoint
        self.pattern = re.compile(metrics) if metrics else None
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.env, self.cwd, self.max_budget = dict(env or {}), cwd, max_budget
        self.epochs_done = 0
        self._proc: subprocess.Popen[str] | None = None
        self._events: queue.Queue[Any] = queue.Queue()
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._answer: Any = None  # the decision pipe's write end, once started with the reporter
        self._pending = False  # a report waits for its answer
        self._last: dict[str, float] = {}
        self._tests: dict[str, float] = {}
        self._scratch_dir: Path | None = None  # made when first needed (a preflight builds one)
        self._resume_dir: Path | None = None
        self._config: dict[str, Any] = {}

    @property
    def _scratch(self) -> Path:
        """This trial's private folder: its config file, checkpoint and resume folders."""
        if self._scratch_dir is None:
            self._scratch_dir = Path(tempfile.mkdtemp(prefix="basht-trial-"))
        return self._scratch_dir

    @classmethod
    def can_checkpoint(cls, **params: Any) -> bool:
        """Only a command that saves its state when told to pause may be paused; others are
        stopped (ASHA's stopping variant)."""
        return bool(params.get("checkpoint", False))

    def about(self) -> dict[str, Any]:
        shown = self.command if isinstance(self.command, str) else shlex.join(self.command)
        return {
            "dataset": "set by the command",
            "dataset_mb": None,
            "model": "set by the command",
            "training": f"`{shown}`",
        }

    # -- the Workload protocol --------------------------------------------------------------

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        self._config = dict(config)
        self._resources = resources

    def train(self, epochs: int) -> None:
        """Let the command train `epochs` more epochs: each is its next report."""
        for _ in range(epochs):
            if self._proc is None:
                self._start()
            elif self._pending:
                self._reply("continue")
            self._last = self._next_report()
            self.epochs_done += 1

    def validate(self) -> dict[str, float]:
        return dict(self._last)

    def test(self) -> dict[str, float]:
        """The `test_*` metrics the command reported, without the prefix (none if it reported
        none): a script tests its model itself, as it trains it."""
        return dict(self._tests)

    def state_dict(self) -> dict[str, Any]:
        """Tell the command to pause (save its state and end), then keep the files it saved."""
        if self._proc is not None and self._pending:
            self._reply("pause")
            self._wait_for_exit()
        folder = self._scratch / "checkpoint"
        files = {}
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    files[str(path.relative_to(folder))] = path.read_bytes()
        return {"epochs": self.epochs_done, "files": files}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a pause: the command starts again with `BASHT_RESUME_FROM` naming a
        folder holding the files it saved."""
        try:
            files, epochs = state["files"], int(state["epochs"])
        except (KeyError, TypeError, ValueError):
            raise WorkloadError("command: not a checkpoint of a command trial") from None
        folder = self._scratch / f"resume-{epochs}"
        for name, data in files.items():
            target = (folder / name).resolve()
            if folder.resolve() not in target.parents:
                raise WorkloadError(f"command: checkpoint file {name!r} points outside its folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        folder.mkdir(parents=True, exist_ok=True)
        self._resume_dir, self.epochs_done = folder, epochs

    def close(self) -> None:
        """End the command: told to stop when it waits for an answer, else asked with SIGTERM,
        then its process group killed after `grace_s`; its files are dropped."""
        proc = self._proc
        if proc is not None and proc.poll() is None and self._pending:
            self._reply("stop")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(self.grace_s)
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                proc.wait(self.grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                proc.wait()
        if proc is not None:
            self._signal(signal.SIGKILL)  # what the command left running in its group
        if self._answer is not None:
            with contextlib.suppress(OSError):
                self._answer.close()
        if self._scratch_dir is not None:
            shutil.rmtree(self._scratch_dir, ignore_errors=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- the process ---------------------------------------------------------------------

    def _start(self) -> None:
        config_file = self._scratch / "config.json"
        config_file.write_text(json.dumps(self._config))
        env = {**os.environ, **self.env, "BASHT_CONFIG": str(config_file)}
        for key, value in self._config.items():
            env[f"BASHT_HP_{_env_name(key)}"] = _env_value(value)
        if self.max_budget is not None:
            env["BASHT_BUDGET"] = str(self.max_budget)
        if self.checkpoint:
            (self._scratch / "checkpoint").mkdir(exist_ok=True)
            env["BASHT_CHECKPOINT_DIR"] = str(self._scratch / "checkpoint")
        if self._resume_dir is not None:
            env["BASHT_RESUME_FROM"] = str(self._resume_dir)
        device = self._resources.device
        if device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(
                d.split(":", 1)[1] for d in self._resources.replicas
            )
        reports_r, reports_w = os.pipe()
        answers_r, answers_w = os.pipe()
        env["BASHT_REPORT_FD"], env["BASHT_DECISION_FD"] = str(reports_w), str(answers_r)
        try:
            self._proc = subprocess.Popen(
                self._argv(),
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                pass_fds=(reports_w, answers_r),
                start_new_session=True,  # its own process group: ended as one
            )
        except OSError as err:
            for fd in (reports_r, reports_w, answers_r, answers_w):
                os.close(fd)
            raise WorkloadError(f"command: cannot start {self._shown()} ({err})") from None
        os.close(reports_w)
        os.close(answers_r)
        self._answer = os.fdopen(answers_w, "w", buffering=1, encoding="utf-8")
        reports = os.fdopen(reports_r, "r", encoding="utf-8")
        threading.Thread(target=self._read_reports, args=(reports,), daemon=True).start()
        threading.Thread(target=self._read_output, daemon=True).start()

    def _argv(self) -> list[str]:
        values = {**self._config, "budget": self.max_budget, "python": sys.executable}
        try:
            if isinstance(self.command, str):
                return shlex.split(self.command.format_map(values))
            return [arg.format_map(values) for arg in self.command]
        except (KeyError, IndexError, ValueError) as err:
            raise WorkloadError(f"command: placeholder {err} is not a config key") from None

    def _read_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.rstrip("\n")
            self._tail.append(line)
            if self.pattern is not None:
                match = self.pattern.search(line)
                if match:
                    self._events.put(("regex", _floats(match.groupdict())))
            self._events.put(("alive", None))
        self._events.put((_EXITED, None))

    def _read_reports(self, reports: Any) -> None:
        with reports:
            for line in reports:
                try:
                    message = json.loads(line)
                    metrics = {k: v for k, v in message["metrics"].items() if v is not None}
                except (ValueError, KeyError, TypeError, AttributeError):
                    self._tail.append(f"(a report that is not JSON: {line.strip()[:200]})")
                    continue
                self._events.put(("report", metrics))

    def _next_report(self) -> dict[str, float]:
        """Wait for the command's next report; a command that ends or falls silent fails."""
        assert self._proc is not None
        while True:
            try:
                kind, metrics = self._events.get(timeout=self.timeout_s)
            except queue.Empty:
                self.close()
                raise WorkloadError(
                    f"command: no report or output for {self.timeout_s:g} s (timeout_s); "
                    f"last output: {self._tail_text()}"
                ) from None
            if kind == "alive":
                continue
            if kind is _EXITED:
                code = self._proc.wait()
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                if code == 0:
                    how = "ended before its budget"
                after = f"after {self.epochs_done} reports"
                if self.epochs_done == 0 and self.pattern is not None:
                    after = "with no line of output that `metrics` matches"
                raise WorkloadError(f"command {how} {after}; last output: {self._tail_text()}")
            tests = {k[5:]: v for k, v in metrics.items() if k.startswith("test_")}
            self._tests.update(tests)
            if kind == "report":
                self._pending = True
            if len(tests) == len(metrics):  # a report of test metrics only: not an epoch
                if kind == "report":
                    self._reply("continue")
                continue
            return {k: v for k, v in metrics.items() if k != "step"}

    def _reply(self, decision: str) -> None:
        self._pending = False
        with contextlib.suppress(OSError, ValueError):  # it ended: the next read says how
            self._answer.write(decision + "\n")

    def _wait_for_exit(self) -> None:
        assert self._proc is not None
        try:
            self._proc.wait(self.timeout_s or 600.0)
        except subprocess.TimeoutExpired:
            self.close()
            raise WorkloadError("command: told to pause, it did not end") from None
        if self._proc.returncode != 0:
            raise WorkloadError(
                f"command exited with code {self._proc.returncode} while pausing; last output: "
                f"{self._tail_text()}"
            )

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _tail_text(self) -> str:
        return " | ".join(line.strip() for line in self._tail if line.strip()) or "(none)"

    def _shown(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)


def _floats(groups: dict[str, str | None]) -> dict[str, float]:
    found = {}
    for name, text in groups.items():
        if text is None:
            continue
        with contextlib.suppress(ValueError):
            found[name] = float(text)
    return found


def _env_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", key).upper()


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
