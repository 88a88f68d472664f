"""Files the server reads and writes: the ones a user names are opened only when regular
(`open_regular`), and durable writes (`write_synced`, `sync_directory`) for the disk cache
and the voices page's store.

Opening the files a user names (the voices file, recordings, voice states): regular files only.

A FIFO named as a recording blocks `open()` until some process writes to it, that is for
good, and with it the thread that opened it (the rescan thread, a worker of a shared
pool); a device such as /dev/zero never ends. So a file is stat'ed first (a symlink to a
regular file is fine: `os.stat` follows it) and only a regular file is opened, with
O_NONBLOCK: a FIFO put in its place between the stat and the open then opens at once
instead of blocking, and the `fstat` of what was opened refuses it. O_NONBLOCK changes
nothing for a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from .logsafe import escape

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a socket or a folder: it is not read."""


class FileTooLargeError(OSError):
    """The file is larger than the reader accepts."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _check_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(f"{escape(path)} is {_kind(mode)}, not a regular file; it is not read")


def open_regular(path: Path, max_bytes: int | None = None) -> BinaryIO:
    """`path` opened for reading in binary (close it: `with open_regular(p) as f:`).

    Raises OSError: FileNotFoundError and the like from the system, NotRegularFileError
    for anything but a regular file (checked before opening and again on what was
    opened), FileTooLargeError when it holds more than `max_bytes`.
    """
    _check_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        _check_regular(path, status.st_mode)
        if max_bytes is not None and status.st_size > max_bytes:
            raise FileTooLargeError(f"{escape(path)} holds {status.st_size} bytes; at most {max_bytes} are read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (see `open_regular`); one that
    grows past the bound while being read is refused too."""
    with open_regular(path, max_bytes) as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLargeError(f"{escape(path)} holds more than {max_bytes} bytes; at most {max_bytes} are read")
    return data


def check_regular(path: Path) -> None:
    """Raise OSError unless `path` is a regular file (or a symlink to one); opens nothing."""
    _check_regular(path, os.stat(path).st_mode)


def unreadable(what: str, path: Path, err: OSError) -> str:
    """The message for a file that cannot be read, naming it escaped (one log line):
    "recording /x/a.wav not found", "recording /x/a.wav is a FIFO (named pipe), not a
    regular file; it is not read", "... cannot be read: Permission denied"."""
    if isinstance(err, FileNotFoundError):
        return f"{what} {escape(path)} not found"
    if isinstance(err, (NotRegularFileError, FileTooLargeError)):
        return f"{what} {err}"  # its message names the file already
    return f"{what} {escape(path)} cannot be read: {escape(err.strerror or err)}"


def write_synced(path: Path, content: bytes, mode: str = "wb") -> None:
    """Write `content` to `path` and fsync it (`mode` "xb": only if it does not exist)."""
    with open(path, mode) as file:
        file.write(content)
        file.flush()
        os.fsync(file.fileno())


def sync_directory(directory: Path) -> None:
    """Make the renames in `directory` durable (POSIX); not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
