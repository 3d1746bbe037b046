"""Exceptions that carry a message meant for the user, not a traceback."""

from __future__ import annotations


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
