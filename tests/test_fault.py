"""The [fault] section (what a scenario may ask for, one-line errors for what it may not) and
the recovery timeline the supervisor reads from the tasks' events (no TensorFlow here)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.errors import ScenarioError
from bench.launch.fault_injector import TERM_GRACE_S, FaultInjector
from bench.launch.recovery_timeline import complete, timeline
from bench.scenario.fault import FaultConfig
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import bench

BASE = {
    "scenario": {"name": "f"}, "batch": {"rule": "weak", "per_replica": 16},
    "measure": {"warmup_steps": 2, "steps": 8, "repeats": 2},
    "fault": {"kill": {"task": "worker:1", "at_step": 10}, "backup_every": 4},
    "strategies": [{"name": "multi_worker_mirrored", "workers": 2}],
}


def _doc(**sections: object) -> dict:
    return {**BASE, **sections}


def test_a_fault_reaches_every_variant_and_a_fraction_scales_with_the_steps() -> None:
    doc = _doc(fault={"kill": {"task": "worker:1", "at_step": 0.5}, "signal": "SIGTERM"})
    variants = expand(parse_scenario(doc, "f.toml"), "f.toml")
    assert {v.fault.signal for v in variants} == {"SIGTERM"}
    assert variants[0].total_steps == 18
    assert variants[0].fault.kill.step_of(18) == 9
    assert variants[0].fault.backup_every == 10  # the default


CASES = {
    "single_process": (_doc(strategies=[{"name": "mirrored"}]), "strategies[0].name",
                       "'mirrored' runs in one process"),
    "missing_task": (_doc(fault={"kill": {"task": "worker:2", "at_step": 3}}),
                     "fault.kill.task", "has workers 0..1"),
    "chief": (_doc(fault={"kill": {"task": "worker:0", "at_step": 3}}), "fault.kill.task",
              "chief"),
    "ps_task": (_doc(fault={"kill": {"task": "ps:0", "at_step": 3}},
                     strategies=[{"name": "parameter_server", "workers": 2}]),
                "fault.kill.task", "only a worker can be lost"),
    "ps_fit": (_doc(strategies=[{"name": "parameter_server", "workers": 2, "api": "fit"}]),
               "strategies[0].api", "ClusterCoordinator loop only"),
    "bad_name": (_doc(fault={"kill": {"task": "worker-1", "at_step": 3}}), "fault.kill.task",
                 "should match pattern"),
    "beyond_steps": (_doc(fault={"kill": {"task": "worker:1", "at_step": 18}}),
                     "fault.kill.at_step", "step 18 is not before the end of the variants' 18"),
    "fraction_one": (_doc(fault={"kill": {"task": "worker:1", "at_step": 1.0}}),
                     "fault.kill.at_step", "less than 1"),
    "signal": (_doc(fault={"kill": {"task": "worker:1", "at_step": 3}, "signal": "SIGINT"}),
               "fault.signal", "SIGKILL"),
    "unknown_key": (_doc(fault={"kill": {"task": "worker:1", "at_step": 3}, "backup": 3}),
                    "fault.backup", "did you mean 'backup_every'"),
    "spe": (_doc(train={"steps_per_execution": 2}, measure={"warmup_steps": 2, "steps": 8}),
            "train.steps_per_execution", "steps_per_execution = 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fault_errors_name_the_field(case: str) -> None:
    doc, field, message = CASES[case]
    with pytest.raises(ScenarioError) as info:
        expand(parse_scenario(doc, "f.toml"), "f.toml")
    text = str(info.value)
    assert text.startswith(f"f.toml: {field}"), text
    assert message in text, text


def test_at_step_is_checked_against_the_steps_after_quick(tmp_path: Path) -> None:
    """--quick shortens a run to 43 steps: a step count beyond them is a one-line error (exit 2);
    a fraction stays inside."""
    path = tmp_path / "f.toml"
    path.write_text(re.sub(r"(?m)^", "", """
