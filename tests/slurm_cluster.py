"""A real, single-node Slurm (munged + slurmctld + slurmd) for tests, confined to a private network
namespace.

Everything started here runs inside one new network namespace whose only interface is its own
loopback: a holder process (`unshare --net --kill-child sleep infinity`) keeps the namespace alive
and every daemon and client command enters it with `nsenter --net=/proc/<holder>/ns/net`. Nothing
touches the system's /etc/munge or /etc/slurm: munged gets a private key and socket, slurm.conf
points at that socket with AuthInfo, and clients find the conf through SLURM_CONF (in `.env`).

    with LocalSlurm(tmp_dir) as slurm:
        subprocess.run(slurm.command(["srun", "-n4", "hostname"]), env=slurm.env, check=True)

Needs root (slurmd runs jobs as their submitter), Debian's slurm-wlm and munge, and permission to
create network namespaces; `LocalSlurm.problem()` says why not when one is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from bench.launch.netns import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "srun", "sbatch", "scancel", "squeue", "scontrol")
TOOLS = ("unshare", "nsenter", "getent", "ip")
# Client settings a surrounding Slurm job (or a user's shell) may have exported; they would leak
# into the private cluster's commands.
_FOREIGN_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_", "SCANCEL_")

SLURM_CONF = """\
# Written by tests/slurm_cluster.py: a private single-node cluster inside a network namespace.
ClusterName=benchtest
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={logs}/slurmctld.log
SlurmdLogFile={logs}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# More CPUs than this machine has, so a 4-task job (chief + 2 workers + ps) fits anywhere.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
InactiveLimit=0
MailProg=/bin/true
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName={partition} Nodes={node} Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
"""


class SlurmUnavailable(RuntimeError):
    """This machine cannot run the private Slurm at all (a tool missing, no namespaces, not root)."""


def netns_inode(pid: int | str = "self") -> int | None:
    """The inode naming process `pid`'s network namespace, None once the process is gone."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def netns_members(inode: int) -> list[int]:
    """Every process whose network namespace is `inode`."""
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and netns_inode(entry.name) == inode]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"({exc.strerror})"
    return "\n".join(text) or "(empty)"


def _free_host_port(taken: set[int]) -> int:
    """A port free on the host too, so "refused from outside" proves the daemon stays inside."""
    while (port := free_port()) in taken:
        pass
    return port


