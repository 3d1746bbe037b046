"""MultiWorkerMirrored, ParameterServer and TPU through the real `bench run`, faults, and tasks
started the way cluster managers start them (TF_CONFIG per process; SLURM variables). The cluster
variants' checks read the shipped scenarios/clusters.toml run (`clusters_run`, tests/conftest.py),
which the shipped-scenario test reads too."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench import fingerprint
from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR
from bench.launch import netns
from bench.timing import MAD_TO_SIGMA
from tests.browser import IN_CI
from tests.conftest import (
    FASHION_MNIST_CTL,
    NEEDS_NETNS,
    REPO,
    BenchRun,
    bench_run,
    leftover_processes,
    write_scenario,
)
from tests.early import EarlyContext, early_fixture

pytestmark = [pytest.mark.slow, NEEDS_NETNS, pytest.mark.usefixtures("netns_required")]

# How a training task that wrote its record ends: held (ChildEnv.held_after_record) until its
# supervisor ends the cluster once every record is in, so no task leaves while a peer still runs
# a collective with it. A task that ended by itself (0) could have left one in its peer's way; one
# SIGKILLed had outlived its SIGTERM (TensorFlow's coordination service takes the signal), so the
# supervisor waited out a grace period for nothing.
TASK_DONE = -signal.SIGTERM


# The ParameterServer variable partitioner: the shipped clusters scenario has none.
SHARDED = """
[train]
api = "ctl"

[measure]
warmup_steps = 2
steps = 8
repeats = 1
trace_steps = 0
timeout_s = 120

