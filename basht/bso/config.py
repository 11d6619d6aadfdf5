"""Server settings: command-line options first, then BASHT_BSO_* environment variables, then defaults."""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from basht.bso.errors import BSOError

ENV_PREFIX = "BASHT_BSO_"
DEFAULT_DB = "sqlite:///basht-bso.db"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
DEFAULT_TRIAL_TIMEOUT_S = 86400.0
"""How long a running trial may go without a report before it is abandoned (one day): far
longer than a typical epoch, so a live client is not cut off, yet a killed client holds its job's
pruning back for a day, not for ever."""
DEFAULT_CRASH_LIMIT = 2
"""How many pruning probes of one batch size may crash in a row before the size counts as
failing (it did not reach the target): one crash may be bad luck (a preempted machine), but a
size that kills its script each time (an out-of-memory crash) would otherwise be probed for ever."""
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the server takes (1 MiB). The protocol's largest body, a job spec, is
under 1 KiB plus a few bytes per batch size; a larger one is refused with a 413 before it is read
whole, so no client can make a server process buffer gigabytes."""
MIN_BODY_BYTES = 1024  # a job spec of a few batch sizes takes about 700 bytes


@dataclass(frozen=True)
class ServerSettings:
    """What `basht bso serve` runs with. Each field `x` can come from BASHT_BSO_X."""

    db: str = DEFAULT_DB
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    workers: int = 1
    log_level: str = "info"
    echo_sql: bool = False
    trial_timeout: float = DEFAULT_TRIAL_TIMEOUT_S  # seconds; 0: never abandon a trial
    crash_limit: int = DEFAULT_CRASH_LIMIT  # crashed probes in a row that fail a size; 0: never
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # larger request bodies are refused with a 413
    protect_reads: bool = False  # the token guards the read routes too (all but /health)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise BSOError(f"port {self.port}: expected 1..65535")
        if self.workers < 1:
            raise BSOError(f"workers {self.workers}: expected at least 1")
        if self.log_level not in LOG_LEVELS:
            raise BSOError(f"log level {self.log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
        if not (math.isfinite(self.trial_timeout) and self.trial_timeout >= 0):
            raise BSOError(
                f"trial timeout {self.trial_timeout:g}: expected seconds, 0 or more (0: never)"
            )
        if self.crash_limit < 0:
            raise BSOError(f"crash limit {self.crash_limit}: expected 0 or more (0: never)")
        if self.max_body_bytes < MIN_BODY_BYTES:
            raise BSOError(
                f"max body bytes {self.max_body_bytes}: expected at least {MIN_BODY_BYTES} "
                "(a job spec takes about 700 bytes)"
            )
        if self.protect_reads and self.token is None:
            raise BSOError(
                "protect reads: needs a token to protect them with (BASHT_BSO_TOKEN or --token)"
            )
        if self.token is not None and not self.token.strip():
            raise BSOError("token: empty; leave it unset to serve without one")
        if self.token is not None:
            check_token(self.token)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> ServerSettings:
        """Settings from `given` (None means not given), else the environment, else defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            value = given.get(field.name)
            if value is None and f"{ENV_PREFIX}{field.name.upper()}" in env:
                value = _parse(field.name, field.type, env[f"{ENV_PREFIX}{field.name.upper()}"])
            if value is not None:
                values[field.name] = value
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The BASHT_BSO_* variables that make `from_env` rebuild these settings (for workers)."""
        env = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                env[f"{ENV_PREFIX}{field.name.upper()}"] = (
                    str(value).lower() if isinstance(value, bool) else str(value)
                )
        return env

    def check_can_listen(self) -> None:
        """Fail (BSOError) unless `host`:`port` can be bound now, the way uvicorn binds it.

        `basht bso serve` calls this before it prints anything or touches the database, so a
        port already taken is one line instead of a banner, a migration and uvicorn's errors.
        """
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.host, self.port))
        except socket.gaierror as err:
            raise BSOError(f"host {self.host!r}: cannot resolve it ({err.strerror})") from None
        except OSError as err:
            reason = err.strerror or str(err)
            raise BSOError(f"cannot listen on {self.host} port {self.port}: {reason}") from None

    def but(self, **changes: Any) -> ServerSettings:
        return replace(self, **changes)


def check_token(token: str) -> None:
    """A token travels in an HTTP header, which carries printable ASCII only: clients could not
    send any other (httpx fails with a UnicodeEncodeError), and surrounding spaces are lost."""
    if not (token.isascii() and token.isprintable()) or token != token.strip():
        raise BSOError(
            "token: use printable ASCII characters without surrounding spaces "
            "(it is sent in an HTTP header)"
        )


def _parse(name: str, kind: Any, raw: str) -> Any:
    var = f"{ENV_PREFIX}{name.upper()}"
    if kind in ("int", int):
        try:
            return int(raw)
        except ValueError:
            raise BSOError(f"{var}={raw!r}: expected an integer") from None
    if kind in ("float", float):
        try:
            return float(raw)
        except ValueError:
            raise BSOError(f"{var}={raw!r}: expected a number") from None
    if kind in ("bool", bool):
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise BSOError(f"{var}={raw!r}: expected true or false")
    return raw or None
