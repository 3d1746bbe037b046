"""The `slurm` fixture's private cluster really schedules, runs and cancels jobs, stays inside its
network namespace, and leaves nothing running after stop()."""

from __future__ import annotations

import ipaddress
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.slurm_cluster import LocalSlurm, netns_inode, netns_members

pytestmark = pytest.mark.slow


def squeue_state(slurm: LocalSlurm, job_id: str) -> str:
    """The job's state, "" once squeue no longer lists it."""
    proc = slurm.run(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    return proc.stdout.strip()


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.2)


def test_node_is_idle_with_eight_cpus(slurm: LocalSlurm) -> None:
    proc = slurm.run(["sinfo", "-h", "-o", "%P %D %T %c %N"], check=True)
    assert proc.stdout.split() == [f"{slurm.partition}*", "1", "idle", "8", slurm.node]


def test_node_name_resolves_to_loopback_inside_the_namespace(slurm: LocalSlurm) -> None:
    """SlurmClusterResolver turns the step's node list into names its TF tasks dial."""
    names = slurm.run(["scontrol", "show", "hostnames", slurm.node], check=True).stdout.split()
    assert names == [slurm.node]
    hosts = slurm.run(["getent", "hosts", slurm.node], check=True).stdout.split()
    assert hosts and ipaddress.ip_address(hosts[0]).is_loopback


def test_srun_runs_four_tasks(slurm: LocalSlurm) -> None:
    proc = slurm.run(["srun", "-n4", "--label", "bash", "-c", 'echo "$SLURM_PROCID $SLURM_NTASKS"'],
                     timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = sorted(line.split(":", 1)[1].split() for line in proc.stdout.splitlines())
    assert lines == [[str(rank), "4"] for rank in range(4)]
    assert slurm.run(["srun", "-n4", "hostname"], check=True).stdout.split() == [slurm.node] * 4


def test_sbatch_wait_runs_a_batch_job(slurm: LocalSlurm, tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    proc = slurm.run(["sbatch", "--wait", "--parsable", "-n2", f"--output={out}", f"--chdir={tmp_path}",
                      "--wrap", 'echo "hello from job $SLURM_JOB_ID"; srun hostname'], timeout=120)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().split(";")[0]
    assert job_id.isdigit()
    assert out.read_text().splitlines() == [f"hello from job {job_id}", slurm.node, slurm.node]


def test_scancel_ends_a_running_job(slurm: LocalSlurm, tmp_path: Path) -> None:
    proc = slurm.run(["sbatch", "--parsable", f"--output={tmp_path / 'sleep.out'}",
                      "--wrap", "sleep 600"], check=True)
    job_id = proc.stdout.strip().split(";")[0]
    wait_for(lambda: squeue_state(slurm, job_id) == "RUNNING", 30, f"job {job_id} to run")
    slurm.run(["scancel", job_id], check=True)
    wait_for(lambda: squeue_state(slurm, job_id) in ("", "CANCELLED"), 30, f"job {job_id} to end")
    state = slurm.run(["scontrol", "show", "job", job_id], timeout=30).stdout
    assert "JobState=CANCELLED" in state or not state


@pytest.mark.parametrize("which", ["ctld_port", "slurmd_port"])
def test_daemons_listen_only_inside_the_namespace(slurm: LocalSlurm, which: str) -> None:
    port = getattr(slurm, which)
    probe = ("import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5); "
             "print('connected')")
    inside = slurm.run([sys.executable, "-c", probe, str(port)], timeout=30)
    assert inside.stdout.strip() == "connected", inside.stderr
    with pytest.raises(ConnectionRefusedError):  # this test process is outside the namespace
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_stop_ends_daemons_jobs_and_namespace(slurm: LocalSlurm, tmp_path: Path) -> None:
    """A second, private cluster (the session's stays up): stop() leaves no process behind, even
    with a job still running."""
    del slurm  # requested only for its skip-or-fail-in-CI decision
    cluster = LocalSlurm(tmp_path / "own").start()
    try:
        assert cluster.startup_seconds < 15
        job = cluster.run(["sbatch", "--parsable", f"--output={tmp_path / 'sleep.out'}",
                           "--wrap", "sleep 600"], check=True).stdout.strip().split(";")[0]
        wait_for(lambda: squeue_state(cluster, job) == "RUNNING", 30, f"job {job} to run")
        pids = cluster.pids
        inode = netns_inode(pids["netns-holder"])
        assert set(pids) == {"netns-holder", "munged", "slurmctld", "slurmd"}
        assert inode is not None and inode != netns_inode()
        members = netns_members(inode)
        assert set(pids.values()) <= set(members)
        assert len(members) > len(pids) + 1  # slurmstepd and the job's `sleep` as well
    finally:
        cluster.stop()
    assert [name for name, pid in pids.items() if Path(f"/proc/{pid}").exists()] == []
    assert netns_members(inode) == []
    cluster.stop()  # idempotent
