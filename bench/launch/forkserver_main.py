"""A fork server: import TensorFlow once, then fork a fresh process for every variant.

`import tensorflow` costs 3–5 s here, more than a small variant's whole timed window. The server
(`python -m bench.launch.forkserver_main FD`) imports TensorFlow, Keras and bench's worker modules,
checks that nothing process-wide has been set yet (no eager context, so no device layout; the
float32 precision policy), and then only forks. Each child is a new process started from that
pristine state: it configures its own logical devices, precision policy and strategy, exactly as a
freshly spawned interpreter would, and none of it can leak into the next variant, which is forked
from the untouched server, not from the previous child.

The server never runs TensorFlow ops and starts no threads of its own, which is what makes fork
safe here (numpy's BLAS pool registers its own fork handlers). It runs nothing while a variant is
measured: it sleeps in `select` until asked to fork.

Usage: `python -m bench.launch.forkserver_main FD [LABEL]`, started by `ForkServer` in
`bench.launch.forkserver`, the parent's handle on it, which also describes the protocol.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

from bench import entrypoints, leaving
from bench.launch.forkserver import MAX_MESSAGE
from bench.launch.groups import die_with_parent
from bench.placement import LEGACY_KERAS_ENV

# What a child may run: each module has `main(argv) -> int`.
RUNNABLE_MODULES = (entrypoints.WORKER, entrypoints.TRACE_ANALYSIS, entrypoints.PS_SERVER,
                    entrypoints.CLUSTER_SUPERVISOR)
# Imported too when present: what the children would otherwise import first thing.
OPTIONAL_PRELOADS = ("xprof.convert.raw_to_tool_data",)
REAP_INTERVAL_S = 0.02


# ---------------------------------------------------------------------------------------------
# Inside `python -m bench.launch.forkserver_main`


def _preload() -> None:
    """Everything a worker imports, so a forked child starts with it already loaded: TensorFlow
    with Keras 3, or with tf-keras where TF_USE_LEGACY_KERAS is set (a tf-keras server; without
    tf-keras installed its children report the skip, as a fresh interpreter's would)."""
    import tensorflow  # noqa: F401

    from bench.errors import VariantSkipped
    from bench.training import flavour

    if os.environ.get(LEGACY_KERAS_ENV) == "1":
        try:  # also what `pristine_problem` reads the precision policy from
            flavour.use("tf_keras")
        except VariantSkipped:
            pass
    else:
        importlib.import_module("keras")

    for module in RUNNABLE_MODULES:
        importlib.import_module(module)
    for module in OPTIONAL_PRELOADS:
        try:
            importlib.import_module(module)
        except ImportError:  # the child will report it, as it would without a server
            pass


def pristine_problem() -> str | None:
    """Why forking from this process could leak state into a child, or None when it cannot.

    It reads the same `start_state` that every worker records, so the check before forking and
    the record after it cannot disagree on what "pristine" means.
    """
    from bench.worker import start_state

    state = start_state()
    if state.tf_context_initialized:  # device layout, thread pools: fixed at initialisation
        return "the TensorFlow context is already initialised"
    if state.precision_policy != "float32":
        return f"the global precision policy is {state.precision_policy}"
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads are running"
    return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def exit_code(exc: SystemExit) -> int:
    """The exit code an interpreter ends with on `exc`: sys.exit() is 0, sys.exit(N) is N, and
    sys.exit("why") prints why to stderr and is 1 (else a task that gives up that way leaves
    nothing in its log to say why)."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


def _run_child(request: dict[str, Any], fds: list[int], sock: socket.socket) -> int:
    """In the forked child: become the requested process and run its main; its exit code."""
    code = 1
    try:
        sock.close()
        os.setsid()  # its own process group, killed as a whole by the parent
        die_with_parent()  # and gone with the server (a cluster's server, with its supervisor)
        # The handlers a new interpreter starts with (the server ignores SIGINT).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        for target, fd in ((0, devnull), (1, fds[0]), (2, fds[1])):
            os.dup2(fd, target)
        for fd in {devnull, *fds}:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # the requested TMPDIR, not the one the server's imports found
        os.chdir(request["cwd"])
        sys.argv = [request["module"], *request["args"]]
        code = importlib.import_module(request["module"]).main(request["args"])
    except SystemExit as exc:
        code = exit_code(exc)
    except BaseException:  # noqa: BLE001 -- the child must end here whatever happened
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    return code


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})


def serve(sock: socket.socket) -> int:
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _preload()
    if problem := pristine_problem():
        print(f"fork server: refusing to fork: {problem}", file=sys.stderr, flush=True)
        return 1
    _send(sock, {"ready": os.getpid()})
    while True:
        readable, _, _ = select.select([sock], [], [], REAP_INTERVAL_S)
        _reap(sock)
        if not readable:
            continue
        raw, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        if not raw:  # the parent closed its end: we are done
            return 0
        request = json.loads(raw)
        if request.get("module") not in RUNNABLE_MODULES or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": f"cannot run {request.get('module')!r}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            leaving.exit_now(_run_child(request, fds, sock))
        for fd in fds:
            os.close(fd)
        _send(sock, {"spawned": pid})


def fork_here(log_path: Path) -> tuple[int, socket.socket]:
    """A server forked from this process, which holds TensorFlow imported and nothing initialised
    (a cluster's supervisor forked from the run's server): it serves at once, without importing
    TensorFlow again. Its pid and this process's end of its socket, for `ForkServer.adopt`.
    Call it before this process starts any thread."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the server, as `ForkServer.start` makes it but without the exec
        code = 1
        try:
            ours.close()
            os.setsid()
            for target in (1, 2):
                os.dup2(log, target)
            code = serve(theirs)
        except SystemExit as exc:  # a task forked from this server, leaving (leaving.exit_now)
            code = exit_code(exc)
        finally:
            os._exit(code)
    os.close(log)
    theirs.close()
    return pid, ours


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(args[0]))  # args[1], if any, is only a label for `ps`
    try:
        code = serve(sock)
    finally:
        sock.close()
    # Nothing here needs finalizing (the server never ran an op), and an interpreter holding
    # TensorFlow takes about a second to shut down, which the parent would wait for at the
    # end of every run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