class LocalSlurm:
    """munged, slurmctld and slurmd on one node named after this host (or `localhost`), all in a
    private network namespace; `start()` returns once `sinfo` reports the node idle."""

    def __init__(self, base_dir: Path, cpus: int = 8, partition: str = "debug",
                 start_timeout: float = 30.0) -> None:
        self.base_dir = Path(base_dir)
        self.cpus = cpus
        self.partition = partition
        self.start_timeout = start_timeout
        self.logs_dir = self.base_dir / "logs"
        self.conf_path = self.base_dir / "slurm.conf"
        self.munge_socket = self.base_dir / "munge" / "munge.socket"
        self.node = ""
        self.ctld_port = 0
        self.slurmd_port = 0
        self.env: dict[str, str] = {}
        self.startup_seconds = 0.0
        self._holder: subprocess.Popen[bytes] | None = None
        self._daemons: dict[str, subprocess.Popen[bytes]] = {}

    # ---- availability -------------------------------------------------------------------------

    @staticmethod
    def problem() -> str | None:
        """None when this machine can run LocalSlurm, else why not (one line)."""
        missing = [t for t in (*TOOLS, *DAEMONS, *CLIENTS) if shutil.which(t) is None
                   and not Path("/usr/sbin", t).exists()]
        if missing:
            return (f"commands missing: {', '.join(missing)} "
                    "(apt-get install slurm-wlm munge util-linux iproute2)")
        if os.geteuid() != 0:
            return "needs root (slurmd, nsenter)"
        probe = subprocess.run([_which("unshare"), "--net", "true"], capture_output=True, text=True,
                               timeout=10)
        if probe.returncode != 0:
            return f"unshare --net failed: {probe.stderr.strip() or probe.returncode}"
        return None

    # ---- use ----------------------------------------------------------------------------------

    @property
    def netns_path(self) -> str:
        if self._holder is None:
            raise RuntimeError("LocalSlurm is not started")
        return f"/proc/{self._holder.pid}/ns/net"

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cluster's network namespace (pass `env=self.env` as well)."""
        return [_which("nsenter"), f"--net={self.netns_path}", "--", *[str(a) for a in argv]]

    def run(self, argv: list[str], timeout: float = 60, check: bool = False,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`argv` inside the namespace with the cluster's env; text output captured."""
        return subprocess.run(self.command(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=check, stdin=subprocess.DEVNULL, cwd=cwd)

    @property
    def pids(self) -> dict[str, int]:
        """Process ids of the namespace holder and the daemons."""
        out = {"netns-holder": self._holder.pid} if self._holder else {}
        return out | {name: proc.pid for name, proc in self._daemons.items()}

    def node_state(self) -> str:
        proc = self.run(["sinfo", "-h", "-o", "%T", "-p", self.partition], timeout=15)
        return proc.stdout.strip() if proc.returncode == 0 else f"sinfo: {proc.stderr.strip()}"

    def log_tails(self, lines: int = 25) -> str:
        """The end of each daemon's log: slurmctld's and slurmd's log files (their stderr repeats
        them under -D; it is shown instead only when the log file is empty), munged's stderr."""
        parts = []
        for name in DAEMONS:
            log, err = self.logs_dir / f"{name}.log", self.logs_dir / f"{name}.stderr"
            path = log if log.exists() and log.stat().st_size else err
            parts.append(f"--- {path} (last {lines} lines) ---\n{_tail(path, lines)}")
        return "\n".join(parts)

    # ---- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> LocalSlurm:
        if self._holder is not None:
            return self
        t0 = time.monotonic()
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _start(self) -> None:
        for sub in ("state", "spool", "run", "logs"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)
        self._start_holder()
        self._configure_loopback()
        self.node = self._loopback_node_name()
        self.ctld_port = _free_host_port(set())
        self.slurmd_port = _free_host_port({self.ctld_port})
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_ENV_PREFIXES)}
        self.env["SLURM_CONF"] = str(self.conf_path)
        self._start_munged()
        self.conf_path.write_text(SLURM_CONF.format(
            node=self.node, ctld_port=self.ctld_port, slurmd_port=self.slurmd_port,
            munge_socket=self.munge_socket, state=self.base_dir / "state",
            spool=self.base_dir / "spool", run=self.base_dir / "run", logs=self.logs_dir,
            cpus=self.cpus, partition=self.partition))
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", str(self.conf_path)])
        slurmd = [_which("slurmd"), "-D", "-f", str(self.conf_path)]
        if self.node != socket.gethostname():
            slurmd += ["-N", self.node]
        self._spawn("slurmd", slurmd)
        self._wait_idle()

    def _start_holder(self) -> None:
        err_path = self.logs_dir / "netns-holder.stderr"
        with open(err_path, "wb") as err:
            self._holder = subprocess.Popen(
                [_which("unshare"), "--net", "--kill-child", "sleep", "infinity"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True)
        deadline = time.monotonic() + 10
        while netns_inode(self._holder.pid) in (netns_inode(), None):  # before unshare(2)
            if self._holder.poll() is not None:
                raise SlurmUnavailable(f"unshare --net exited {self._holder.returncode}: "
                                       f"{_tail(err_path, 5)}")
            if time.monotonic() > deadline:
                raise RuntimeError("unshare did not enter a new network namespace within 10 s")
            time.sleep(0.01)

    def _configure_loopback(self) -> None:
        """Raise `lo`, and give it a second loopback address: Slurm resolves every address (even
        "127.0.0.1", and its listen address) with getaddrinfo(AF_INET, AI_ADDRCONFIG), which glibc
        fails with EAI_NONAME unless some IPv4 address other than 127.0.0.1 is configured."""
        self.run([_which("ip"), "link", "set", "lo", "up"], timeout=30, check=True)
        self.run([_which("ip"), "addr", "add", "127.0.0.2/8", "dev", "lo"], timeout=30, check=True)

    def _loopback_node_name(self) -> str:
        """The node's name must resolve to loopback inside the namespace: TF's
        SlurmClusterResolver turns SLURM_STEP_NODELIST into names its tasks then dial."""
        tried = []
        for name in (socket.gethostname(), "localhost"):
            proc = self.run(["getent", "hosts", name], timeout=15)
            addresses = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
            if addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses):
                return name
            tried.append(f"{name} -> {addresses or proc.returncode}")
        raise SlurmUnavailable(f"no node name resolves to loopback in the namespace: {tried}")

    def _start_munged(self) -> None:
        munge_dir = self.munge_socket.parent
        munge_dir.mkdir(parents=True, exist_ok=True)
        munge_dir.chmod(0o755)
        if len(str(self.munge_socket)) > 100:
            raise RuntimeError(f"munge socket path too long for a unix socket: {self.munge_socket}")
        key = munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        # As root munged needs no user switch; --force turns "socket directory's ancestors are not
        # world-executable" (pytest's /tmp/pytest-of-root is 0700) into a warning: only root uses it.
        self._spawn("munged", [
            _which("munged"), "--foreground", "--force", f"--key-file={key}",
            f"--socket={self.munge_socket}", f"--pid-file={munge_dir / 'munged.pid'}",
            f"--seed-file={munge_dir / 'munged.seed'}"])
        self._wait_for(lambda: self.munge_socket.exists(), 10, "munged to create its socket")

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.logs_dir / f"{name}.stderr", "wb") as out:
            # nsenter (net only) execs the daemon itself, so the pid is the daemon's.
            self._daemons[name] = subprocess.Popen(
                self.command(argv), env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)

    def _check_daemons(self) -> None:
        for name, proc in self._daemons.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} during start-up\n"
                                   f"{self.log_tails()}")

    def _wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            self._check_daemons()
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}\n"
                                   f"{self.log_tails()}")
            time.sleep(0.1)

    def _wait_idle(self) -> None:
        last = [""]

        def idle() -> bool:
            last[0] = self.node_state()
            return last[0] == "idle"

        try:
            self._wait_for(idle, self.start_timeout, f"node {self.node} to be idle")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\nlast sinfo state: {last[0]!r}") from None

    def stop(self) -> None:
        """Stop the daemons (SIGTERM to their process groups, SIGKILL after 10 s), then every
        process still in the namespace (job steps, tasks), then the namespace holder. Idempotent."""
        for name in reversed(list(self._daemons)):
            proc = self._daemons[name]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._daemons.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._holder is not None:
            inode = netns_inode(self._holder.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._holder.pid, signal.SIGKILL)
            self._holder.wait(timeout=10)
            if inode is not None and inode != netns_inode():
                _empty_namespace(inode)
        self._daemons = {}
        self._holder = None


def _empty_namespace(inode: int, timeout: float = 10.0) -> None:
    """slurmstepd and job tasks leave slurmd's process group, and a process killed a moment ago
    keeps its namespace until it has finished exiting; every one of them shares our private
    network namespace, so find them by that (by pid, never by name), kill them, and return once
    none is left."""
    deadline = time.monotonic() + timeout
    while members := [pid for pid in netns_members(inode) if pid != os.getpid()]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {members} still in the cluster's network namespace "
                               f"{timeout:g} s after SIGKILL")
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _which(tool: str) -> str:
    return shutil.which(tool) or str(Path("/usr/sbin", tool))
