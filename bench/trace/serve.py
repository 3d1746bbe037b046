"""Look at a run's profiler traces: Chrome-trace files, and xprof's web UI served on loopback only.

A run directory keeps its traces in the TensorBoard/xprof layout::

    RUN_DIR/traces/<variant>/plugins/profile/<session>/<host>.xplane.pb          (one process)
    RUN_DIR/traces/<variant>/<task>/plugins/profile/<session>/<host>.xplane.pb   (one per task)

`export_chrome_traces` converts each xplane.pb with xprof's converter into
`<host>.trace.json.gz` beside it (Chrome Trace Event format; opens in Perfetto or
chrome://tracing). `serve` runs xprof's own WSGI app with cheroot on 127.0.0.1. It does NOT
use xprof's `start_server`, which binds a wildcard address and also starts a gRPC worker
service on 0.0.0.0: that service only exists to farm conversions out to remote workers, and
conversions run in-process without it.

Both load xprof's native library lazily (it is only needed here). Its C++ INFO logging goes
to stderr unless TF_CPP_MIN_LOG_LEVEL says otherwise, so importing it through this module
sets TF_CPP_MIN_LOG_LEVEL=1 when the variable is unset.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import results
from bench.errors import BenchError
from bench.trace.xprof_tools import XPLANE_SUFFIX, xplane_files

TRACES_DIR = "traces"
CHROME_SUFFIX = ".trace.json.gz"
HOST = "127.0.0.1"
# Host names a browser may send for this server; anything else (DNS rebinding) is refused.
_LOCAL_HOST_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
# xprof's "capture profile" route makes this process connect to an address given in the request.
_BLOCKED_PATHS = frozenset({"/data/plugin/profile/capture_profile"})


def _variant_ids(run_dir: Path) -> list[str]:
    if not run_dir.is_dir():
        raise BenchError(f"{run_dir}: no such run directory")
    if not (run_dir / results.VARIANTS_FILE).is_file():
        raise BenchError(f"{run_dir}: not a run directory (no variants.json)")
    variants = results.read_variants(run_dir)
    if missing := [i for i, v in enumerate(variants) if "id" not in v]:
        raise BenchError(f"{run_dir / results.VARIANTS_FILE}: entry {missing[0]}: id: missing")
    return [str(v["id"]) for v in variants]


def _variant_logdirs(traces: Path, variant: str) -> dict[str, Path]:
    vdir = traces / variant
    found: dict[str, Path] = {}
    if xplane_files(vdir):
        found[variant] = vdir
    if vdir.is_dir():
        for task in sorted(p for p in vdir.iterdir() if p.is_dir() and p.name != "plugins"):
            if xplane_files(task):
                found[f"{variant}/{task.name}"] = task
    return found


def trace_logdirs(run_dir: str | os.PathLike[str], variant: str | None = None) -> dict[str, Path]:
    """The logdirs holding xplane traces, by name: `<variant>` or `<variant>/<task>`.

    Raises BenchError (one line, naming what is missing and what exists) when the run directory
    or the variant does not exist, or there are no traces for it.
    """
    run_dir = Path(run_dir)
    ids = _variant_ids(run_dir)
    if variant is not None and variant not in ids:
        raise BenchError(f"{run_dir}: no variant {variant!r} (variants: {', '.join(ids) or 'none'})")
    traces = run_dir / TRACES_DIR
    found: dict[str, Path] = {}
    for vid in [variant] if variant is not None else ids:
        found.update(_variant_logdirs(traces, vid))
    if not found:
        traced = [vid for vid in ids if _variant_logdirs(traces, vid)]
        what = f"variant {variant!r}" if variant is not None else "any variant"
        raise BenchError(f"{run_dir}: no traces for {what} under {TRACES_DIR}/ (variants with "
                         f"traces: {', '.join(traced) or 'none'})")
    return found


def _xprof_convert() -> ModuleType:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError as exc:
        raise BenchError(f"xprof is not installed or does not load ({exc}); pip install xprof"
                         ) from None
    return raw_to_tool_data


@contextlib.contextmanager
def _native_stderr(sink: list[str]) -> Iterator[None]:
    """Capture file descriptor 2 (where xprof's C++ logs go) into `sink` for the block.

    The legacy `trace_viewer` conversion logs an E/W pair ("No UnifiedProfileProcessor
    registered ... falling back to legacy") on every call; it is noise unless the call fails.
    """
    import sys

    with tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf-8", "replace"))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def chrome_trace(xplane: str | os.PathLike[str]) -> dict[str, Any]:
    """Convert one xplane.pb into a Chrome Trace Event document (a dict with `traceEvents`).

    Uses xprof's `trace_viewer` tool: the complete trace with every event's args, and it
    writes no cache files next to the xplane. (`trace_viewer@`, the streaming viewer's tool,
    also returns Chrome JSON but strips args down to an id the UI resolves lazily, and
    leaves *.SSTABLE caches behind.) Raises ValueError when xprof returns no trace.
    """
    rtd = _xprof_convert()
    log: list[str] = []
    with _native_stderr(log):
        data, _ = rtd.xspace_to_tool_data([str(xplane)], "trace_viewer", {"use_saved_result": False})
    if not data:
        raise ValueError(f"xprof returned no trace_viewer data ({_last_line(''.join(log)) or 'no log'})")
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("xprof's trace_viewer output has no traceEvents")
    # The legacy JSON stream ends with a placeholder `{}` event (to avoid a trailing comma).
    doc["traceEvents"] = [event for event in doc["traceEvents"] if event]
    return doc


def chrome_trace_path(xplane: Path) -> Path:
    return xplane.with_name(xplane.name[: -len(XPLANE_SUFFIX)] + CHROME_SUFFIX)


def _write_gzip_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            json.dump(doc, f, separators=(",", ":"))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def export_chrome_traces(run_dir: str | os.PathLike[str], variant: str | None = None, *,
                         on_error: Callable[[Path, str], None] | None = None) -> list[Path]:
    """Write `<host>.trace.json.gz` beside every `<host>.xplane.pb` of the run (or one variant).

    Returns the paths of the Chrome trace files (a file newer than its xplane.pb is kept, not
    rewritten). A file that fails to convert is reported through `on_error(xplane, message)`
    and skipped; BenchError only for a bad run directory / variant (see `trace_logdirs`).
    """
    logdirs = trace_logdirs(run_dir, variant)
    written: list[Path] = []
    for logdir in logdirs.values():
        for xplane in xplane_files(logdir):
            out = chrome_trace_path(xplane)
            try:
                if not (out.is_file() and out.stat().st_mtime >= xplane.stat().st_mtime):
                    _write_gzip_json(out, chrome_trace(xplane))
            except (OSError, ValueError, RuntimeError) as exc:
                if on_error is not None:
                    on_error(xplane, f"{type(exc).__name__}: {exc}")
                continue
            written.append(out)
    return written


def profile_runs(logdir: str | os.PathLike[str]) -> list[str]:
    """The run names xprof lists for `logdir` (`[<subdir>/]<session>`), as its UI sorts them."""
    root = Path(logdir)
    runs = []
    for session in root.glob("**/plugins/profile/*"):
        if session.is_dir():
            parent = session.parent.parent.parent.relative_to(root).as_posix()
            runs.append(session.name if parent == "." else f"{parent}/{session.name}")
    return sorted(runs, reverse=True)


def _guard(app: Callable[..., Any]) -> Callable[..., Any]:
    """Refuse requests for a foreign Host header and for xprof's remote-capture route."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        host = environ.get("HTTP_HOST", HOST)
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name.lower() not in _LOCAL_HOST_NAMES:
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"Forbidden: this server only answers to 127.0.0.1 / localhost\n"]
        if environ.get("PATH_INFO", "").rstrip("/") in _BLOCKED_PATHS:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"Profile capture is disabled here\n"]
        return app(environ, start_response)

    return guarded


