"""Recovery after a lost worker, through the real `bench run` ([fault]): MultiWorkerMirrored
through the custom loop (Keras 3, CheckpointManager) and fit (tf-keras, BackupAndRestore), and
ParameterServer (the coordinator re-schedules, the lost worker is started again). One quick run
of scenarios/fault_tolerance.toml, shared with tests/test_shipped_scenarios.py; its records are
checked by every test here."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NEEDS_NETNS, BenchRun, leftover_processes

pytestmark = [pytest.mark.slow, NEEDS_NETNS, pytest.mark.usefixtures("netns_required")]


# scenarios/fault_tolerance.toml under --quick: 43 steps (3 warmup + 2 x 20), worker 1 killed
# at 55% of them (step 24), backups every 10 steps; the session's one run of it (conftest).
MWMS = ("multi_worker_mirrored-w2x1-ctl-float32-gb64",
        "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb64")
PS = "parameter_server-ps1w2-ctl-float32-gb32"
STEPS, AT_STEP, EVERY = 43, 24, 10
ORDER = ("fault_injected", "detected", "restart_started", "cluster_back_up", "state_restored",
         "first_step_after_restore")


@pytest.fixture(scope="module")
def fault_run(fault_tolerance_run: BenchRun) -> BenchRun:
    return fault_tolerance_run


def _recovery(run: BenchRun, vid: str) -> dict[str, Any]:
    rec = run.by_id()[vid]
    assert rec["status"] == "ok", (rec["reason"], rec.get("recovery", {}).get("timeline_s"))
    return rec["recovery"]


def test_every_variant_recovers_and_the_run_is_ok(fault_run: BenchRun) -> None:
    out = fault_run.proc.stdout + fault_run.proc.stderr
    assert fault_run.proc.returncode == 0, out[-3000:]
    assert {r["variant_id"]: r["status"] for r in fault_run.records} == dict.fromkeys(
        (*MWMS, PS), "ok")


@pytest.mark.parametrize("vid", MWMS)
def test_multi_worker_timeline_is_complete_and_in_order(fault_run: BenchRun, vid: str) -> None:
    recovery = _recovery(fault_run, vid)
    times = recovery["timeline"]
    assert all(times[k] is not None for k in ORDER), times
    assert [times[k] for k in ORDER] == sorted(times[k] for k in ORDER), times
    if times["back_to_speed"] is not None:
        assert times["back_to_speed"] >= times["first_step_after_restore"]
    assert recovery["detected_by"] == "chief"
    assert recovery["chief_error"]["type"] in ("UnavailableError", "AbortedError",
                                               "InternalError", "CancelledError")
    assert recovery["fault"] == {"task": "worker:1", "signal": "SIGKILL", "at_step": AT_STEP,
                                 "injected_at_step": recovery["fault"]["injected_at_step"],
                                 "backup_every": EVERY, "pid": recovery["fault"]["pid"],
                                 "sigkill_after_s": None}
    assert recovery["time_to_recover_s"] == pytest.approx(
        times["first_step_after_restore"] - times["fault_injected"])
    rec = fault_run.by_id()[vid]
    assert rec["cluster"]["attempts"] == 2  # the whole cluster was started again
    assert all(t["status"] == "ok" for t in rec["cluster"]["tasks"])


@pytest.mark.parametrize("vid", MWMS)
def test_steps_redone_are_the_work_since_the_last_backup(fault_run: BenchRun, vid: str) -> None:
    recovery = _recovery(fault_run, vid)
    assert recovery["last_step_before_fault"] >= AT_STEP
    assert recovery["restored_step"] == recovery["last_backup_before_fault"]
    assert recovery["restored_step"] % EVERY == 0
    assert 0 <= recovery["steps_redone"] <= EVERY
    assert recovery["steps_redone"] == recovery["last_step_before_fault"] - recovery["restored_step"]
    steps = [(e["attempt"], e["step"]) for e in recovery["series"]]
    first = [s for a, s in steps if a == 1]
    second = [s for a, s in steps if a == 2]
    assert first == list(range(1, recovery["last_step_before_fault"] + 1))
    assert second == list(range(recovery["restored_step"] + 1, STEPS + 1))  # to the end


@pytest.mark.parametrize("vid", MWMS)
def test_training_continues_from_the_backup_not_from_scratch(fault_run: BenchRun,
                                                              vid: str) -> None:
    cont = _recovery(fault_run, vid)["continuity"]
    assert cont["continues"] is True
    assert cont["restored_exactly"] is True  # the probe batch's loss: same weights as backed up
    assert cont["probe_loss_after_restore"] < cont["probe_loss_step0"]
    assert abs(cont["train_loss_first_after_restore"] - cont["train_loss_at_backup"]) < abs(
        cont["train_loss_first_after_restore"] - cont["train_loss_step1"])


def test_parameter_server_goes_on_while_the_lost_worker_restarts(fault_run: BenchRun) -> None:
    recovery = _recovery(fault_run, PS)
    times = recovery["timeline"]
    # the coordinator never stops: a block may end before the supervisor has seen the exit
    assert times["fault_injected"] <= times["detected"]
    assert times["fault_injected"] < times["first_step_after_restore"]
    assert times["state_restored"] is None  # nothing to restore: the variables live on the ps
    assert recovery["steps_redone"] == 0
    assert recovery["continuity"]["continues"] is True
    rec = fault_run.by_id()[PS]
    assert rec["cluster"]["attempts"] == 1  # the chief was never stopped
    # blocks of 2 x workers steps, before and after the fault alike
    assert [s["step"] for s in recovery["series"]] == list(range(4, STEPS + 1, 4))


def test_the_report_draws_the_fault(fault_run: BenchRun) -> None:
    assert fault_run.run_dir is not None
    site = fault_run.run_dir.parent.parent / "reports" / fault_run.run_dir.name
    html = (site / f"run-{fault_run.run_dir.name}.html").read_text()
    assert "Recovery after a lost worker" in html
    for vid in (*MWMS, PS):
        assert f'id="recovery-{vid}"' in html
    assert "fault injected" in html and "steps redone" in html


def test_no_task_outlives_the_run(fault_run: BenchRun) -> None:
    """The orphan check finds every process by the run directory in its command line or
    environment: parameter-server tasks and restarted workers included."""
    assert fault_run.run_dir is not None
    assert leftover_processes(str(fault_run.run_dir)) == []
    assert not list((fault_run.run_dir / "logs").glob("*.backup*"))
