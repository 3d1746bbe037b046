"""The parent's handle on a fork server (`bench.launch.forkserver_main`), which imports
TensorFlow once and then forks a fresh process for every variant.

`import tensorflow` costs 3–5 s here, more than a small variant's whole timed window; forking
from a pristine server saves it for every variant without letting one variant's state reach
another (see `forkserver_main` for why that holds). This side never imports TensorFlow.

Protocol over an AF_UNIX SOCK_SEQPACKET pair (one JSON message per packet):
  parent → server  {"module", "args", "env", "cwd"} with the child's stdout and stderr as
                   SCM_RIGHTS file descriptors
  server → parent  {"ready": pid} once, then {"spawned": pid} per request and
                   {"exited": pid, "returncode": rc} when a child ends (rc < 0: killed by signal)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import entrypoints

MAX_MESSAGE = 1 << 20


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

    def __init__(self, env: dict[str, str], log_path: Path, label: str = "",
                 python: str | None = None) -> None:
        # `label` goes on the server's command line, which its forked children share: it is how
        # `ps`/`pgrep` tell this run's processes from others'.
        self._label = label
        # the interpreter it runs (an [environment]'s): only commands of that one fork from it
        self.python = python or sys.executable
        self._env = env
        self._log_path = log_path
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None  # a server made by `fork_here`, this process's child
        self._ready = threading.Event()
        self._dead = threading.Event()
        self._lock = threading.Lock()  # one spawn request in flight at a time
        self._exits_lock = threading.Lock()  # an exit may be reported before spawn returns
        self._reply: list[dict[str, Any]] = []
        self._replied = threading.Event()
        self._children: dict[int, ForkedChild] = {}
        self._early_exits: dict[int, int] = {}
        self.ready_s: float | None = None  # start → ready, for the run's timing breakdown
        self.start_method: str | None = None  # `spawn` (`start`) or `fork` (`adopt`)

    def start(self) -> ForkServer:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                entrypoints.command(entrypoints.FORK_SERVER, str(theirs.fileno()), self._label,
                                    python=self.python),
                pass_fds=[theirs.fileno()], env=self._env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)
        theirs.close()
        self.start_method = "spawn"
        return self._connect(ours)

    def adopt(self, pid: int, sock: socket.socket) -> ForkServer:
        """Take on a server this process forked from itself (`forkserver_main.fork_here`), its
        pid and this end of its socket, instead of starting one."""
        self._pid = pid
        self.start_method = "fork"
        return self._connect(sock)

    def _connect(self, sock: socket.socket) -> ForkServer:
        self._sock = sock
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
        if self._pid is not None:
            _reap(self._pid, timeout_s=2.0)
            self._pid = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()



def _reap(pid: int, timeout_s: float) -> None:
    """Wait for a child to exit; SIGKILL it after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class ForkServers:
    """A run's fork servers, one per interpreter (each [environment]'s, and this one's) and Keras
    flavour (TensorFlow imported with Keras 3, or with tf-keras): a variant is only ever forked
    from the server of its own environment and flavour."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, str], ForkServer] = {}

    def add(self, server: ForkServer, flavour: str = "keras3") -> ForkServer:
        self._servers[(server.python, flavour)] = server
        return server

    def get(self, python: str, flavour: str = "keras3") -> ForkServer | None:
        return self._servers.get((python, flavour))

    @property
    def ready_s(self) -> float | None:
        """The slowest server's start → ready (each imports its own TensorFlow)."""
        times = [s.ready_s for s in self._servers.values() if s.ready_s is not None]
        return max(times) if times else None

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