[scenario]
name = "f"
[batch]
rule = "weak"
per_replica = 16
[fault]
kill = { task = "worker:1", at_step = 100 }
[[strategies]]
name = "multi_worker_mirrored"
workers = 2
"""))
    proc = bench("run", str(path), "--quick", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: fault.kill.at_step: step 100")


def _fault(**kill: object) -> FaultConfig:
    return FaultConfig.model_validate({"kill": {"task": "worker:1", "at_step": 5, **kill},
                                       "backup_every": 4})


def _steps(first: int, last: int, t0: float, dt: float = 0.1) -> list[dict]:
    return [{"event": "step", "t": t0 + i * dt, "step": s, "dt": dt, "loss": 1.0 / s}
            for i, s in enumerate(range(first, last + 1))]


def test_the_injector_kills_the_target_once_it_reports_the_step() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        injector = FaultInjector(_fault(), 5, "worker-1", "worker-1")
        injector.on_progress("worker-0", 9)  # another task's steps do not count
        assert not injector.poll({"worker-1": sleeper.pid})
        injector.on_progress("worker-1", 5)
        assert injector.poll({"worker-1": sleeper.pid})
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
        assert injector.injected_step == 5 and injector.pid == sleeper.pid
        assert injector.poll({"worker-1": sleeper.pid})  # once only
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_task_that_survives_sigterm_gets_sigkill_after_the_grace() -> None:
    """TensorFlow catches SIGTERM in a cluster task; a job controller ends the grace period
    with SIGKILL, and so does the injector."""
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                 "print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
        injector = FaultInjector(_fault(), 5, "worker-1", "worker-1")
        injector.fault = FaultConfig.model_validate(
            {"kill": {"task": "worker:1", "at_step": 5}, "signal": "SIGTERM"})
        injector.on_progress("worker-1", 5)
        assert injector.poll({"worker-1": stubborn.pid})
        time.sleep(0.3)
        injector.poll({"worker-1": stubborn.pid})
        assert stubborn.poll() is None and injector.escalated_at is None  # within the grace
        time.sleep(TERM_GRACE_S)
        injector.poll({"worker-1": stubborn.pid})
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
        assert injector.escalated_at is not None
    finally:
        stubborn.kill()
        stubborn.wait()


def _events(restart: bool) -> dict[int, dict[str, list[dict]]]:
    first = [{"event": "ready", "t": 0.0}, {"event": "restored", "t": 0.5, "step": 0,
                                             "probe_loss": 2.0},
             *_steps(1, 6, 1.0),
             {"event": "backup", "t": 1.35, "step": 4, "probe_loss": 0.5},
             {"event": "error", "t": 1.7, "type": "UnavailableError", "message": "peer gone"}]
    if not restart:
        return {1: {"worker-0": first}, 2: {"worker-0": [{"event": "ready", "t": 3.0}]}}
    second = [{"event": "ready", "t": 3.0}, {"event": "restored", "t": 3.5, "step": 4,
                                              "probe_loss": 0.5}, *_steps(5, 12, 4.0)]
    return {1: {"worker-0": first}, 2: {"worker-0": second, "worker-1": [
        {"event": "ready", "t": 3.2}]}}


def test_the_timeline_reads_every_phase_in_order() -> None:
    injector = FaultInjector(_fault(), 5, "worker-1", "worker-1", injected_at=1.55,
                             injected_step=6)
    out = timeline(fault=_fault(), at_step=5, injector=injector, warmup=1, chief="worker-0",
                   events=_events(True), restarted_at=2.0, detected_by_supervisor=1.6,
                   strategy="multi_worker_mirrored")
    assert out["timeline"] == {"fault_injected": 1.55, "detected": 1.7, "restart_started": 2.0,
                               "cluster_back_up": 3.2, "state_restored": 3.5,
                               "first_step_after_restore": 4.0, "back_to_speed": 4.2}
    assert out["time_to_recover_s"] == pytest.approx(2.45)
    assert (out["last_step_before_fault"], out["restored_step"], out["steps_redone"]) == (6, 4, 2)
    assert out["continuity"]["continues"] and out["continuity"]["restored_exactly"]
    assert [(e["attempt"], e["step"]) for e in out["series"]][5:7] == [(1, 6), (2, 5)]
    assert complete(out, "multi_worker_mirrored") is None


def test_a_recovery_cut_short_keeps_the_timeline_so_far() -> None:
    """The budget ran out after the cluster came back, before any step: failed, with what
    happened until then."""
    injector = FaultInjector(_fault(), 5, "worker-1", "worker-1", injected_at=1.55,
                             injected_step=6)
    out = timeline(fault=_fault(), at_step=5, injector=injector, warmup=1, chief="worker-0",
                   events=_events(False), restarted_at=2.0, detected_by_supervisor=1.6,
                   strategy="multi_worker_mirrored")
    assert out["timeline"]["detected"] == 1.7 and out["timeline"]["restart_started"] == 2.0
    assert out["timeline"]["first_step_after_restore"] is None
    assert out["steps_redone"] is None
    assert complete(out, "multi_worker_mirrored") == (
        "recovery incomplete: no state_restored, first_step_after_restore")
