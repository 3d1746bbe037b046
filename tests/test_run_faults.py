"""Skips, crashes, hangs and Ctrl-C are recorded with their reason and never stop the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.record.model import VariantRecord
from tests.conftest import (
    REPO,
    BenchRun,
    bench,
    bench_run,
    leftover_processes,
    run_in_fresh_dir,
    write_scenario,
)
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

def short_ctl(timeout_s: int) -> str:
    """A few custom-loop steps under a given budget: the faults, not the figures, matter here."""
    return f"""
[train]
api = "ctl"

[measure]
warmup_steps = 1
steps = 4
repeats = 1
timeout_s = {timeout_s}
"""


FAULTS = short_ctl(25) + """
[[strategies]]
name = "mirrored"
replicas = 2
cross_device_ops = "nccl"        # skipped: no NCCL kernel on CPU

[[strategies]]
name = "mirrored"
replicas = 1
devices = "gpu"                  # skipped: no GPU here

[[strategies]]
name = "mirrored"
replicas = 1                     # hangs in its first turn: the budget kills it

[[strategies]]
name = "mirrored"
replicas = 2                     # the builder raises

[[strategies]]
name = "central_storage"
replicas = 2                     # the worker dies by SIGKILL, no record

[[strategies]]
name = "default"                 # still runs after all of the above
"""


def start_faults(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "faults", FAULTS,
                            model="tests.fixtures.faulty:by_strategy")


fault_run = early_fixture("faults", start_faults)


def variants_in_run_order(run: BenchRun) -> list[dict]:
    """The scenario's own variants (not the run's controls), in the order the run ran them: the
    baseline (the file's last, default) first, beside its control twin, then the file's order."""
    return sorted((r for r in run.records if VariantRecord.load(r).counts_as_variant),
                  key=lambda r: r["variant"]["index"])


def test_run_goes_on_and_exit_code_reports_failure(fault_run: BenchRun) -> None:
    assert fault_run.proc.returncode == 1
    assert [r["status"] for r in variants_in_run_order(fault_run)] == [
        "ok", "skipped", "skipped", "failed", "failed", "failed"]
    controls = [r for r in fault_run.records if r["variant"]["control"]]
    assert {r["status"] for r in controls} == {"ok"} and len(controls) == 3


def test_each_reason_is_recorded(fault_run: BenchRun) -> None:
    _, nccl, gpu, hang, boom, killed = variants_in_run_order(fault_run)
    assert "NcclAllReduce" in nccl["reason"]
    assert "no GPU" in gpu["reason"]
    assert "timed out after 25 s" in hang["reason"]
    assert "last let go into its turn 1 of the rounds" in hang["reason"]  # where it hung
    assert hang["error"]["type"] == "Timeout"
    assert boom["reason"] == ("model 'tests.fixtures.faulty:by_strategy' raised RuntimeError: "
                              "builder exploded on purpose")  # the user's function, named
    assert "Traceback" in boom["error"]["traceback"]
    assert "without a record" in killed["reason"]
    assert killed["error"]["returncode"] == -signal.SIGKILL
    out = fault_run.proc.stdout
    for text in ("NcclAllReduce", "timed out", "builder exploded on purpose"):
        assert text in out


def test_no_worker_outlives_the_run(fault_run: BenchRun) -> None:
    # By the run directory in a process's command line or environment (forked workers carry
    # the fork server's command line, which names it).
    assert fault_run.run_dir is not None
    assert leftover_processes(str(fault_run.run_dir)) == []


ALL_FAIL = """
[train]
api = "fit"

[measure]
warmup_steps = 1
steps = 4
repeats = 2

[[strategies]]
name = "default"

[[strategies]]
name = "one_device"
"""


def start_all_fail(context: EarlyContext) -> tuple[BenchRun, BenchRun]:
    """Every variant fails in its first step, alike: interleaved (baseline, twin, yardstick and
    the OneDevice variant in one batch) and one after another (no yardstick)."""
    tmp = context.tmp_path_factory.mktemp("all_fail")
    scenario = write_scenario(tmp, ALL_FAIL, name="all_fail",
                              model="tests.fixtures.faulty:fails_in_its_first_step")
    return (bench_run(scenario, tmp / "interleaved"),
            bench_run(scenario, tmp / "sequential", "--no-interleave"))


all_fail = early_fixture("all_fail", start_all_fail)


def test_a_run_whose_variants_all_fail_measures_no_machine_for_them(
        all_fail: tuple[BenchRun, BenchRun]) -> None:
    """The yardstick measures the machine for the variants beside it, the twin states its
    baseline's noise floor: once those have failed, neither runs its windows."""
    from bench.launch.rounds import NOTHING_TO_CALIBRATE

    interleaved, sequential = all_fail
    by_role = {r["variant"]["control"]: r for r in interleaved.records}
    assert interleaved.proc.returncode == 1, interleaved.proc.stderr
    assert by_role["yardstick"]["status"] == "skipped", by_role["yardstick"]
    assert by_role["yardstick"]["reason"] == NOTHING_TO_CALIBRATE["yardstick"]
    assert "samples" not in by_role["yardstick"]  # it ran no window
    assert {by_role[r]["status"] for r in ("baseline", "twin", None)} == {"failed"}
    roles = {r["variant"]["control"]: r for r in sequential.records}
    assert sequential.proc.returncode == 1 and "yardstick" not in roles
    assert roles["baseline"]["status"] == roles[None]["status"] == "failed"
    assert roles["twin"]["status"] == "skipped"  # after its baseline failed: never started
    assert roles["twin"]["reason"] == NOTHING_TO_CALIBRATE["twin"]


def test_a_failure_shared_by_every_variant_is_printed_once_a_place(
        all_fail: tuple[BenchRun, BenchRun]) -> None:
    """One failure, one line: the first variant's line as it ends gives the reason, later ones
    name that variant, the end of the run lists every variant of the reason on one line, and
    so does the report's summary."""
    from tests.fixtures.faulty import STEP_ERROR

    run = all_fail[1]
    failed = [r for r in run.records if r["status"] == "failed"]
    assert len(failed) == 2 and len({r["reason"] for r in failed}) == 1, failed
    assert STEP_ERROR in failed[0]["reason"]
    out = " ".join(run.proc.stdout.split())  # lines wrap at 160 columns
    assert out.count(STEP_ERROR) == 2, run.proc.stdout  # as the first failed, in the summary
    first, later = (r["variant_id"] for r in failed)
    assert f"failed {later} (as {first})" in out
    assert f"failed {first}, {later}: {' '.join(failed[0]['reason'].split())}" in out
    page = next((run.run_dir.parent.parent / "reports" / run.run_dir.name).glob("run-*.html"))
    assert page.read_text().count(f"2 failed: {first}, {later} — ") == 1


HANGING = short_ctl(300) + """
[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 1      # hangs until interrupted
"""


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT back to its default in the child: a test suite started as a background job of a
    non-interactive shell inherits SIGINT ignored, and then Ctrl-C could never reach bench."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_when_hung(tmp_path: Path, name: str, *args: str, wait_s: float = 120,
                        sig: signal.Signals = signal.SIGINT,
                        then: signal.Signals | None = None,
                        ) -> tuple[subprocess.Popen[str], str, str, Path]:
    """`bench run` of HANGING, Ctrl-C (or `sig`) once the mirrored variant hangs, and `then`
    another signal while it tears down: (process, stdout, stderr, the file holding the hung
    worker's pid). Asserts the run ended as an interrupted run does: exit 130, and its run
    directory says so and holds no scratch folder."""
    scenario = write_scenario(tmp_path, HANGING, name=name, model="tests.fixtures.faulty:by_strategy")
    pid_file = tmp_path / "hung.pid"
    env = {**os.environ, "BENCH_TEST_PID_FILE": str(pid_file)}
    proc = subprocess.Popen([sys.executable, "-m", "bench", "run", str(scenario), "--results-dir",
                             str(tmp_path / "results"), "--reports-dir", str(tmp_path / "reports"),
                             *args],
                            cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + wait_s
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), "the hanging variant never started"
    proc.send_signal(sig)
    if then is not None:
        time.sleep(0.05)
        proc.send_signal(then)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert f"interrupted ({sig.name}) after " in out
    assert "Traceback" not in out + err
    (run_dir,) = (tmp_path / "results").iterdir()
    marker = json.loads((run_dir / "interrupted.json").read_text())
    assert marker["signal"] == sig.name
    kept = run_dir / "records.jsonl"
    assert marker["finished"] == (len(kept.read_text().splitlines()) if kept.exists() else 0)
    assert not (run_dir / "cache").exists() and not (run_dir / "tmp").exists()
    return proc, out, err, pid_file


