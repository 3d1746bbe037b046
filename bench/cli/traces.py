"""`bench trace`: a run's profiler traces as Chrome traces, and xprof's UI over them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from bench.cli.common import console, err_console


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
    import signal

    from bench.trace.serve import export_chrome_traces, serve, trace_logdirs

    def out(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)
        sys.stdout.flush()

    failed: list[str] = []

    def on_error(xplane: Path, message: str) -> None:
        failed.append(str(xplane))
        err_console.print(f"[yellow]warning:[/] {escape(str(xplane))}: not converted: "
                          f"{escape(message)}", soft_wrap=True, highlight=False)

    # SIGTERM ends the command like Ctrl-C does: through KeyboardInterrupt and the finally below.
    previous = {sig: signal.signal(sig, signal.default_int_handler)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    server = None
    try:
        # A BenchError from here on passes through the finally below (restoring the handlers)
        # on its way to the CLI's one error line.
        logdirs = trace_logdirs(run_dir, variant)
        for path in export_chrome_traces(run_dir, variant, on_error=on_error):
            out(str(path))
        if export_only:
            raise typer.Exit(code=1 if failed else 0)
        logdir = run_dir / "traces" / variant if variant else run_dir / "traces"
        server = serve(logdir, port)
        # xprof sets its logger to INFO on import; keep per-request INFO lines out of the way.
        logging.getLogger("tensorboard.plugins.profile").setLevel(logging.WARNING)
        what = f"{run_dir.name}/{variant}" if variant else run_dir.name
        out(f"Serving traces of {what} at {server.url} (Ctrl-C to stop)")
        out(f"runs ({len(logdirs)} trace dir(s)):")
        for name in server.runs():
            out(f"  {name}")
        while server.alive:
            server.wait(0.5)
        raise typer.Exit(code=1)  # the server thread ended by itself
    except KeyboardInterrupt:
        if server is None:
            err_console.print("interrupted", highlight=False)
            raise typer.Exit(code=130) from None
        out("stopping")
    finally:
        if server is not None:
            for sig in previous:  # a second Ctrl-C must not interrupt the shutdown
                signal.signal(sig, signal.SIG_IGN)
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
