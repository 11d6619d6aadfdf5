"""The mnist-mlp workload and a reader/writer for the IDX files MNIST ships in."""

from __future__ import annotations

import functools
import gzip
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from basht.errors import WorkloadError
from basht.workloads._torch_mlp import Splits, TorchMLP

__all__ = ["FILES", "MnistMLP", "mnist_splits", "read_idx", "write_idx"]

# IDX data type code -> big-endian numpy dtype (the format is big-endian throughout).
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {(dt.kind, dt.itemsize): code for code, dt in IDX_DTYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"

FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not) into a native-endian array.

    Gzip is recognised by its magic bytes, not the name: an IDX file always starts with two zero
    bytes, so the two can never be confused. Every problem is one WorkloadError line naming the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such file") from None
    except OSError as err:
        raise WorkloadError(f"{path}: cannot read ({err.strerror})") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise WorkloadError(f"{path}: broken gzip data ({reason})") from None
    if len(data) < 4:
        raise WorkloadError(f"{path}: too short for an IDX header ({len(data)} bytes)")
    if data[0] != 0 or data[1] != 0:
        magic = int.from_bytes(data[:4], "big")
        raise WorkloadError(f"{path}: bad magic number 0x{magic:08x} (not an IDX file)")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise WorkloadError(f"{path}: unknown IDX data type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise WorkloadError(
            f"{path}: truncated header ({len(data)} bytes, {ndim} dimensions need {header})"
        )
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = IDX_DTYPES[code]
    expected = header + math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "trailing bytes"
        raise WorkloadError(
            f"{path}: {problem}: shape {shape} of {dtype.name} needs {expected} bytes, "
            f"file has {len(data)}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))  # a writable native-endian copy


def write_idx(path: str | Path, array: Any) -> Path:
    """Write `array` as an IDX file, gzip-compressed when the name ends in `.gz`.

    Used to make small MNIST-shaped fixtures; supported dtypes are those IDX can hold.
    """
    path = Path(path)
    a = np.asarray(array)
    code = _CODES.get((a.dtype.kind, a.dtype.itemsize))
    if code is None:
        kinds = "uint8, int8, int16, int32, float32, float64"
        raise ValueError(f"IDX cannot hold dtype {a.dtype} (supported: {kinds})")
    if a.ndim > 255 or any(d >= 2**32 for d in a.shape):
        raise ValueError(f"IDX cannot hold shape {a.shape}")
    header = bytes([0, 0, code, a.ndim]) + b"".join(d.to_bytes(4, "big") for d in a.shape)
    payload = header + np.ascontiguousarray(a, dtype=IDX_DTYPES[code]).tobytes()
    if path.name.endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)  # mtime=0: same array, same bytes
    path.write_bytes(payload)
    return path


def _find(directory: Path, name: str) -> Path:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise WorkloadError(f"mnist-mlp: {directory}: neither {name} nor {name}.gz found")