class _NoMissingCacheTracebacks(logging.Filter):
    """Drop xprof's ERROR + traceback for a cache file that does not exist yet (first visit)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.funcName == "read_json" and isinstance(exc, FileNotFoundError))


def _quiet_xprof_logger() -> None:
    logger = logging.getLogger("tensorboard.plugins.profile")
    if not any(isinstance(f, _NoMissingCacheTracebacks) for f in logger.filters):
        logger.addFilter(_NoMissingCacheTracebacks())


def make_app(logdir: str | os.PathLike[str]) -> Callable[..., Any]:
    """xprof's WSGI app for `logdir` (a directory whose subdirectories are the runs).

    Mirrors xprof.server._launch_server minus its gRPC worker service (initialize_stubs /
    start_grpc_server) and minus the capture button. Imports TensorFlow (xprof's plugin does).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        from xprof import server as xprof_server
    except ImportError as exc:
        raise BenchError(f"xprof is not installed or does not load ({exc}); pip install xprof"
                         ) from None
    _quiet_xprof_logger()
    logdir = str(Path(logdir).resolve())
    context = xprof_server.TBContext(logdir, xprof_server.DataProvider(logdir),
                                     xprof_server.TBContext.Flags(False))
    context.hide_capture_profile_button = True
    plugin = xprof_server.ProfilePluginLoader().load(context)
    if plugin is None:
        raise BenchError("xprof's profile plugin failed to load (see the log above)")
    return _guard(xprof_server.make_wsgi_app(plugin))


def ensure_port_free(port: int) -> None:
    """A BenchError (one line) when `port` on 127.0.0.1 is taken: checked before any work, so a
    command does not convert traces or write events for a server that cannot listen. Port 0 (a
    free one, chosen when the server binds) is always free."""
    if port == 0:
        return
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        probe.bind((HOST, port))
    except OSError as exc:
        raise BenchError(f"{HOST}:{port}: cannot listen ({exc})") from None
    finally:
        probe.close()


class TraceServer:
    """xprof's UI for one logdir on http://127.0.0.1:<port>/, served from a background thread.

    Use as a context manager, or call `stop()` (idempotent). Data endpoints, e.g.:
    `<url>data/plugin/profile/runs`, `<url>data/plugin/profile/hosts?run=R&tag=overview_page`,
    `<url>data/plugin/profile/data?run=R&tag=overview_page&host=H` (responses are gzip-encoded).
    """

    def __init__(self, logdir: str | os.PathLike[str], port: int = 0,
                 shutdown_timeout: float = 3.0) -> None:
        from cheroot import wsgi

        self.logdir = Path(logdir)
        if not self.logdir.is_dir():
            raise BenchError(f"{self.logdir}: no such trace directory")
        app = make_app(self.logdir)
        self._server = wsgi.Server((HOST, port), app, shutdown_timeout=shutdown_timeout)
        try:
            self._server.prepare()
        except OSError as exc:
            raise BenchError(f"{HOST}:{port}: cannot listen ({exc})") from None
        bound = self._server.socket.getsockname() if self._server.socket else ("?", 0)
        if bound[0] != HOST:  # e.g. cheroot took a systemd-activated socket (LISTEN_PID)
            self._server.stop()
            raise BenchError(f"trace server bound {bound[0]}:{bound[1]}, not {HOST}; refusing")
        self.port: int = bound[1]
        self.url = f"http://{HOST}:{self.port}/"
        self._stopped = False
        self._thread = threading.Thread(target=self._server.serve, name="bench-trace-server",
                                        daemon=True)
        self._thread.start()

    def runs(self) -> list[str]:
        return profile_runs(self.logdir)

    @property
    def alive(self) -> bool:
        return not self._stopped and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the server thread ends (or `timeout`); interruptible by signals."""
        self._thread.join(timeout)

    def stop(self) -> None:
        """Close the listening socket, finish in-flight requests, join the worker threads."""
        if self._stopped:
            return
        self._stopped = True
        self._server.stop()
        self._thread.join(timeout=10)

    def __enter__(self) -> TraceServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(logdir: str | os.PathLike[str], port: int = 0) -> TraceServer:
    """Start xprof's UI for `logdir` on 127.0.0.1 (`port` 0: a free port); see TraceServer."""
    return TraceServer(logdir, port)
