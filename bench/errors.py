"""Exceptions that carry a message meant for the user, not a traceback, and the one line a file
that cannot be read or written becomes (`file_errors`)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager


class BenchError(Exception):
    """An error the CLI prints as one line and turns into a non-zero exit."""


class ScenarioError(BenchError):
    """A scenario file is unreadable or invalid; the message names the file and the field."""

    def __init__(self, path: str, field: str | None, message: str) -> None:
        self.path = path
        self.field = field
        where = f"{path}: {field}" if field else path
        super().__init__(f"{where}: {message}")


class VariantSkipped(BenchError):
    """A variant cannot run on this machine (missing device, unsupported op); recorded, not fatal."""


class DataUnavailable(BenchError):
    """No source for a requested dataset could be found and the scenario allows no fallback."""


class WorkloadError(BenchError):
    """A user's model, loss, optimizer, metric or dataset function cannot run as given (it does
    not import, returns the wrong thing, or its outputs do not fit the labels): the variant
    fails with this one line, which names the function, and the run goes on."""


def one_line(what: object) -> str:
    """Text (or an exception's message) squeezed onto one line, for messages that must stay one
    line; an exception with no message is named by its type."""
    text = " ".join(str(what).split())
    return text or (type(what).__name__ if isinstance(what, BaseException) else "")


class DamagedRun(UserWarning):
    """A part of a run directory that could not be read (a record line cut short, a record that
    is no record, a run of a store whose files are unreadable): it is named and left out, and
    the rest of the run, or of the store, is read. The CLI prints it as one `warning:` line."""


# What an OS error means for a path, in the user's words (else the system's own).
_OS_MEANINGS = {
    errno.ENOTDIR: "a part of its path is a file, not a folder",
    errno.EISDIR: "is a folder, not a file",
    errno.EEXIST: "exists and is not a folder",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENAMETOOLONG: "a name in it is too long for the file system",
    errno.EROFS: "the file system is read-only",
    errno.ELOOP: "too many levels of symbolic links",
    errno.ENOENT: "no such file or folder",
}
_SHOWN_PATH = 160  # characters of a path a message shows (a 20 MB name stays one short line)


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as a message names it: on one line, and cut short (with its length) if long."""
    text = one_line(os.fspath(path))
    if len(text) <= _SHOWN_PATH:
        return text
    return f"{text[:_SHOWN_PATH // 2]}...({len(text):,} characters)"


def file_error(path: str | os.PathLike[str], exc: BaseException, doing: str = "read"
               ) -> BenchError:
    """`exc`, met while `doing` (read, write...) `path`, as the one line a user is shown: the
    path they gave, then what is wrong with it. For OS errors (the errno's meaning), text that
    is not UTF-8, JSON that does not parse, and JSON nested deeper than Python recurses."""
    if isinstance(exc, UnicodeDecodeError):
        what = (f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start:,})"
                if exc.start < len(exc.object) else "not UTF-8 text")
    elif isinstance(exc, json.JSONDecodeError):
        what = f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    elif isinstance(exc, RecursionError):
        what = "nested too deeply to read"
    elif isinstance(exc, OSError):
        meaning = _OS_MEANINGS.get(exc.errno or 0) or one_line(exc.strerror or exc)
        what = f"cannot {doing}: {meaning}"
    else:
        what = one_line(exc)
    return BenchError(f"{shown_path(path)}: {what}")


FILE_ERRORS = (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError)


@contextmanager
def file_errors(path: str | os.PathLike[str], doing: str = "read") -> Iterator[None]:
    """Inside, an OS, decoding or JSON error about `path` (FILE_ERRORS) becomes its one-line
    BenchError (`file_error`)."""
    try:
        yield
    except FILE_ERRORS as exc:
        raise file_error(path, exc, doing) from None
