"""The session's shared `bench run`s, started one after another in a background thread as the
session starts, and taken by the fixtures that need them.

A `bench run` is mostly one process's work at a time (interpreter and cluster start-up, graph
building, the gate's hand-overs), and so are the tests before a run's first reader, which leave
the second core idle much of their time: run beside them, the shared runs cost the session little
of its wall time. A run not yet started when its reader comes is run by that reader instead.
`start` and `take` are called from pytest's own thread only.

A fixture declares the runs it takes (`declare`, or `early_fixture` for a fixture that is one
run): named, each with its `start`, which takes the `EarlyContext`. conftest starts those of every
fixture a selected test uses, in the order of first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.background import BackgroundBench


@dataclass(frozen=True)
class EarlyContext:
    """What a run started early may use: the session's temporary folders and its TensorFlow 2.20
    environment build (None when no selected test builds one), which a run in that environment
    waits for rather than building its own beside it."""

    tmp_path_factory: pytest.TempPathFactory
    tf220_build: tuple[Path, BackgroundBench] | None = None

    def wait_for_tf220(self, timeout: float = 1200) -> None:
        if self.tf220_build is not None:
            self.tf220_build[1].result(timeout=timeout)


Start = Callable[[EarlyContext], Any]


class EarlyRuns:
    """Named runs queued on one background thread, in the order started."""

    def __init__(self, context: EarlyContext) -> None:
        self.context = context
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-run")
        self._queued: dict[str, tuple[Future[Any], Start]] = {}
        self._taken: dict[str, Future[Any]] = {}

    def start(self, runs: Iterable[tuple[str, Start]]) -> None:
        for name, start in runs:
            if name not in self._queued and name not in self._taken:
                self._queued[name] = (self._pool.submit(start, self.context), start)

    def take(self, name: str, start: Start, pool: Executor | None = None) -> Future[Any]:
        """The run `name`: the early one once it has started, else `start` submitted to `pool`
        (or run in this thread without one); the same run to every fixture that takes it."""
        if name in self._taken:
            return self._taken[name]
        queued = self._queued.pop(name, None)
        if queued is not None and not queued[0].cancel():
            future = queued[0]
        elif pool is not None:
            future = pool.submit(start, self.context)
        else:
            future = Future()
            try:
                future.set_result(start(self.context))
            except Exception as exc:  # every taker sees it
                future.set_exception(exc)
        self._taken[name] = future
        return future

    def result(self, name: str, start: Start) -> Any:
        """The run `name`, waited for (started here if it had not started)."""
        return self.take(name, start).result()

    def close(self) -> None:
        """Drop what never started and wait for the run under way (the session ends)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


_DECLARED: dict[int, list[tuple[str, Start]]] = {}


def declare(fixture: Any, runs: list[tuple[str, Start]]) -> Any:
    """`fixture`, marked as taking `runs` (conftest starts them with the session)."""
    _DECLARED[id(fixture)] = runs
    return fixture


def declared(fixture: Any) -> list[tuple[str, Start]]:
    return _DECLARED.get(id(fixture), [])


def early_fixture(run: str, start: Start, part: int | None = None,
                  scope: Literal["module", "session"] = "module") -> Any:
    """A fixture whose value is the early run `run` (item `part` of what `start` gives)."""
    def value(early_runs: EarlyRuns) -> Any:
        got = early_runs.result(run, start)
        return got if part is None else got[part]

    return declare(pytest.fixture(scope=scope)(value), [(run, start)])
