"""`bench trace` and `bench tensorboard`: a run in the tools people already open (Chrome traces,
xprof's UI, TensorBoard), served on 127.0.0.1 only."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from bench.cli.common import console, err_console
from bench.cli.serving import serve_until_interrupted
from bench.errors import BenchError


def trace(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (results/<scenario>-<time>).",
                                            show_default=False)],
    variant: Annotated[Optional[str], typer.Argument(help="Only this variant id (default: all).",
                                                     show_default=False)] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."
                                      )] = 0,
    export_only: Annotated[bool, typer.Option("--export-only", help="Write the Chrome traces, "
                                              "do not serve.")] = False,
) -> None:
    """Export a run's profiler traces as Chrome traces, then serve xprof's UI on 127.0.0.1.

    Each <host>.xplane.pb gets a <host>.trace.json.gz beside it (open in ui.perfetto.dev or
    chrome://tracing). The server runs until Ctrl-C / SIGTERM. Exit code: 0, 1 when a trace
    failed to convert (--export-only), 2 on bad input, 130 when interrupted before serving.
    """
    import logging

    from bench.trace.serve import (
        TraceServer,
        ensure_port_free,
        export_chrome_traces,
        serve,
        trace_logdirs,
    )

    def out(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)
        sys.stdout.flush()

    failed: list[str] = []

    def on_error(xplane: Path, message: str) -> None:
        failed.append(str(xplane))
        err_console.print(f"[yellow]warning:[/] {escape(str(xplane))}: not converted: "
                          f"{escape(message)}", soft_wrap=True, highlight=False)

    logdirs: dict[str, Path] = {}

    def start() -> TraceServer:
        logdirs.update(trace_logdirs(run_dir, variant))
        if not export_only:
            ensure_port_free(port)
        for path in export_chrome_traces(run_dir, variant, on_error=on_error):
            out(str(path))
        if export_only:
            raise typer.Exit(code=1 if failed else 0)
        server = serve(run_dir / "traces" / variant if variant else run_dir / "traces", port)
        # xprof sets its logger to INFO on import; keep per-request INFO lines out of the way.
        logging.getLogger("tensorboard.plugins.profile").setLevel(logging.WARNING)
        return server

    def announce(server: TraceServer) -> None:
        what = f"{run_dir.name}/{variant}" if variant else run_dir.name
        out(f"Serving traces of {what} at {server.url} (Ctrl-C to stop)")
        out(f"runs ({len(logdirs)} trace dir(s)):")
        for name in server.runs():
            out(f"  {name}")

    serve_until_interrupted(start, announce, out)


def tensorboard(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories (results/<scenario>-"
                                                        "<time>).", show_default=False)],
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."
                                      )] = 0,
    write_only: Annotated[bool, typer.Option("--write-only", help="(Re)write the event files, "
                                             "do not serve.")] = False,
) -> None:
    """Serve TensorBoard over runs on 127.0.0.1: HParams (axes and figures of every variant),
    step-time scalars and the profiles.

    First (re)writes each run's event files beside its profiles (bench run writes them too), then
    runs TensorBoard in a process group of its own until Ctrl-C / SIGTERM. Exit code: 0, 2 on
    bad input or when TensorBoard does not start, 130 when interrupted before serving.
    """
    from bench.report.tensorboard_events import write_run_events
    from bench.report.tensorboard_server import TensorBoardServer
    from bench.trace.serve import ensure_port_free

    def out(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)
        sys.stdout.flush()

    def start() -> TensorBoardServer:
        if not write_only:
            ensure_port_free(port)
        for run_dir in run_dirs:
            written = write_run_events(run_dir)
            if not written:
                raise BenchError(f"{run_dir}: no finished variant records yet")
            out(f"{run_dir}: event files of {len(written)} variant(s) written")
        if write_only:
            raise typer.Exit(code=0)
        return TensorBoardServer(run_dirs, port)

    def announce(server: TensorBoardServer) -> None:
        out(f"Serving TensorBoard (pid {server.pid}) at {server.url} (Ctrl-C to stop)")
        out(f"HParams table: {server.url}#hparams")

    serve_until_interrupted(start, announce, out)
