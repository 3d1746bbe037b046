"""GPU planning on made-up hosts, through `bench plan` (the function every launcher uses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.fingerprint import cuda_visible_gpus
from bench.launch.cluster_plan import plan_tasks
from bench.placement import Inventory, plan_variant
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import REPO, bench

CLUSTERS = REPO / "scenarios" / "clusters.toml"
MWMS_2x2 = "multi_worker_mirrored-w2x2-ctl-float32-gb256"
MWMS_2x1 = "multi_worker_mirrored-w2x1-ctl-float32-gb128"
PS = "parameter_server-ps1w2-ctl-float32-gb64"


def plan_json(*args: str) -> dict[str, list[dict[str, Any]]]:
    result = bench("plan", *args, "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    return {entry["variant"]: entry["processes"] for entry in json.loads(result.stdout)}


def visible(processes: list[dict[str, Any]], role: str) -> list[str | None]:
    return [p["env"].get("CUDA_VISIBLE_DEVICES") for p in processes if p["role"] == role]


@pytest.fixture(scope="module")
def eight() -> dict[str, list[dict[str, Any]]]:
    return plan_json(str(CLUSTERS), "--gpus", "8")


def test_multi_worker_workers_get_disjoint_gpus_on_8(eight: dict) -> None:
    assert visible(eight[MWMS_2x2], "worker") == ["0,1", "2,3"]
    assert visible(eight[MWMS_2x1], "worker") == ["0", "1"]
    assert [p["devices"] for p in eight[MWMS_2x2]] == [["gpu:0", "gpu:1"], ["gpu:2", "gpu:3"]]


def test_parameter_servers_and_the_coordinator_get_no_gpu(eight: dict) -> None:
    procs = eight[PS]
    assert [(p["role"], p["index"]) for p in procs] == [("chief", 0), ("worker", 0),
                                                       ("worker", 1), ("ps", 0)]
    assert visible(procs, "ps") == [""] and visible(procs, "chief") == [""]
    assert visible(procs, "worker") == ["0", "1"]
    # the coordinator writes the record: it is told what the computing tasks run on
    assert {p["env"]["BENCH_CLUSTER_COMPUTES_ON"] for p in procs} == {"gpu"}


def test_tf_config_names_each_task_and_leaves_ports_out(eight: dict) -> None:
    for proc in eight[PS]:
        config = json.loads(proc["env"]["TF_CONFIG"])
        assert config["task"] == {"type": proc["role"], "index": proc["index"]}
        assert config["cluster"]["worker"] == ["127.0.0.1:<port>"] * 2
    assert "TF_CONFIG" not in eight["default-r1-ctl-float32-gb64"][0]["env"]


def test_single_process_variant_gets_only_its_replicas(eight: dict) -> None:
    assert visible(eight["default-r1-ctl-float32-gb64"], "main") == ["0"]


def test_a_preset_cuda_visible_devices_is_respected() -> None:
    plans = plan_json(str(CLUSTERS), "--gpus", "8", "--cuda-visible-devices", "6,2,5,7")
    assert visible(plans[MWMS_2x2], "worker") == ["6,2", "5,7"]
    assert visible(plans[PS], "worker") == ["6", "2"]


def test_two_gpus_two_workers_of_two_share_them_as_logical_gpus() -> None:
    plans = plan_json(str(CLUSTERS), "--gpus", "2", "--gpu-memory-mb", "16000")
    workers = [p for p in plans[MWMS_2x2] if p["role"] == "worker"]
    assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in workers] == ["0", "1"]
    assert [w["devices"] for w in workers] == [["gpu:0 (2 logical)"], ["gpu:1 (2 logical)"]]
    # two logical GPUs in one process, each with 90% of 16 GB / 2
    assert workers[0]["env"]["BENCH_LOGICAL_GPU_MEMORY_MB"] == "7200"
    assert visible(plans[MWMS_2x1], "worker") == ["0", "1"]  # enough for disjoint


def test_one_gpu_splits_into_logical_gpus_and_cluster_workers_share_it() -> None:
    plans = plan_json(str(CLUSTERS), "--gpus", "1", "--gpu-memory-mb", "8000")
    workers = [p for p in plans[MWMS_2x1] if p["role"] == "worker"]
    assert visible(plans[MWMS_2x1], "worker") == ["0", "0"]
    assert all(w["env"]["BENCH_GPU_SHARED"] == "1" for w in workers)
    assert workers[0]["env"]["BENCH_LOGICAL_GPU_MEMORY_MB"] == "3600"  # 90% of 8 GB, 2 processes


def test_no_gpu_host_sets_no_cuda_variable() -> None:
    plans = plan_json(str(CLUSTERS), "--gpus", "0")
    assert all("CUDA_VISIBLE_DEVICES" not in p["env"] for procs in plans.values() for p in procs)
    assert plans[MWMS_2x2][0]["devices"] == ["cpu (2 logical)"]
    assert {p["env"]["BENCH_CLUSTER_COMPUTES_ON"] for p in plans[PS]} == {"cpu"}


def _variant(strategy: dict[str, Any], devices: str = "auto", **train: Any) -> Any:
    doc = {"scenario": {"name": "p"}, "batch": {"rule": "weak", "per_replica": 8},
           "train": {"api": "ctl", **train}, "strategies": [{**strategy, "devices": devices}]}
    (variant,) = expand(parse_scenario(doc))
    return variant


def test_devices_cpu_hides_the_gpus() -> None:
    (main,) = plan_variant(_variant({"name": "mirrored", "replicas": 2}, "cpu"), Inventory.fake(4))
    assert main.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert main.devices == ("cpu (2 logical)",)


def test_one_gpu_host_splits_a_mirrored_variant() -> None:
    (main,) = plan_variant(_variant({"name": "mirrored", "replicas": 4}),
                           Inventory.fake(1, memory_mb=10000))
    assert main.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert main.devices == ("gpu:0 (4 logical)",)
    assert main.env["BENCH_LOGICAL_GPU_MEMORY_MB"] == "2250"


def test_gpu_thread_mode_reaches_gpu_processes_only() -> None:
    variant = _variant({"name": "parameter_server", "workers": 2, "ps": 1},
                       gpu_thread_mode="gpu_private")
    plans = plan_variant(variant, Inventory.fake(2))
    assert [p.env.get("TF_GPU_THREAD_MODE") for p in plans] == [None, "gpu_private",
                                                              "gpu_private", None]
    assert len(plans) == len(plan_tasks(variant))


def test_the_launch_addresses_go_into_tf_config() -> None:
    variant = _variant({"name": "multi_worker_mirrored", "workers": 2})
    plans = plan_variant(variant, Inventory.fake(0), ["127.0.0.1:1111", "127.0.0.1:2222"])
    assert json.loads(plans[1].env["TF_CONFIG"])["cluster"] == {
        "worker": ["127.0.0.1:1111", "127.0.0.1:2222"]}


@pytest.mark.parametrize(("value", "kept"), [("", []), ("-1", []), ("1,0", ["1", "0"]),
                                             ("0,9,1", ["0"]), ("1,1", ["1"]),
                                             ("GPU-abc,0", ["GPU-abc", "0"]),
                                             ("GPU-abc,1", ["GPU-abc"])])  # a repeat, by UUID
def test_cuda_visible_devices_is_read_as_cuda_reads_it(value: str, kept: list[str]) -> None:
    host = [{"index": i, "uuid": uuid} for i, uuid in enumerate(["GPU-def", "GPU-abc", "GPU-123"])]
    assert [token for token, _ in cuda_visible_gpus(host, value)] == kept


@pytest.mark.parametrize("args", [("--gpus", "-1"), ("--gpus", "100000")])
def test_absurd_gpu_counts_are_one_line_errors(args: tuple[str, ...], tmp_path: Path) -> None:
    result = bench("plan", str(CLUSTERS), *args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: --gpus") and len(
        result.stderr.strip().splitlines()) == 1
