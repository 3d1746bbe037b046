"""Confine a cluster's TensorFlow servers to loopback with a private network namespace.

TensorFlow's gRPC server listens on "0.0.0.0:<port>" whatever address TF_CONFIG gives
(grpc_server_lib.cc hard-codes the bind address), so addresses alone cannot keep a local cluster
off the machine's other interfaces. Running the whole cluster inside a fresh network namespace,
whose only interface is its own loopback, can: every port is free in it and nothing in it is
reachable from outside. `unshare --net --map-root-user` needs no root where unprivileged user
namespaces are allowed.
"""

from __future__ import annotations

import fcntl
import functools
import shutil
import socket
import struct
import subprocess

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH14s"

UNSHARE_ARGS = ("--net", "--map-root-user", "--kill-child")


@functools.cache
def isolation_problem() -> str | None:
    """None when private network namespaces work here, else why not (one line)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the 'unshare' command (util-linux) is not installed"
    try:
        probe = subprocess.run([unshare, *UNSHARE_ARGS, "true"], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare failed: {exc}"
    if probe.returncode != 0:
        return f"unshare --net failed: {probe.stderr.strip() or probe.returncode}"
    return None


def isolated_command(cmd: list[str]) -> list[str]:
    """`cmd` run inside a new network namespace (call isolation_problem() first)."""
    return [shutil.which("unshare") or "unshare", *UNSHARE_ARGS, *cmd]


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
