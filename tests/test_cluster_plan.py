"""Cluster roles, TF_CONFIG, scenario rules for cluster strategies and TFJob manifests (fast)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from bench.errors import ScenarioError
from bench.launch.cluster_plan import (
    chief_and_index,
    chief_of,
    cluster_spec,
    is_chief,
    is_chief_config,
    plan_tasks,
    read_tf_config,
    tf_config,
)
from bench.launch.external import hide_gpus_unless_computing
from bench.placement import Inventory, plan_variant, task_computes
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import bench

DOC = {
    "scenario": {"name": "c"},
    "batch": {"rule": "weak", "per_replica": 16},
    "train": {"api": "ctl"},
    "strategies": [
        {"name": "multi_worker_mirrored", "workers": [1, 2], "devices_per_worker": [1, 2]},
        {"name": "parameter_server", "ps": 2, "workers": 3},
    ],
}


def variants() -> dict:
    return {v.id: v for v in expand(parse_scenario(DOC))}


def test_cluster_variants_expand_with_their_shape() -> None:
    vs = variants()
    assert set(vs) == {
        "multi_worker_mirrored-w1x1-ctl-float32-gb16", "multi_worker_mirrored-w1x2-ctl-float32-gb32",
        "multi_worker_mirrored-w2x1-ctl-float32-gb32", "multi_worker_mirrored-w2x2-ctl-float32-gb64",
        "parameter_server-ps2w3-ctl-float32-gb16"}
    mw = vs["multi_worker_mirrored-w2x2-ctl-float32-gb64"]
    assert (mw.workers, mw.devices_per_worker, mw.replicas, mw.is_cluster) == (2, 2, 4, True)
    ps = vs["parameter_server-ps2w3-ctl-float32-gb16"]
    assert (ps.ps, ps.workers, ps.replicas) == (2, 3, 1)


@pytest.mark.parametrize(("strategy", "message"), [
    ({"name": "multi_worker_mirrored", "replicas": 2}, "takes 'workers'"),
    ({"name": "mirrored", "workers": 2}, "'workers' applies to strategy"),
    ({"name": "multi_worker_mirrored", "ps": 1}, "'ps' applies to strategy 'parameter_server'"),
    ({"name": "mirrored", "collective": "ring"}, "'collective' applies"),
    ({"name": "default", "tpu": "x"}, "'tpu' applies to strategy 'tpu' only"),
])
def test_cluster_options_are_checked(strategy: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario({**DOC, "strategies": [strategy]}, "f.toml")


def test_roles_and_tf_config() -> None:
    vs = variants()
    mw_tasks = plan_tasks(vs["multi_worker_mirrored-w2x1-ctl-float32-gb32"])
    assert [(t.type, t.index, t.trains) for t in mw_tasks] == [("worker", 0, True),
                                                                ("worker", 1, True)]
    assert chief_of(mw_tasks).name == "worker-0"
    ps_tasks = plan_tasks(vs["parameter_server-ps2w3-ctl-float32-gb16"])
    assert [t.name for t in ps_tasks] == ["chief-0", "worker-0", "worker-1", "worker-2", "ps-0",
                                          "ps-1"]
    assert [t.trains for t in ps_tasks] == [True, False, False, False, False, False]
    addresses = [f"127.0.0.1:{9000 + i}" for i in range(len(ps_tasks))]
    spec = cluster_spec(ps_tasks, addresses)
    assert spec == {"chief": ["127.0.0.1:9000"], "worker": addresses[1:4], "ps": addresses[4:]}
    config = json.loads(tf_config(spec, ps_tasks[2]))
    assert config["task"] == {"type": "worker", "index": 1}
    assert is_chief_config(json.loads(tf_config(spec, ps_tasks[0])))
    assert not is_chief_config(config)
    mw_spec = cluster_spec(mw_tasks, addresses[:2])
    assert is_chief_config(json.loads(tf_config(mw_spec, mw_tasks[0])))


@pytest.mark.parametrize("variant_id", ["multi_worker_mirrored-w2x2-ctl-float32-gb64",
                                        "parameter_server-ps2w3-ctl-float32-gb16"])
def test_every_part_names_the_same_chief(variant_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher (chief_of), `bench worker` (is_chief_config) and the checkpoint writer and the
    worker (chief_and_index of their TF_CONFIG) ask one rule; exactly one task is the chief."""
    tasks = plan_tasks(variants()[variant_id])
    spec = cluster_spec(tasks, [f"127.0.0.1:{9000 + i}" for i in range(len(tasks))])
    chief = chief_of(tasks)
    assert [t for t in tasks if is_chief_config(json.loads(tf_config(spec, t)))] == [chief]
    for task in tasks:
        monkeypatch.setenv("TF_CONFIG", tf_config(spec, task))
        assert chief_and_index(read_tf_config()) == (task == chief, task.index)
    monkeypatch.delenv("TF_CONFIG")
    assert chief_and_index(read_tf_config()) == (True, 0)  # no cluster: its own chief
    assert is_chief(None, 0, ()) and not is_chief_config({})


