"""`bench run --launcher slurm` against a real Slurm (tests/slurm_cluster.py), in a private
network namespace: MultiWorkerMirrored and ParameterServer variants as Slurm jobs, their records
gathered into the run and its report, budgets enforced with scancel, bad input refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_dirs, write_scenario
from tests.slurm_cluster import LocalSlurm

pytestmark = pytest.mark.slow

CLUSTERS = """
[train]
api = "ctl"

[measure]
control = false

[[strategies]]
name = "multi_worker_mirrored"
workers = 2

[[strategies]]
name = "parameter_server"
workers = 2
ps = 1
"""
MWMS = "multi_worker_mirrored-w2x1-ctl-float32-gb32"
PS = "parameter_server-ps1w2-ctl-float32-gb16"


def bench_in(slurm: LocalSlurm, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real `bench` CLI, run inside the Slurm cluster's network namespace."""
    return subprocess.run(slurm.command([sys.executable, "-m", "bench", *args]),
                          env={**slurm.env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, stdin=subprocess.DEVNULL)


def records_of(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    return {r["variant_id"]: r for r in map(json.loads, lines)}


def queue_is_empty(slurm: LocalSlurm) -> bool:
    return slurm.run(["squeue", "-h", "-o", "%i %T"]).stdout.strip() == ""


@pytest.fixture(scope="module")
def slurm_run(slurm: LocalSlurm, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    base = tmp_path_factory.mktemp("slurm-run")
    scenario = write_scenario(base, CLUSTERS, name="slurm_clusters")
    proc = bench_in(slurm, "run", str(scenario), "--launcher", "slurm", "--partition",
                    slurm.partition, "--results-dir", str(base / "results"), "--reports-dir",
                    str(base / "reports"))
    (run_dir,) = run_dirs(base / "results")
    return proc, run_dir, base / "reports" / run_dir.name


def test_cluster_variants_run_as_slurm_jobs_and_their_records_come_back(
        slurm_run: tuple, slurm: LocalSlurm) -> None:
    proc, run_dir, _ = slurm_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = records_of(run_dir)
    assert set(records) == {MWMS, PS}
    for variant_id, record in records.items():
        assert record["status"] == "ok", (variant_id, record.get("reason"))
        assert record["launch"]["launcher"] == "slurm" and record["launch"]["job_id"].isdigit()
        assert record["launch"]["partition"] == slurm.partition
        assert record["cluster"]["resolver"] == "slurm"
        assert record["throughput"]["headline"] > 0
        assert (run_dir / "logs" / f"{variant_id}.sbatch").exists()
    # the roles came from SlurmClusterResolver: one task per TensorFlow task of the plan
    assert {k: len(v) for k, v in records[MWMS]["cluster"]["spec"].items()} == {"worker": 2}
    assert {k: len(v) for k, v in records[PS]["cluster"]["spec"].items()} == {
        "chief": 1, "worker": 2, "ps": 1}
    assert records[MWMS]["launch"]["job_id"] != records[PS]["launch"]["job_id"]
    assert queue_is_empty(slurm)  # the PS servers, which never exit, were cancelled


def test_a_slurm_record_is_in_the_html_report_like_any_other(slurm_run: tuple) -> None:
    _, run_dir, report = slurm_run
    assert run_dir.name in (report / "index.html").read_text()
    page = (report / f"run-{run_dir.name}.html").read_text()
    assert MWMS in page and PS in page


def test_the_budget_is_enforced_with_scancel(slurm: LocalSlurm, tmp_path: Path) -> None:
    body = CLUSTERS.replace("control = false", "control = false\nsteps = 100000\ntimeout_s = 5")
    scenario = write_scenario(tmp_path, body, name="slurm_timeout")
    proc = bench_in(slurm, "run", str(scenario), "--launcher", "slurm", "--only", MWMS,
                    "--results-dir", str(tmp_path / "results"), "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run_dir,) = run_dirs(tmp_path / "results")
    record = records_of(run_dir)[MWMS]
    assert record["status"] == "failed" and record["error"]["type"] == "Timeout"
    assert "timed out after 5 s" in record["reason"] and "cancelled" in record["reason"]
    assert queue_is_empty(slurm)


def test_an_unknown_partition_is_one_line_and_writes_nothing(slurm: LocalSlurm,
                                                             tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, CLUSTERS, name="slurm_bad")
    proc = bench_in(slurm, "run", str(scenario), "--launcher", "slurm", "--partition", "nope",
                    "--results-dir", str(tmp_path / "results"), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: --partition: Slurm has no partition 'nope' "
                                   f"(have: {slurm.partition})")
    assert not (tmp_path / "results").exists()


def test_sbatch_is_required_for_the_slurm_launcher(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, CLUSTERS, name="slurm_nosbatch")
    proc = subprocess.run([sys.executable, "-m", "bench", "run", str(scenario), "--launcher",
                           "slurm", "--results-dir", str(tmp_path / "results")],
                          env={"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: --launcher slurm: 'sbatch' is not on PATH")
    assert not (tmp_path / "results").exists()


def test_the_users_batch_script_is_accepted_by_slurm(slurm: LocalSlurm, tmp_path: Path) -> None:
    out = tmp_path / "scripts"
    proc = bench_in(slurm, "cluster", "sbatch", str(REPO / "scenarios" / "clusters.toml"),
                    "--variant", "parameter_server-ps1w2-ctl-float32-gb64", "--partition",
                    slurm.partition, "-o", str(out), timeout=60)
    assert proc.returncode == 0, proc.stderr
    (script,) = out.glob("*.sbatch")
    text = script.read_text()
    assert "#SBATCH --ntasks=4" in text and "--resolver slurm" in text
    # --test-only: the real controller validates the script and says when it would start
    check = slurm.run(["sbatch", "--test-only", str(script)])
    assert check.returncode == 0 and "to start at" in check.stderr, check.stderr
