"""The `bench` command line. Thin: each command parses options and calls one module.

The commands live in submodules by what they do (running, inspecting, results, clusters, traces,
data); this module assembles them into the typer app, in the order `bench --help` lists them, and
is the one place where a BenchError, from any command, becomes the user's one red line on stderr
and exit code 2 (and a DamagedRun warning, a yellow line). The commands only raise it. Every
other exit code (1 for failures and regressions, 130 when interrupted) is each command's own
`typer.Exit`.

Start-up stays cheap: the submodules import typer and rich only; each command imports what it
needs (and never TensorFlow in this process) when it runs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import typer
from rich.markup import escape

from bench.cli import clusters, data, environments, inspecting, planning, results, running, traces
from bench.cli.common import err_console
from bench.errors import BenchError, DamagedRun, file_error, one_line

app = typer.Typer(
    help="Benchmark and profile TensorFlow distribution strategies from declarative scenarios.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)


def one_line_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command`, with a BenchError printed as `error: <message>` on stderr and exit code 2 (an
    OS error about a file that no reader or writer caught is one too, naming its file), and a
    DamagedRun warning as one `warning: <message>` line."""

    @functools.wraps(command)  # typer reads the options from the wrapped signature
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("default", DamagedRun)
            warnings.showwarning = functools.partial(_show_warning, warnings.showwarning)
            try:
                return command(*args, **kwargs)
            except BenchError as exc:
                _print_error(str(exc))
            except OSError as exc:
                if exc.filename is None:
                    raise
                _print_error(str(file_error(exc.filename, exc)))
        raise typer.Exit(code=2)

    return wrapper


def _print_error(message: str) -> None:
    err_console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)


def _show_warning(others: Callable[..., None], message: Warning | str, category: type[Warning],
                  *args: Any, **kwargs: Any) -> None:
    """A DamagedRun as one yellow line; any other warning as Python shows it."""
    if not issubclass(category, DamagedRun):
        others(message, category, *args, **kwargs)
        return
    err_console.print(f"[yellow]warning:[/] {escape(one_line(message))}", soft_wrap=True,
                      highlight=False)


def _add(group: typer.Typer, command: Callable[..., Any], name: str | None = None) -> None:
    group.command(name)(one_line_errors(command))


_add(app, running.run)
_add(app, inspecting.validate)
_add(app, inspecting.list_, "list")
_add(app, planning.plan)
_add(app, clusters.worker)
_add(app, traces.trace)
_add(app, traces.tensorboard)
_add(app, results.report)
_add(app, running.nightly)
_add(app, results.export)
_add(app, results.compare)
_add(app, results.prune)
_add(app, running.perf)

cluster_app = typer.Typer(help="Run scenarios on real clusters through their own managers.",
                          no_args_is_help=True)
_add(cluster_app, clusters.manifest)
_add(cluster_app, clusters.sbatch)
app.add_typer(cluster_app, name="cluster")

# `bench env` alone prints the fingerprint, as it always did; its subcommands manage the cache of
# [environment] virtualenvs.
env_app = typer.Typer(help="The environment fingerprint, and the cached virtualenvs of scenarios' "
                           "environment tables.")
env_app.callback(invoke_without_command=True)(one_line_errors(environments.env))
_add(env_app, environments.list_, "list")
_add(env_app, environments.prune)
_add(env_app, environments.build)
app.add_typer(env_app, name="env")

data_app = typer.Typer(help="Prepare data sets for scenarios.", no_args_is_help=True)
_add(data_app, data.write_tfrecord, "write-tfrecord")
app.add_typer(data_app, name="data")


def main() -> None:
    app()
