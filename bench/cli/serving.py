"""Serving a UI until Ctrl-C: the loop `bench trace` and `bench tensorboard` share.

SIGTERM ends the command as Ctrl-C does; a second signal during shutdown is ignored, so the server
(a thread, or a child's process group) is always stopped and the handlers restored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import typer

from bench.cli.common import err_console
from bench.interrupts import ignore_interrupts, terminate_as_interrupt


class Server(Protocol):
    @property
    def alive(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> None: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Server)


def serve_until_interrupted(start: Callable[[], S], on_started: Callable[[S], None],
                            say: Callable[[str], None]) -> None:
    """`start()` a server (it may raise BenchError or typer.Exit before serving), announce it, and
    wait until Ctrl-C / SIGTERM (exit 0 after "stopping") or until it ends by itself (exit 1).
    Interrupted before the server is up: exit code 130."""
    server: S | None = None
    with terminate_as_interrupt():
        try:
            server = start()
            on_started(server)
            while server.alive:
                server.wait(0.5)
            raise typer.Exit(code=1)  # the server ended by itself
        except KeyboardInterrupt:
            if server is None:
                err_console.print("interrupted", highlight=False)
                raise typer.Exit(code=130) from None
            say("stopping")
        finally:
            ignore_interrupts()  # a second Ctrl-C must not interrupt the shutdown
            if server is not None:
                server.stop()