[[strategies]]
name = "parameter_server"
ps = 2
workers = 1
partitioner = "fixed"
"""


def test_cluster_variants_run_or_skip_with_reasons(clusters_run: BenchRun) -> None:
    assert clusters_run.proc.returncode == 0, clusters_run.proc.stdout + clusters_run.proc.stderr
    status = {r["variant_id"]: (r["status"], r["reason"]) for r in clusters_run.records}
    for vid in ("multi_worker_mirrored-w2x1-ctl-float32-gb128",
                "multi_worker_mirrored-w2x2-ctl-float32-gb256",
                "parameter_server-ps1w2-ctl-float32-gb64"):
        assert status[vid][0] == "ok", status[vid]
    assert status["multi_worker_mirrored-w2x1-fit-float32-gb128"][0] == "skipped"
    assert "reduce_per_replica" in status["multi_worker_mirrored-w2x1-fit-float32-gb128"][1]
    assert "create_per_worker_dataset" in status["parameter_server-ps1w2-fit-float32-gb64"][1]
    for api in ("ctl", "fit"):
        tpu = status[f"tpu-r1-{api}-float32-gb64"]
        assert tpu[0] == "skipped" and "TPUClusterResolver" in tpu[1]


def test_sharded_parameter_server_variables_are_a_recorded_skip(tmp_path: Path) -> None:
    run = bench_run(write_scenario(tmp_path, SHARDED, name="sharded"), tmp_path / "results",
                    "--no-control")
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    (rec,) = run.records
    assert rec["variant_id"] == "parameter_server-ps2w1-fixed-ctl-float32-gb16"
    assert rec["status"] == "skipped" and "ShardedVariable" in rec["reason"], rec["reason"]
    assert run.run_dir is not None and leftover_processes(str(run.run_dir)) == []


def test_multi_worker_records_global_and_per_worker_figures(clusters_run: BenchRun) -> None:
    for vid, planned in (("multi_worker_mirrored-w2x1-ctl-float32-gb128", 2),
                         ("multi_worker_mirrored-w2x2-ctl-float32-gb256", 4)):
        rec = clusters_run.by_id()[vid]
        assert rec["strategy_info"]["class"] == "CollectiveAllReduceStrategy"
        assert rec["strategy_info"]["collective_implementation"] == "AUTO"
        assert rec["variant"]["replicas"] == planned
        # On CPU each worker contributes CPU:0 only: replicas = workers, and the record says so.
        assert rec["effective"] == {"replicas": 2, "per_replica_batch": 64, "global_batch": 128}
        assert rec["throughput"]["median"] == pytest.approx(128 / rec["step_time"]["median"])
        step = rec["step_time"]
        assert rec["throughput"]["spread_pct"] == pytest.approx(
            100 * MAD_TO_SIGMA * step["mad"] / step["median"])  # the robust CV of step time
        tasks = rec["cluster"]["tasks"]
        assert [t["task"] for t in tasks] == ["worker-0", "worker-1"]
        assert all(t["status"] == "ok" and t["step_time"]["n"] == 16 for t in tasks)
        assert all(t["address"].startswith("127.0.0.1:") for t in tasks)
        # the chief traces into its own logdir; the other worker runs the traced steps
        # unprofiled, since TensorFlow's profiler crashes it as it stops
        traces = Path(rec["trace"]["dir"]).parent
        assert rec["trace"]["dir"] == str(traces / "worker-0")
        assert list((traces / "worker-0").glob("plugins/profile/*/*.xplane.pb"))
        assert not list(traces.glob("worker-1/plugins/profile/*/*.xplane.pb"))
        assert [t["task"] for t in tasks if t.get("trace_analysis")] == ["worker-0"]
        assert any(n.startswith("only the chief was traced: ") for n in rec["notes"]), rec["notes"]
        assert rec["cluster"]["network"] == "isolated"
        # no import of TensorFlow per cluster: the supervisor is forked from the run's fork
        # server and forks its tasks' server from itself, which forks every task
        assert rec["launch"]["start_method"] == "forkserver", rec["launch"]
        assert rec["cluster"]["task_server"] == "fork"
        assert [t["start_method"] for t in tasks] == ["forkserver", "forkserver"]
        # every task that wrote its record was held until every record was in
        assert all(t["exit_code"] == TASK_DONE for t in tasks), tasks
        assert rec["task"] == {"type": "worker", "index": 0}
        assert rec["loss"]["final"] < rec["loss"]["initial"]
    assert "planned 4 replicas, the strategy has 2" in " ".join(
        clusters_run.by_id()["multi_worker_mirrored-w2x2-ctl-float32-gb256"]["notes"])


def test_multi_worker_tasks_do_not_keep_a_thread_per_collective(clusters_run: BenchRun) -> None:
    """With a collective timeout TensorFlow starts a watchdog thread for every collective it
    runs, which sleeps out the whole timeout: this run's workers then held some 350 threads
    against some 120 without (a default-sized run's 1,560), a thread started in every step.
    TensorFlow's own pools grow with the cores, the bound with them."""
    bound = 100 + 50 * (os.cpu_count() or 1)
    for vid in ("multi_worker_mirrored-w2x1-ctl-float32-gb128",
                "multi_worker_mirrored-w2x2-ctl-float32-gb256"):
        tasks = clusters_run.by_id()[vid]["cluster"]["tasks"]
        threads = {t["task"]: t["threads"] for t in tasks}
        assert all(isinstance(n, int) and 0 < n < bound for n in threads.values()), (threads, bound)


def test_the_report_and_tensorboard_show_each_worker(clusters_run: BenchRun) -> None:
    """The run's report draws every MultiWorker worker's median step (the straggler view) and
    lists them per variant; the variant's TensorBoard events sit beside its workers' profiles."""
    assert clusters_run.run_dir is not None
    name = clusters_run.run_dir.name
    html = (clusters_run.run_dir.parent.parent / "reports" / name / f"run-{name}.html").read_text()
    figure = re.search(r'data-figure="workers">(.*?)</script>', html, re.S)
    assert figure, "no workers chart"
    bars = json.loads(figure.group(1))["data"][0]
    assert 'id="section-worker-tables"' in html
    for vid in ("multi_worker_mirrored-w2x1-ctl-float32-gb128",
                "multi_worker_mirrored-w2x2-ctl-float32-gb256"):
        rec = clusters_run.by_id()[vid]
        for task in rec["cluster"]["tasks"]:
            label = f"{vid} · {task['task']}"
            assert bars["x"][bars["y"].index(label)] == pytest.approx(  # charts keep 4 digits
                task["step_time"]["median"] * 1e3, rel=1e-3)
        folder = clusters_run.run_dir / "traces" / vid
        assert len(list(folder.glob("events.out.tfevents.*"))) == 1
        assert list(folder.glob("worker-*/plugins/profile"))


def test_parameter_server_records_every_task(clusters_run: BenchRun) -> None:
    rec = clusters_run.by_id()["parameter_server-ps1w2-ctl-float32-gb64"]
    assert rec["strategy_info"]["class"].startswith("ParameterServerStrategy")
    assert rec["strategy_info"]["num_replicas_in_sync"] == 1
    assert rec["task"] == {"type": "chief", "index": 0}
    # the coordinator computes nothing: the record says what the workers were planned to use
    assert rec["devices"]["cluster_computes_on"] == ("gpu" if fingerprint.gpus() else "cpu")
    tasks = {t["task"]: t for t in rec["cluster"]["tasks"]}
    assert set(tasks) == {"chief-0", "worker-0", "worker-1", "ps-0"}
    for name in ("worker-0", "worker-1", "ps-0"):
        assert tasks[name]["cpu_s"] > 0 and tasks[name]["peak_rss_mb"] > 0
    assert tasks["chief-0"]["exit_code"] == TASK_DONE, tasks["chief-0"]
    assert rec["throughput"]["median"] == pytest.approx(
        rec["effective"]["global_batch"] / rec["step_time"]["median"])
    assert any("blocks of" in note for note in rec["notes"])
    assert rec["loss"]["final"] < rec["loss"]["initial"]


def test_clusters_take_part_in_the_interleaved_rounds(clusters_run: BenchRun) -> None:
    """Each cluster is one participant: all its training tasks wait at their gates together and
    run each timed window together, while the other clusters idle."""
    ok = [r for r in clusters_run.records if r["status"] == "ok"]
    assert len(ok) == 5  # the default fit and ctl, both MultiWorker CTL variants, ps1w2 CTL
    batch = ok[0]["interleave"]["batch"]
    assert {r["variant_id"] for r in ok} <= set(batch)
    for rec in ok:
        assert rec["interleave"]["batch"] == batch
        assert rec["interleave"]["rounds"] >= 2 and len(rec["interleave"]["positions"]) >= 2
        assert rec["measurement"]["interleaved"] is True
        assert len(rec["samples"]["timed"]) == 2  # one window per round
        assert rec["measurement"]["gate_wait_s"] > 0  # it idled while others ran
    mwm = clusters_run.by_id()["multi_worker_mirrored-w2x1-ctl-float32-gb128"]
    assert all(t["step_time"]["n"] == 16 for t in mwm["cluster"]["tasks"])  # both workers, all
    assert clusters_run.run_dir is not None
    assert not list((clusters_run.run_dir / "logs").glob("*.gate"))  # every FIFO removed


def test_no_task_outlives_the_run(clusters_run: BenchRun) -> None:
    assert clusters_run.run_dir is not None
    assert leftover_processes(str(clusters_run.run_dir)) == []


# [target] across a cluster's tasks, on real Fashion-MNIST: a target the seed MLP reaches after a
# few evaluations, so the workers take the chief's verdict more than once; tf-keras `fit` runs
# its evaluation inside the strategy's scope (its callbacks run there).
TARGET_EVERY = 3840  # 30 steps of 128 (MultiWorkerMirrored x2), 60 of 64 (ParameterServer)
CLUSTER_TARGET = f"""
{FASHION_MNIST_CTL}
[measure]
timeout_s = 120
control = false

[target]
value = 0.78
every_examples = {TARGET_EVERY}
max_examples = 76800
max_seconds = 30

[[strategies]]
name = "multi_worker_mirrored"
workers = 2

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
api = "fit"
keras = "tf_keras"

[[strategies]]
name = "parameter_server"
ps = 1
workers = 2
"""
CLUSTER_TARGETS = ("multi_worker_mirrored-w2x1-ctl-float32-gb128",
                   "multi_worker_mirrored-w2x1-tf_keras-fit-float32-gb128",
                   "parameter_server-ps1w2-ctl-float32-gb64")


def start_cluster_target(context: EarlyContext) -> BenchRun:
    directory = context.tmp_path_factory.mktemp("cluster_target")
    return bench_run(write_scenario(directory, CLUSTER_TARGET, name="cluster_target"),
                     directory / "results", "--no-report")


cluster_target_run = early_fixture("cluster_target", start_cluster_target)


def test_cluster_strategies_train_to_target_judged_on_the_chief(cluster_target_run: BenchRun
                                                                 ) -> None:
    if not DEBIAN_FASHION_MNIST_DIR.exists():
        if IN_CI:
            pytest.fail(f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing", pytrace=False)
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    run = cluster_target_run
    assert run.proc.returncode == 0, run.proc.stdout[-3000:] + run.proc.stderr[-3000:]
    records = run.by_id()
    assert sorted(records) == sorted(CLUSTER_TARGETS)
    for vid in CLUSTER_TARGETS:
        rec = records[vid]
        target = rec["target"]
        assert rec["status"] == "ok" and target["status"] == "ok", (vid, target)
        (seed,) = target["seeds"]
        assert seed["status"] == "reached" and seed["examples"] > 0, (vid, seed)
        examples = [p["examples"] for p in seed["curve"]]
        assert examples == [TARGET_EVERY * (i + 1) for i in range(len(examples))], vid
        assert len(examples) >= 2 and seed["examples"] == examples[-1], (vid, seed["curve"])
        assert seed["curve"][-1]["value"] >= 0.78 > max(p["value"] for p in seed["curve"][:-1])
        assert seed["eval_s"] > 0 and 0 < seed["seconds"] < seed["wall_s"]
        assert target["eval_source"].endswith("(test, 10000 examples)")
        assert target["projected_s"] == pytest.approx(
            target["examples"]["median"] / rec["throughput"]["headline"])
        assert run.run_dir is not None
        logs = run.run_dir / "logs"
        if vid.startswith("multi_worker_mirrored"):
            # the other worker stepped with the chief to its verdict, no step more or fewer
            follower = (logs / f"{vid}.worker-1.log").read_text()
            assert f"target seed 0: trained {seed['examples']} examples in" in follower, vid
    assert leftover_processes(str(run.run_dir)) == []


# Three ways a worker fails, each a MultiWorkerMirrored variant of one run (its model's builder
# makes worker 1 fail), and a default variant the run must go on to; by builder, what the
# variant's reason must say.
FAULTS = {
    "kill_worker_1": "worker-1 (pid",  # the supervisor sees the exit first
    # the chief's collective names task:1, and its record wins over its exit code 1
    "stop_worker_1": "stopped sending heartbeats",
    "crash_worker_1": "SIGBUS (crashed on all 3 attempts)",  # a fresh cluster each time
}
FAULT = """
[train]
api = "ctl"

[measure]
warmup_steps = 2
steps = 2000
repeats = 1
timeout_s = 60
""" + "".join(f"""
[[strategies]]
name = "multi_worker_mirrored"
workers = 2
model = {{ name = "tests.fixtures.faulty:{builder}" }}
""" for builder in FAULTS) + """
[[strategies]]
name = "default"
"""


def start_failing_workers(context: EarlyContext) -> BenchRun:
    directory = context.tmp_path_factory.mktemp("failing_workers")
    return bench_run(write_scenario(directory, FAULT, name="failing_workers"),
                     directory / "results", "--no-control")


failing_workers_run = early_fixture("failing_workers", start_failing_workers)


@pytest.mark.parametrize(("builder", "expected"), FAULTS.items())
def test_a_failing_worker_fails_the_variant_fast_and_the_run_goes_on(
        failing_workers_run: BenchRun, builder: str, expected: str) -> None:
    run = failing_workers_run
    assert run.proc.returncode == 1, run.proc.stdout + run.proc.stderr
    records = run.by_id()
    mw = records[f"multi_worker_mirrored-w2x1-{builder}-ctl-float32-gb32"]
    assert mw["status"] == "failed"
    assert expected in mw["reason"]
    assert "timed out" not in mw["reason"]  # detected, not merely outlasted
    assert mw["wall_s"] < 60 + 10
    if builder == "kill_worker_1":
        assert "SIGKILL" in mw["reason"]
    elif builder == "stop_worker_1":
        assert "task:1" in mw["reason"]
        assert mw["cluster"]["tasks"][0]["exit_code"] == 1  # the record said why, not the code
    else:  # every attempt's crash, and the last attempt's tasks, are in the record
        assert [c.split(" (pid")[0] for c in mw["cluster"]["native_crashes"]] == ["worker-1"] * 3
        assert mw["cluster"]["attempts"] == 3 and mw["error"]["type"] == "NativeCrash"
        assert mw["cluster"]["tasks"][1]["exit_code"] == -signal.SIGBUS
        assert mw["cluster"]["restart_s"] > 0  # two attempts crashed before the last one
    assert records["default-r1-ctl-float32-gb16"]["status"] == "ok"  # the run went on
    assert leftover_processes(str(run.run_dir)) == []


def _tasks_like_a_cluster_manager(tmp_path: Path, scenario: Path, variant: str,
                                  envs: list[dict[str, str]], extra: list[str]) -> list[int]:
    results = tmp_path / "results"
    spec = {"timeout_s": 150, "tasks": [
        {"argv": [sys.executable, "-m", "bench", "worker", str(scenario), "--variant", variant,
                  "--results-dir", str(results), *extra],
         "env": {"TF_CPP_MIN_LOG_LEVEL": "2", **env}, "log": str(tmp_path / f"task{i}.log")}
        for i, env in enumerate(envs)]}
    spec_path = tmp_path / "cluster.json"
    spec_path.write_text(json.dumps(spec))
    out = subprocess.run(netns.isolated_command([sys.executable, "-m",
                                                 "tests.fixtures.local_cluster", str(spec_path)]),
                         capture_output=True, text=True, timeout=200, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


EXTERNAL = """
[train]
api = "ctl"

[[strategies]]
name = "multi_worker_mirrored"
workers = 2
"""


def _only_record(results: Path) -> dict:
    (run_dir,) = list(results.iterdir())
    (line,) = (run_dir / "records.jsonl").read_text().splitlines()
    return json.loads(line)


def test_tasks_started_with_their_own_tf_config(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, EXTERNAL, name="external")
    cluster = {"worker": ["127.0.0.1:23450", "127.0.0.1:23451"]}
    envs = [{"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
            for i in range(2)]
    codes = _tasks_like_a_cluster_manager(tmp_path, scenario,
                                          "multi_worker_mirrored-w2x1-ctl-float32-gb32", envs, [])
    assert codes == [0, 0], [(tmp_path / f"task{i}.log").read_text()[-2000:] for i in range(2)]
    rec = _only_record(tmp_path / "results")  # only the chief wrote a run directory
    assert rec["status"] == "ok", rec["reason"]
    assert rec["task"] == {"type": "worker", "index": 0}
    assert rec["strategy_info"]["num_replicas_in_sync"] == 2
    assert rec["cluster"]["spec"] == cluster


def test_tasks_started_by_slurm(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, EXTERNAL, name="slurm")
    slurm = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost",
             "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NTASKS": "2"}
    envs = [{**slurm, "SLURM_PROCID": str(i)} for i in range(2)]
    codes = _tasks_like_a_cluster_manager(
        tmp_path, scenario, "multi_worker_mirrored-w2x1-ctl-float32-gb32", envs,
        ["--resolver", "slurm", "--port-base", "24560"])
    assert codes == [0, 0], [(tmp_path / f"task{i}.log").read_text()[-2000:] for i in range(2)]
    rec = _only_record(tmp_path / "results")
    assert rec["status"] == "ok", rec["reason"]
    assert rec["cluster"]["resolver"] == "slurm"
    assert rec["cluster"]["spec"] == {"worker": ["localhost:24560", "localhost:24561"]}


LISTEN_ON_EVERY_INTERFACE = """
import socket, sys
server = socket.create_server(("0.0.0.0", 0))
port = server.getsockname()[1]
socket.create_connection(("127.0.0.1", port), timeout=5).close()  # its loopback is up
print(socket.if_nameindex(), port, flush=True)
sys.stdin.read()  # listening until the test has tried from outside
"""


def test_worker_processes_never_listen_outside_their_namespace() -> None:
    # The isolation itself: a fresh namespace has only loopback, and a server listening on every
    # interface in it (as TensorFlow's do) cannot be reached from the host.
    inside = subprocess.Popen(netns.isolated_command([sys.executable, "-c",
                                                      LISTEN_ON_EVERY_INTERFACE]),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert inside.stdout is not None
        line = inside.stdout.readline()
        assert line, inside.communicate(timeout=30)[1]
        interfaces, port = line.rsplit(" ", 1)
        assert [name for _, name in eval(interfaces)] == ["lo"]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", int(port)), timeout=5)
    finally:
        inside.communicate(input="", timeout=30)
    assert inside.returncode == 0
    assert os.environ.get("TF_CONFIG") is None  # nothing leaked into the test process


def test_a_taken_port_is_picked_again(tmp_path: Path) -> None:
    from bench import results
    from bench.launch.local import temp_dir
    from bench.scenario.loading import load_variants

    scenario = write_scenario(tmp_path, EXTERNAL.replace('api = "ctl"', 'api = "ctl"\n'),
                              name="ports")
    _, variants = load_variants(scenario)
    run_dir = results.create_run_dir(tmp_path / "results", "ports")
    temp_dir(run_dir).mkdir()  # the tasks' TMPDIR, as the runner makes it (else they use /tmp)
    results.write_json(run_dir / results.VARIANTS_FILE,
                       [v.model_dump(mode="json", by_alias=True) for v in variants])
    out = subprocess.run(netns.isolated_command([
        sys.executable, "-m", "tests.fixtures.port_conflict", str(run_dir / "variants.json"),
        variants[0].id, str(run_dir / "logs" / "record.json")]),
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result["reason"]
    # the taken port cost the first restart; a later one (a native MultiWorker crash on this
    # busy host, see cluster_tasks.NativeCrash) is recorded with its reason too
    assert result["attempts"] == 1 + len(result["restarts"]) >= 2, result
    assert result["restart_s"] > 0, result  # the failed attempts' time, a phase of its own
    assert f"could not listen on 127.0.0.1:{result['taken']}" in result["restarts"][0], result
    assert f"127.0.0.1:{result['taken']}" not in result["spec"]["worker"]