def test_ctrl_c_stops_cleanly_and_keeps_finished_records(tmp_path: Path) -> None:
    # One after another: interleaved variants only write their records once the rounds of their
    # batch are over, so Ctrl-C during the rounds keeps nothing of that batch.
    _, _, _, pid_file = interrupt_when_hung(tmp_path, "ctrlc", "--no-interleave", "--no-control")
    (run_dir,) = (tmp_path / "results").iterdir()
    records = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert [(r["variant"]["strategy"], r["status"]) for r in records] == [("default", "ok")]
    page = (tmp_path / "reports" / run_dir.name / f"run-{run_dir.name}.html").read_text()
    # the report of an interrupted run says so, and what is missing
    assert "Interrupted (SIGINT) after 1 of 2 variants; not run: mirrored-r1-ctl" in page
    proc = bench("report", str(run_dir), "--out", str(tmp_path / "again"))
    assert f"{run_dir}: interrupted (SIGINT) after 1 of 2 variants" in proc.stdout
    hung = int(pid_file.read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{hung}").exists() or \
        Path(f"/proc/{hung}/stat").read_text().split()[2] == "Z"


def test_sigterm_tears_down_like_ctrl_c(tmp_path: Path) -> None:
    """A cancelled CI job or a `kill` sends SIGTERM: no worker may be left behind without its
    runner (Python's default would end the runner and orphan every worker)."""
    interrupt_when_hung(tmp_path, "term", "--no-control", sig=signal.SIGTERM, wait_s=180)
    time.sleep(0.5)
    assert leftover_processes(str(tmp_path / "results")) == []
    (run_dir,) = (tmp_path / "results").iterdir()
    assert (run_dir / "timing.json").exists()  # the run was concluded, not cut off


def test_a_second_signal_does_not_cut_the_teardown_short(tmp_path: Path) -> None:
    """Ctrl-C, then SIGTERM while the run tears down (an impatient user, a CI runner that
    signals twice): the teardown still ends every worker and clears the scratch folders."""
    interrupt_when_hung(tmp_path, "twice", "--no-control", then=signal.SIGTERM, wait_s=180)
    time.sleep(0.5)
    assert leftover_processes(str(tmp_path / "results")) == []


def test_ctrl_c_during_interleaved_rounds_leaves_no_process(tmp_path: Path) -> None:
    """Interrupted while the default variant idles at its gate and the mirrored one hangs: every
    live worker is torn down, and the run ends as an interrupted run does."""
    _, _, _, pid_file = interrupt_when_hung(tmp_path, "ctrlrounds", wait_s=180)
    time.sleep(0.5)
    hung = int(pid_file.read_text())
    assert not Path(f"/proc/{hung}").exists() or \
        Path(f"/proc/{hung}/stat").read_text().split()[2] == "Z"
    assert leftover_processes(str(tmp_path / "results")) == []
    (run_dir,) = (tmp_path / "results").iterdir()
    assert not list((run_dir / "logs").glob("*.gate"))  # the FIFOs went with their workers
