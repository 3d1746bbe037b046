"""Confine a cluster's TensorFlow servers to loopback with a private network namespace.

TensorFlow's gRPC server listens on "0.0.0.0:<port>" whatever address TF_CONFIG gives
(grpc_server_lib.cc hard-codes the bind address), so addresses alone cannot keep a local cluster
off the machine's other interfaces. Running the whole cluster inside a fresh network namespace,
whose only interface is its own loopback, can: every port is free in it and nothing in it is
reachable from outside.

A process enters one itself (`enter_private_namespace`, what `unshare --net --map-root-user`
does before it runs a command): in a new user namespace where this user is root, so no privilege
is needed where unprivileged user namespaces are allowed. A cluster's supervisor does so first
thing, which lets it be forked from the run's fork server like any worker.

Usage: `python -m bench.launch.netns COMMAND [ARG...]` (or this file as a script) runs a command
in a namespace of its own.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH14s"
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


@functools.cache
def isolation_problem() -> str | None:
    """None when private network namespaces work here, else why not (one line)."""
    try:
        probe = subprocess.run(isolated_command([sys.executable, "-c", "pass"]),
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"entering a private network namespace failed: {exc}"
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return f"entering a private network namespace failed: {lines[-1] if lines else probe.returncode}"
    return None


def isolated_command(cmd: list[str]) -> list[str]:
    """`cmd` run inside a new network namespace (call isolation_problem() first). This file runs
    as a script (`-P`: its folder stays off the import path) and imports the standard library
    only, where `-m bench.launch.netns` would import the package's scenario schema first."""
    return [sys.executable, "-P", __file__, *cmd]


def enter_private_namespace() -> None:
    """Move this process into a new user and network namespace, mapped to root in it, with its
    loopback up. The kernel allows a new user namespace only to a single-threaded process: call
    it before any thread starts."""
    uid, gid = os.getuid(), os.getgid()
    if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_NEWUSER | CLONE_NEWNET): {os.strerror(errno)}")
    Path("/proc/self/setgroups").write_text("deny")  # required before an unprivileged gid_map
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    bring_loopback_up()


def bring_loopback_up() -> None:
    """A new network namespace starts with `lo` down; raise it (no iproute2 needed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0, bytes(14))
        flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        if not flags & _IFF_UP:
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP, bytes(14)))


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free now; callers must still handle losing the race."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m bench.launch.netns COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        enter_private_namespace()
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    os.execvp(args[0], args)


if __name__ == "__main__":
    sys.exit(main())
