"""Recovery after a lost worker, through the real `bench run` ([fault]): MultiWorkerMirrored
through the custom loop (Keras 3, CheckpointManager) and fit (tf-keras, BackupAndRestore), and
ParameterServer (the coordinator re-schedules, the lost worker is started again). One run of a
tiny scenario; its records are checked by every test here."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NEEDS_NETNS, BenchRun, leftover_processes, run_in_fresh_dir

pytestmark = [pytest.mark.slow, NEEDS_NETNS, pytest.mark.usefixtures("require_netns")]


# 18 steps (2 warmup + 2 x 8); worker 1 killed after step 10; backups every 4 steps
FAULT = """
[measure]
timeout_s = 150

[fault]
kill = { task = "worker:1", at_step = 10 }
backup_every = 4

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
api = "ctl"

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
api = "fit"
keras = "tf_keras"

[[strategies]]
name = "parameter_server"
ps = 1
workers = 2
api = "ctl"
"""
MWMS = ("multi_worker_mirrored-w2x1-ctl-float32-gb32",
        "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb32")
PS = "parameter_server-ps1w2-ctl-float32-gb16"
ORDER = ("fault_injected", "detected", "restart_started", "cluster_back_up", "state_restored",
         "first_step_after_restore")


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    return run_in_fresh_dir(tmp_path_factory, "recovery", FAULT)


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
    assert recovery["fault"] == {"task": "worker:1", "signal": "SIGKILL", "at_step": 10,
                                 "injected_at_step": recovery["fault"]["injected_at_step"],
                                 "backup_every": 4, "pid": recovery["fault"]["pid"]}
    assert recovery["time_to_recover_s"] == pytest.approx(
        times["first_step_after_restore"] - times["fault_injected"])
    rec = fault_run.by_id()[vid]
    assert rec["cluster"]["attempts"] == 2  # the whole cluster was started again
    assert all(t["status"] == "ok" for t in rec["cluster"]["tasks"])


@pytest.mark.parametrize("vid", MWMS)
def test_steps_redone_are_the_work_since_the_last_backup(fault_run: BenchRun, vid: str) -> None:
    recovery = _recovery(fault_run, vid)
    assert recovery["last_step_before_fault"] >= 10
    assert recovery["restored_step"] == recovery["last_backup_before_fault"]
    assert recovery["restored_step"] % 4 == 0
    assert 0 <= recovery["steps_redone"] <= 4
    assert recovery["steps_redone"] == recovery["last_step_before_fault"] - recovery["restored_step"]
    steps = [(e["attempt"], e["step"]) for e in recovery["series"]]
    first = [s for a, s in steps if a == 1]
    second = [s for a, s in steps if a == 2]
    assert first == list(range(1, recovery["last_step_before_fault"] + 1))
    assert second == list(range(recovery["restored_step"] + 1, 19))  # to the end of the steps


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
    assert [s["step"] for s in recovery["series"]] == [4, 8, 12, 16]  # blocks of 2 x workers


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
