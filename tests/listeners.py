"""Which TCP addresses a process listens on, read from /proc: how tests check that a server of
ours binds 127.0.0.1 only."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def listeners(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state owned by `pid`, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            hex_addr, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc prints the address as host-order 32-bit words.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return found
