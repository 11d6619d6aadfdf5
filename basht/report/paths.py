"""The paths results and reports are written to: checked before the work that fills them, and
what is wrong with one said in one line, in the same words wherever it is found."""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: A file where a folder must be: making the folder fails with 'File exists' or 'Not a
#: directory', which read as if the folder were there, or name a path below the file.
FILE_IN_THE_WAY = "a file is there, where a folder is needed"
#: A folder where a file is to be written ('Is a directory').
FOLDER_IN_THE_WAY = "a folder is there, where a file is needed"


def path_problem(err: OSError) -> str:
    """What is wrong with a path, in one line: the path at fault, then why."""
    if not (err.filename and err.strerror):
        return str(err)
    folder_made = isinstance(err, FileExistsError | NotADirectoryError)
    if folder_made and (blocker := file_in_the_way(Path(err.filename))) is not None:
        return f"{blocker}: {FILE_IN_THE_WAY}"
    if isinstance(err, IsADirectoryError):
        return f"{err.filename}: {FOLDER_IN_THE_WAY}"
    return f"{err.filename}: {err.strerror}"


def file_in_the_way(folder: Path) -> Path | None:
    """The first of `folder` and the folders above it that is there but is not a folder."""
    for path in (*reversed(folder.parents), folder):
        if path.exists() and not path.is_dir():
            return path
    return None


def check_writable(path: Path) -> Path:
    """`path`, once it is known that a file can be written there: its folder is made (as
    `basht plan --json` makes its own), so a page rendered for seconds is not lost to a path
    that was never going to take it. An OSError names what is in the way."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        blocked, access = path, os.W_OK
    else:  # a new file needs a folder it may add to (and enter)
        blocked, access = path.parent, os.W_OK | os.X_OK
    if not os.access(blocked, access):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(blocked))
    return path
