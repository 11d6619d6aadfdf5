"""Checkpoint files: written atomically and owner-only, read only where nobody else can write.

A checkpoint is a pickle, and unpickling runs code: a run folder another user can write to would
let them run theirs in the next resume. So folders are made owner-only, files owner-readable
only, and a checkpoint in a file or folder that another user owns or may write is refused. A
state made only of tensors, numbers, strings and containers (a PyTorch model's) is written with
`torch.save` and read back with `torch.load(weights_only=True)`, which builds no other object.
"""

from __future__ import annotations

import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

from basht.errors import BashtError

#: How a `torch.save` file begins (a zip archive); a pickle begins with b"\x80".
_TORCH_MAGIC = b"PK\x03\x04"
_PLAIN = (str, int, float, bool, type(None), bytes)


class UnsafeCheckpoint(BashtError):
    """A checkpoint that someone other than this user could have written."""


def save_state(state: Any, path: str | Path) -> None:
    """Write `state` at `path`, atomically: a kill mid-write never leaves half a checkpoint
    under the real name. A state that cannot be written leaves nothing behind."""
    torch = sys.modules.get("torch")  # only a process that has torch can hold tensors
    if torch is not None and _tensors_only(state, torch):

        def dump(f: Any) -> None:
            torch.save(state, f)

    else:

        def dump(f: Any) -> None:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)

    _write_privately(Path(path), dump)


def load_state(path: str | Path) -> Any:
    """The state saved at `path`, once it is known that only this user could have written it."""
    with open(check_private(path), "rb") as f:
        if f.read(4) == _TORCH_MAGIC:
            import torch

            f.seek(0)
            return torch.load(f, weights_only=True)
        f.seek(0)
        return pickle.load(f)


def write_bytes(path: str | Path, data: bytes) -> None:
    """A checkpoint that arrived as bytes (from a Ray actor), written as `save_state` writes."""
    _write_privately(Path(path), lambda f: f.write(data))


def read_bytes(path: str | Path) -> bytes:
    """A checkpoint's bytes, to hand to a worker elsewhere, checked as `load_state` checks."""
    return check_private(path).read_bytes()


def check_private(path: str | Path) -> Path:
    """`path`, if it and its folder belong to this user (or root) and nobody else may write
    them; else UnsafeCheckpoint, in one line that says why and how to fix it."""
    target = Path(path)
    for place in (target, target.parent):
        info = place.stat()
        if info.st_uid not in (os.getuid(), 0):
            raise UnsafeCheckpoint(
                f"checkpoint {target}: refused, {place} belongs to another user (uid "
                f"{info.st_uid}); loading it could run their code"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeCheckpoint(
                f"checkpoint {target}: refused, {place} is writable by others "
                f"(mode {stat.filemode(info.st_mode)}); loading it could run their code "
                f"(chmod go-w {place} if you trust it)"
            )
    return target


def _write_privately(target: Path, dump: Any) -> None:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            dump(f)
    except BaseException:  # a state that cannot be pickled, a full disk: leave nothing behind
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def _tensors_only(state: Any, torch: Any) -> bool:
    """Whether `state` holds tensors and nothing `torch.load(weights_only=True)` would refuse
    (other than tensors: numbers, strings and dicts, lists and tuples of them)."""
    found = False
    todo = [state]
    while todo:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            found = True
        elif isinstance(item, dict):
            if not all(isinstance(k, str | int) for k in item):
                return False
            todo.extend(item.values())
        elif type(item) in (list, tuple):
            todo.extend(item)
        elif type(item) not in _PLAIN:
            return False
    return found
