"""Variants forked from the fork server start pristine: nothing one sets reaches the next.

The precision policy and the logical device layout are process-wide in TensorFlow; the fork
server exists to skip `import tensorflow`, never to share that state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.launch.forkserver import ForkServer
from bench.launch.forkserver_main import exit_code
from bench.launch.local import worker_env
from bench.launch.process import WorkerProcess
from bench.perf.overhead import variant_phases
from bench.record.model import VariantRecord
from tests.conftest import REPO, BenchRun, bench_run, write_scenario
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

BACK_TO_BACK = """
[train]
api = "ctl"

[measure]
min_window_s = 0  # every variant runs the same steps: the first and last train the same model
settle_s = 0

[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 2
precision = "mixed_bfloat16"

[[strategies]]
name = "one_device"
"""

PRISTINE = {"tf_context_initialized": False, "precision_policy": "float32"}


def start_back_to_back(context: EarlyContext) -> BenchRun:
    tmp = context.tmp_path_factory.mktemp("isolation")
    scenario = write_scenario(tmp, BACK_TO_BACK, name="isolation")
    return bench_run(scenario, tmp / "results", "--no-report", "--no-control")


back_to_back = early_fixture("isolation", start_back_to_back)


def test_each_variant_is_forked_from_the_server(back_to_back: BenchRun) -> None:
    assert back_to_back.proc.returncode == 0, back_to_back.proc.stderr
    assert [r["launch"]["start_method"] for r in back_to_back.records] == ["forkserver"] * 3
    pids = [r["start_state"]["pid"] for r in back_to_back.records]
    assert len(set(pids)) == 3  # a new process each time, not a reused one
    assert all(r["timing"]["phases"]["import"] < 0.5 for r in back_to_back.records)


def test_no_setting_leaks_between_variants(back_to_back: BenchRun) -> None:
    before, mixed, after = back_to_back.records
    # Every variant found the process untouched, whatever ran before it...
    assert [r["start_state"] | PRISTINE == r["start_state"] for r in back_to_back.records] == \
        [True] * 3
    # ...and set its own policy and layout, which the next one did not see.
    assert mixed["precision_policy"] == "mixed_bfloat16"
    assert len(mixed["devices"]["logical"]) == 2
    for single in (before, after):
        assert single["precision_policy"] == "float32"
        assert [d for d in single["devices"]["logical"] if "CPU" in d] == ["/device:CPU:0"]
    assert after["loss"]["final"] == pytest.approx(before["loss"]["final"], rel=1e-5)


def test_run_reports_its_duty_cycle(back_to_back: BenchRun) -> None:
    assert back_to_back.run_dir is not None
    timing = json.loads((back_to_back.run_dir / "timing.json").read_text())
    assert 0 < timing["duty_cycle"] < 1
    assert timing["start_method"] == "forkserver"
    assert timing["timed_s"] == pytest.approx(sum(  # both windows of every turn
        sum(r["measurement"]["window_s"]) + sum(r["measurement"]["observed_window_s"])
        for r in back_to_back.records))
    assert "duty cycle" in back_to_back.proc.stdout


def test_the_fork_servers_start_up_is_the_runs_not_the_first_variants(
        back_to_back: BenchRun) -> None:
    """The first variants wait for the fork server's TensorFlow import: that wait is the run's
    (timing.json's forkserver_ready_s), in no variant's start or unaccounted time."""
    assert back_to_back.run_dir is not None
    ready_s = json.loads((back_to_back.run_dir / "timing.json").read_text())["forkserver_ready_s"]
    assert ready_s > 1.0  # it imported TensorFlow
    for record in back_to_back.records:
        phases = variant_phases(VariantRecord.load(record))
        assert phases["start"] + phases["other"] < ready_s / 2, (record["variant_id"], phases)


def test_spawn_start_method_runs_a_new_interpreter(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, BACK_TO_BACK, name="spawned")
    run = bench_run(scenario, tmp_path / "results", "--no-report", "--start-method", "spawn",
                    "--only", "default-*", "--no-control")
    assert run.proc.returncode == 0, run.proc.stderr
    (record,) = run.records
    assert record["launch"]["start_method"] == "spawn"
    assert record["timing"]["phases"]["import"] > 0.5  # it imported TensorFlow itself


def test_server_refuses_to_fork_from_a_touched_process() -> None:
    code = ("import keras; from bench.launch.forkserver_main import pristine_problem;"
            "print(pristine_problem());"
            "keras.mixed_precision.set_global_policy('mixed_bfloat16'); print(pristine_problem())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=120)
    assert out.stdout.splitlines() == ["None", "the global precision policy is mixed_bfloat16"]


def test_forked_child_exit_code_and_stderr_reach_the_parent(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench.worker", "--no-such-flag"]
    with ForkServer(worker_env(), tmp_path / "server.log", "isolation-test") as server:
        with WorkerProcess(cmd, worker_env(), tmp_path / "child.log", forkserver=server) as proc:
            outcome = proc.wait(60)
    assert proc.start_method == "forkserver"
    assert outcome.returncode == 2  # argparse's usage error, from the forked child
    assert "usage: python -m bench.worker" in (tmp_path / "child.log").read_text()


def test_dead_server_falls_back_to_a_new_interpreter(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench.worker", "--no-such-flag"]
    with ForkServer(worker_env(), tmp_path / "server.log", "isolation-test") as server:
        assert server.wait_ready()
        assert server._proc is not None
        os.kill(server._proc.pid, signal.SIGKILL)
        server._proc.wait()
        with WorkerProcess(cmd, worker_env(), tmp_path / "child.log", forkserver=server) as proc:
            outcome = proc.wait(60)
    assert proc.start_method == "spawn"
    assert "fork server" in (proc.fork_problem or "")
    assert outcome.returncode == 2


def test_server_leaves_on_its_own_when_the_parent_closes_it(tmp_path: Path) -> None:
    """close() must reach the server even while the listener thread is blocked reading: else
    every run ended by waiting 2 s for a server that never saw the end of the stream, then
    killing it."""
    server = ForkServer(worker_env(), tmp_path / "server.log", "isolation-test").start()
    assert server.wait_ready()
    proc = server._proc
    assert proc is not None
    server.close()
    assert proc.returncode == 0  # it left by itself; the kill after the grace period gives -9


def test_a_forked_child_ends_on_sys_exit_as_an_interpreter_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(SystemExit()) == 0 and exit_code(SystemExit(None)) == 0
    assert exit_code(SystemExit(3)) == 3
    assert capsys.readouterr().err == ""
    assert exit_code(SystemExit("the chief gave up: no peers")) == 1
    assert capsys.readouterr().err == "the chief gave up: no peers\n"