@pytest.mark.parametrize("variant_id", ["multi_worker_mirrored-w2x2-ctl-float32-gb64",
                                        "parameter_server-ps2w3-ctl-float32-gb16"])
def test_a_managed_task_keeps_gpus_exactly_where_the_plan_gives_some(
        variant_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench worker` under a cluster manager hides the GPUs of the tasks bench's own plan gives
    none (on a made-up 8-GPU host): the two ask one rule."""
    variant = variants()[variant_id]
    for process in plan_variant(variant, Inventory.fake(8)):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # what the manager gave the task
        hide_gpus_unless_computing(variant, process.role)
        planned = process.env["CUDA_VISIBLE_DEVICES"] != ""
        assert task_computes(variant, process.role) is planned, process
        assert (os.environ["CUDA_VISIBLE_DEVICES"] != "") is planned, process


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text("""
[scenario]
name = "c"
[batch]
per_replica = 16
[train]
api = "ctl"
[[strategies]]
name = "default"
[[strategies]]
name = "multi_worker_mirrored"
workers = 2
[[strategies]]
name = "parameter_server"
ps = 1
workers = 2
""")
    return path


def test_tfjob_manifest_parses_back_with_roles_counts_and_commands(tmp_path: Path) -> None:
    scenario = _scenario_file(tmp_path)
    proc = bench("cluster", "manifest", str(scenario), "--format", "tfjob", "--image",
                 "registry.example/bench:1", "--scenario-path", "/app/c.toml")
    assert proc.returncode == 0, proc.stderr
    docs = list(yaml.safe_load_all(proc.stdout))
    assert [d["metadata"]["name"] for d in docs] == [
        "bench-multi-worker-mirrored-w2x1-ctl-float32-gb32",
        "bench-parameter-server-ps1w2-ctl-float32-gb16"]
    mw, ps = (d["spec"]["tfReplicaSpecs"] for d in docs)
    assert {k: v["replicas"] for k, v in mw.items()} == {"Worker": 2}
    assert {k: v["replicas"] for k, v in ps.items()} == {"Chief": 1, "Worker": 2, "PS": 1}
    for doc, specs in zip(docs, (mw, ps), strict=True):
        assert doc["apiVersion"] == "kubeflow.org/v1" and doc["kind"] == "TFJob"
        for replica in specs.values():
            (container,) = replica["template"]["spec"]["containers"]
            assert container["name"] == "tensorflow"
            assert container["image"] == "registry.example/bench:1"
            cmd = container["command"]
            assert cmd[:3] == ["bench", "worker", "/app/c.toml"]
            assert cmd[cmd.index("--variant") + 1] == doc["metadata"]["annotations"]["bench/variant"]
    assert "&id" not in proc.stdout  # plain YAML, no aliases


def test_manifest_refuses_unknown_variants_and_overwrites(tmp_path: Path) -> None:
    scenario = _scenario_file(tmp_path)
    proc = bench("cluster", "manifest", str(scenario), "--image", "x", "--variant", "nope")
    assert proc.returncode == 2 and "nope" in proc.stderr and "Traceback" not in proc.stderr
    out = tmp_path / "job.yaml"
    out.write_text("keep me")
    proc = bench("cluster", "manifest", str(scenario), "--image", "x", "--out", str(out))
    assert proc.returncode == 2 and "not overwriting" in proc.stderr
    assert out.read_text() == "keep me"


def test_worker_without_tf_config_is_a_clear_error(tmp_path: Path) -> None:
    scenario = _scenario_file(tmp_path)
    proc = bench("worker", str(scenario), "--variant", "multi_worker_mirrored-w2x1-ctl-float32-gb32")
    assert proc.returncode == 2
    assert "TF_CONFIG is not set" in proc.stderr and "Traceback" not in proc.stderr


def test_a_coordinator_waits_for_its_servers_to_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC refused once tries again only after about a second: the ParameterServer coordinator
    connects once every other task listens. Its own address is not waited for."""
    import tensorflow as tf

    from bench.training.strategies import await_peers

    own, late = socket.socket(), socket.socket()  # bound, not listening
    own.bind(("127.0.0.1", 0))
    late.bind(("127.0.0.1", 0))
    ready = socket.create_server(("127.0.0.1", 0))
    listened_at: list[float] = []

    def listen() -> None:
        late.listen()
        listened_at.append(time.monotonic())

    cluster = {"chief": [f"127.0.0.1:{own.getsockname()[1]}"],
               "worker": [f"127.0.0.1:{ready.getsockname()[1]}"],
               "ps": [f"127.0.0.1:{late.getsockname()[1]}"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                "task": {"type": "chief", "index": 0}}))
    timer = threading.Timer(0.5, listen)
    started = time.monotonic()
    timer.start()
    try:
        await_peers(tf.distribute.cluster_resolver.TFConfigClusterResolver(), limit_s=60)
        returned_at = time.monotonic()
    finally:
        timer.join()
        for sock in (own, late, ready):
            sock.close()
    assert listened_at and listened_at[0] <= returned_at < started + 30
