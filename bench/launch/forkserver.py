"""A fork server: import TensorFlow once, then fork a fresh process for every variant.

`import tensorflow` costs 3–5 s here, more than a small variant's whole timed window. The server
(`python -m bench.launch.forkserver FD`) imports TensorFlow, Keras and bench's worker modules,
checks that nothing process-wide has been set yet (no eager context, so no device layout; the
float32 precision policy), and then only forks. Each child is a new process started from that
pristine state: it configures its own logical devices, precision policy and strategy, exactly as a
freshly spawned interpreter would, and none of it can leak into the next variant, which is forked
from the untouched server, not from the previous child.

The server never runs TensorFlow ops and starts no threads of its own, which is what makes fork
safe here (numpy's BLAS pool registers its own fork handlers). It runs nothing while a variant is
measured: it sleeps in `select` until asked to fork.

Usage: `python -m bench.launch.forkserver FD [LABEL]`, started by `ForkServer`.

Protocol over an AF_UNIX SOCK_SEQPACKET pair (one JSON message per packet):
  parent → server  {"module", "args", "env", "cwd"} with the child's stdout and stderr as
                   SCM_RIGHTS file descriptors
  server → parent  {"ready": pid} once, then {"spawned": pid} per request and
                   {"exited": pid, "returncode": rc} when a child ends (rc < 0: killed by signal)
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from bench.launch.process import die_with_parent

# What a child may run: each module has `main(argv) -> int`.
RUNNABLE_MODULES = ("bench.worker", "bench.trace.analysis")
# Imported too when present: what the children would otherwise import first thing.
OPTIONAL_PRELOADS = ("xprof.convert.raw_to_tool_data",)
MAX_MESSAGE = 1 << 20
REAP_INTERVAL_S = 0.02


# ---------------------------------------------------------------------------------------------
# Server side (inside `python -m bench.launch.forkserver`)


def _preload() -> None:
    """Everything a worker imports, so a forked child starts with it already loaded."""
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

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
    if state["tf_context_initialized"]:  # device layout, thread pools: fixed at initialisation
        return "the TensorFlow context is already initialised"
    if state["precision_policy"] != "float32":
        return f"the global precision policy is {state['precision_policy']}"
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads are running"
    return None


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _run_child(request: dict[str, Any], fds: list[int], sock: socket.socket) -> None:
    """In the forked child: become the requested process, run its main, never return."""
    code = 1
    try:
        sock.close()
        os.setsid()  # its own process group, killed as a whole by the parent
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
        os.chdir(request["cwd"])
        sys.argv = [request["module"], *request["args"]]
        code = importlib.import_module(request["module"]).main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 -- the child must end here whatever happened
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)  # skip TensorFlow's slow teardown: the record is already written


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
            _run_child(request, fds, sock)
        for fd in fds:
            os.close(fd)
        _send(sock, {"spawned": pid})


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


# ---------------------------------------------------------------------------------------------
# Parent side


class ForkServerError(RuntimeError):
    """The server is not there to fork: the caller falls back to spawning a fresh interpreter."""


class ForkedChild:
    """A child forked by the server, with the parts of `subprocess.Popen` the launcher uses."""

    def __init__(self, pid: int, stdout: Any) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _set_exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the child's whole group (it called setsid, so its group id is its pid)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class ForkServer:
    """The parent's handle on one fork server; `spawn` forks a child from it.

    Start it early (`start`): it imports TensorFlow in the background while the parent prepares
    the run, and nothing is measured until the first variant asks for a child.
    """

    def __init__(self, env: dict[str, str], log_path: Path, label: str = "") -> None:
        # `label` goes on the server's command line, which its forked children share: it is how
        # `ps`/`pgrep` tell this run's processes from others'.
        self._label = label
        self._env = env
        self._log_path = log_path
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._dead = threading.Event()
        self._lock = threading.Lock()  # one spawn request in flight at a time
        self._exits_lock = threading.Lock()  # an exit may be reported before spawn returns
        self._reply: list[dict[str, Any]] = []
        self._replied = threading.Event()
        self._children: dict[int, ForkedChild] = {}
        self._early_exits: dict[int, int] = {}
        self.ready_s: float | None = None  # start → ready, for the run's timing breakdown

    def start(self) -> ForkServer:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "bench.launch.forkserver", str(theirs.fileno()),
                 self._label],
                pass_fds=[theirs.fileno()], env=self._env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)
        theirs.close()
        self._sock = ours
        self._started = time.monotonic()
        threading.Thread(target=self._listen, name="forkserver-listener", daemon=True).start()
        return self

    def _listen(self) -> None:
        assert self._sock is not None
        try:
            while raw := self._sock.recv(MAX_MESSAGE):
                self._dispatch(json.loads(raw))
        except OSError:
            pass
        finally:
            self._dead.set()
            self._replied.set()
            with self._exits_lock:
                orphans, self._children = list(self._children.values()), {}
            for child in orphans:  # no one is left to report their exit: end them ourselves
                child.kill()
                child._set_exit(-signal.SIGKILL)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "ready" in message:
            self.ready_s = time.monotonic() - self._started
            self._ready.set()
        elif "exited" in message:
            with self._exits_lock:
                child = self._children.pop(message["exited"], None)
                if child is None:  # exited before `spawn` registered it
                    self._early_exits[message["exited"]] = message["returncode"]
            if child is not None:
                child._set_exit(message["returncode"])
        else:
            self._reply.append(message)
            self._replied.set()

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self._ready.is_set() and not self._dead.is_set():
            if time.monotonic() > deadline:
                return False
            self._ready.wait(0.05)
        return self._ready.is_set() and not self._dead.is_set()

    def spawn(self, module: str, args: list[str], env: dict[str, str], stdout_fd: int,
              stderr_fd: int, stdout_reader: Any) -> ForkedChild:
        if self._sock is None or not self.wait_ready():
            raise ForkServerError(f"the fork server is not running (see {self._log_path})")
        request = {"module": module, "args": args, "env": env, "cwd": os.getcwd()}
        with self._lock:
            self._reply.clear()
            self._replied.clear()
            try:
                socket.send_fds(self._sock, [json.dumps(request).encode()], [stdout_fd, stderr_fd])
            except OSError as exc:
                raise ForkServerError(f"the fork server went away ({exc})") from None
            if not self._replied.wait(30.0) or not self._reply:
                raise ForkServerError("the fork server did not answer")
            reply = self._reply.pop()
            if "spawned" not in reply:
                raise ForkServerError(reply.get("error", f"unexpected reply {reply}"))
            child = ForkedChild(reply["spawned"], stdout_reader)
            with self._exits_lock:
                early = self._early_exits.pop(child.pid, None)
                if early is None:
                    self._children[child.pid] = child
            if early is not None:
                child._set_exit(early)
        return child

    def close(self) -> None:
        """Stop the server; its children are the launcher's to kill (each has its own group)."""
        if self._sock is not None:
            # shutdown, not only close: the listener thread blocked in recv keeps the socket
            # open past close(), so the server would never see the end of the stream.
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the server already went away
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(main())