def _signature(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    stats = [p.stat() for p in paths]
    return tuple(
        (str(p.resolve()), s.st_mtime_ns, s.st_size) for p, s in zip(paths, stats, strict=True)
    )


def mnist_splits(directory: str | Path, validation_fraction: float, limit: int | None) -> Splits:
    """The MNIST splits from `directory`; cached per file contents (mtime, size) across trials."""
    directory = Path(directory)
    paths = [_find(directory, name) for name in FILES.values()]
    return _mnist_splits(_signature(paths), validation_fraction, limit)


@functools.lru_cache(maxsize=2)
def _mnist_splits(
    files: tuple[tuple[str, int, int], ...], validation_fraction: float, limit: int | None
) -> Splits:
    train_x, train_y, test_x, test_y = (read_idx(path) for path, _, _ in files)
    for (path, _, _), x, y in ((files[0], train_x, train_y), (files[2], test_x, test_y)):
        if x.ndim < 2:
            raise WorkloadError(f"{path}: expected images (N, rows, cols), got shape {x.shape}")
        if y.ndim != 1 or y.dtype.kind not in "iu":
            raise WorkloadError(f"{path}: labels must be 1-D integers, got {y.dtype} {y.shape}")
        if len(x) != len(y):
            raise WorkloadError(f"{path}: {len(x)} images but {len(y)} labels")
        if len(y) and y.min() < 0:
            raise WorkloadError(f"{path}: negative label {int(y.min())}")
    if train_x.shape[1:] != test_x.shape[1:]:
        raise WorkloadError(
            f"mnist-mlp: train images are {train_x.shape[1:]} but test images {test_x.shape[1:]}"
        )
    if limit is not None:
        train_x, train_y = train_x[:limit], train_y[:limit]
    n_val = round(len(train_y) * validation_fraction)
    n_train = len(train_y) - n_val
    if n_val < 1 or n_train < 1 or len(test_y) < 1:
        raise WorkloadError(
            f"mnist-mlp: {len(train_y)} training images cannot be split with "
            f"validation_fraction={validation_fraction} (and {len(test_y)} test images)"
        )
    # uint8 pixels have a known range; anything else is min-max scaled on the training images.
    if train_x.dtype == np.uint8:
        low, high = 0.0, 255.0
    else:
        low, high = float(train_x.min()), float(train_x.max())
    scale = 1.0 / (high - low) if high > low else 1.0

    def flat(x: np.ndarray) -> np.ndarray:
        out = ((x.reshape(len(x), -1).astype(np.float32) - low) * scale).astype(np.float32)
        out.flags.writeable = False
        return out

    def labels(y: np.ndarray) -> np.ndarray:
        out = y.astype(np.int64)
        out.flags.writeable = False
        return out

    n_classes = int(max(train_y.max(), test_y.max())) + 1
    return Splits(
        flat(train_x[:n_train]),
        labels(train_y[:n_train]),
        flat(train_x[n_train:]),
        labels(train_y[n_train:]),
        flat(test_x),
        labels(test_y),
        n_classes=n_classes,
    )


class MnistMLP(TorchMLP):
    """mnist-mlp: a PyTorch MLP on MNIST read from local IDX files (nothing is downloaded).

    Params: `path`, the directory holding the four MNIST files (each possibly `.gz`);
    `validation_fraction` (default 1/6), the tail of the training files held out for validation;
    `limit`, keep only the first N images of the training files (before that split), for quick
    runs. The test split is the t10k files. Other params are hyperparameter defaults.
    """

    workload_name = "mnist-mlp"
    constructor_params = ("path", "validation_fraction", "limit")

    def __init__(
        self,
        seed: int = 0,
        path: str | Path | None = None,
        validation_fraction: float = 1 / 6,
        limit: int | None = None,
        **params: Any,
    ) -> None:
        super().__init__(seed, **params)
        where = f"{self.workload_name}: workload.params"
        if path is None or str(path) == "":
            raise WorkloadError(
                f"{where}.path: missing required key (the directory holding the MNIST IDX files)"
            )
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise WorkloadError(f"{where}.path: {self.path} is not a directory")
        try:
            fraction = float(validation_fraction)
        except (TypeError, ValueError):
            fraction = math.nan
        if not 0.0 < fraction < 1.0:
            raise WorkloadError(
                f"{where}.validation_fraction: must lie strictly between 0 and 1, "
                f"got {validation_fraction!r}"
            )
        self.validation_fraction = fraction
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 2
        ):
            raise WorkloadError(f"{where}.limit: must be an integer >= 2, got {limit!r}")
        self.limit = None if limit is None else int(limit)

    def _splits(self) -> Splits:
        return mnist_splits(self.path, self.validation_fraction, self.limit)

    def _dataset(self) -> tuple[str, float | None]:
        """The four files' size on disk (compressed, if they are); None if one is missing."""
        limit = f", the first {self.limit} training images" if self.limit else ""
        try:
            size = sum(_find(self.path, name).stat().st_size for name in FILES.values())
        except (WorkloadError, OSError):
            return f"MNIST IDX files in {self.path}{limit}", None
        return f"MNIST IDX files in {self.path}{limit}", size / 1e6
