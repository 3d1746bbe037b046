"""GPU facts: nvidia-smi parsing, its merge with TensorFlow's view, records, peak keys, ps tasks.

This machine has no GPU, so the parsing and merging are fed real hosts' nvidia-smi output, and
the end-to-end run happens on a made-up host: an `nvidia-smi` first on PATH answers for two T4s
this TensorFlow cannot use. The record must carry both with their facts, its peak must be the one
of the device the step ran on (seeded in the cache, so a hit is told from a measurement), and
which GPU processes grow their memory is checked on made-up inventories through the plan.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench import entrypoints, fingerprint
from bench.child_env import ChildEnv
from bench.fingerprint import GPU_FIELDS, merge_gpu_views, parse_nvidia_smi
from bench.launch.cluster_plan import Task
from bench.placement import (
    Inventory,
    gpus_per_process,
    plan_layout,
    plan_variant,
)
from bench.scenario.loading import load_variants
from bench.utilization.peak import MATMUL_N, peak_key
from tests.browser import IN_CI
from tests.conftest import REPO, BenchRun, run_in_fresh_dir

A100_HOST = """\
0, GPU-8f0e3c1a-5b7d-4e2f-9a61-0c3d2b1e4f50, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
1, GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c51, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
2, GPU-2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d52, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
3, GPU-3c4d5e6f-7a8b-4c9d-0e1f-2a3b4c5d6e53, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
4, GPU-4d5e6f7a-8b9c-4d0e-1f2a-3b4c5d6e7f54, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
5, GPU-5e6f7a8b-9c0d-4e1f-2a3b-4c5d6e7f8a55, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
6, GPU-6f7a8b9c-0d1e-4f2a-3b4c-5d6e7f8a9b56, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
7, GPU-7a8b9c0d-1e2f-4a3b-4c5d-6e7f8a9b0c57, NVIDIA A100-SXM4-80GB, 81920, 535.104.05, 8.0
"""
T4_PAIR = """\
0, GPU-d1c9a1f4-2c3e-7b5a-91e0-6f2b3a4c5d6e, Tesla T4, 15360, 525.85.12, 7.5
1, GPU-e2dab2a5-3d4f-8c6b-a2f1-7a3c4b5d6e7f, Tesla T4, 15360, 525.85.12, 7.5
"""
WORKSTATION = "0, GPU-5c1d9a3e-7f2b-4e61-a0c8-3b9d2e4f6a17, NVIDIA GeForce RTX 4090, 24564, " \
              "550.54.14, 8.9\n"
STRATEGIES = REPO / "scenarios" / "mnist_mirrored.toml"
CLUSTERS = REPO / "scenarios" / "clusters.toml"
MWMS_2x2 = "multi_worker_mirrored-w2x2-ctl-float32-gb256"
MWMS_2x1 = "multi_worker_mirrored-w2x1-ctl-float32-gb128"
PS = "parameter_server-ps1w2-ctl-float32-gb64"
OLD_DRIVER = "0, GPU-0b5e7c2d-8a1f-6e3b-c4d2-9f1a7e3b5c8d, Tesla V100-SXM2-16GB, 16160, 470.57.02\n"
OLD_DRIVER_REFUSAL = 'Field "compute_cap" is not a valid field to query.'
GARBAGE = """\
NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that \
the latest NVIDIA driver is installed and running.

No devices were found
index, uuid, name, memory.total [MiB], driver_version, compute_cap
Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error
"""


def test_an_eight_gpu_host_parses_into_typed_facts() -> None:
    gpus = parse_nvidia_smi(A100_HOST, GPU_FIELDS)
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0] == {"index": 0, "uuid": "GPU-8f0e3c1a-5b7d-4e2f-9a61-0c3d2b1e4f50",
                       "name": "NVIDIA A100-SXM4-80GB", "memory_mb": 81920,
                       "driver": "535.104.05", "compute_capability": "8.0"}
    assert len({g["uuid"] for g in gpus}) == 8


@pytest.mark.parametrize("text, count, name, memory, cap", [
    (WORKSTATION, 1, "NVIDIA GeForce RTX 4090", 24564, "8.9"),
    (T4_PAIR, 2, "Tesla T4", 15360, "7.5"),
])
def test_one_and_two_gpu_hosts(text: str, count: int, name: str, memory: int, cap: str) -> None:
    gpus = parse_nvidia_smi(text, GPU_FIELDS)
    assert len(gpus) == count
    assert {(g["name"], g["memory_mb"], g["compute_capability"]) for g in gpus} == {
        (name, memory, cap)}
    assert all(isinstance(g["index"], int) and isinstance(g["memory_mb"], int) for g in gpus)


def test_an_old_driver_answers_without_compute_capability() -> None:
    gpus = parse_nvidia_smi(OLD_DRIVER, GPU_FIELDS[:-1])
    assert gpus == [{"index": 0, "uuid": "GPU-0b5e7c2d-8a1f-6e3b-c4d2-9f1a7e3b5c8d",
                     "name": "Tesla V100-SXM2-16GB", "memory_mb": 16160, "driver": "470.57.02",
                     "compute_capability": None}]


def test_garbage_lines_are_skipped_and_unknown_values_are_none() -> None:
    assert parse_nvidia_smi(GARBAGE, GPU_FIELDS) == []
    assert parse_nvidia_smi(OLD_DRIVER_REFUSAL, GPU_FIELDS) == []
    mixed = GARBAGE + "0, GPU-9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d, NVIDIA A10G, [N/A], " \
                      "535.104.05, [N/A]\n" + T4_PAIR.splitlines()[1]
    gpus = parse_nvidia_smi(mixed, GPU_FIELDS)
    assert [(g["index"], g["name"]) for g in gpus] == [(0, "NVIDIA A10G"), (1, "Tesla T4")]
    assert gpus[0]["memory_mb"] is None and gpus[0]["compute_capability"] is None


def _fake_nvidia_smi(directory: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `nvidia-smi` executable first on PATH, answering as a real one would."""
    path = directory / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")


def test_gpus_retries_without_compute_cap_for_old_drivers(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, f"""case "$1" in
  *compute_cap*) echo '{OLD_DRIVER_REFUSAL}'; echo "Run 'nvidia-smi -h' for help."; exit 2;;
esac
[ "$2" = "--format=csv,noheader,nounits" ] || exit 3
printf '%s' '{OLD_DRIVER}'
""", monkeypatch)
    expected = parse_nvidia_smi(OLD_DRIVER, GPU_FIELDS[:-1])
    assert fingerprint.gpus() == expected
    assert fingerprint.environment()["gpus"] == expected  # and the run's fingerprint carries it


def test_gpus_of_a_current_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, f"printf '%s' '{A100_HOST}'\n", monkeypatch)
    assert fingerprint.gpus() == parse_nvidia_smi(A100_HOST, GPU_FIELDS)
    assert len(fingerprint.gpus()) == 8


@pytest.mark.parametrize("script", [
    "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; "
    "exit 9\n",
    "exec sleep 30\n",  # a hung driver: the timeout ends it
])
def test_a_failing_or_hanging_nvidia_smi_means_no_gpus(script: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, script, monkeypatch)
    start = time.monotonic()
    assert fingerprint.gpus(timeout_s=1.0) == []
    assert time.monotonic() - start < 10


def test_no_nvidia_smi_means_no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: nothing to run
    assert fingerprint.gpus() == []


def _tf_view(*names: str, cap: tuple[int, int] = (8, 0)) -> list[tuple[str, dict[str, Any]]]:
    return [(f"/physical_device:GPU:{i}", {"device_name": n, "compute_capability": cap})
            for i, n in enumerate(names)]


def test_merge_follows_cuda_visible_devices() -> None:
    host = parse_nvidia_smi(A100_HOST, GPU_FIELDS)
    merged = merge_gpu_views(host, _tf_view(*["NVIDIA A100-SXM4-80GB"] * 2), "4,5")
    assert [g["tf_device"] for g in merged] == [None] * 4 + [
        "/physical_device:GPU:0", "/physical_device:GPU:1"] + [None] * 2
    by_uuid = merge_gpu_views(host, _tf_view("NVIDIA A100-SXM4-80GB"), "GPU-7a8b9c0d")
    assert [g["index"] for g in by_uuid if g["tf_device"]] == [7]
    assert all(g["tf_device"] is None for g in merge_gpu_views(host, [], ""))


def test_merge_matches_models_when_cuda_puts_the_fastest_first() -> None:
    host = parse_nvidia_smi("0, GPU-aa, Tesla T4, 15360, 535.104.05, 7.5\n"
                            "1, GPU-bb, NVIDIA A100-PCIE-40GB, 40960, 535.104.05, 8.0\n",
                            GPU_FIELDS)
    merged = merge_gpu_views(host, _tf_view("NVIDIA A100-PCIE-40GB", "Tesla T4"), None)
    assert [(g["name"], g["tf_device"]) for g in merged] == [
        ("Tesla T4", "/physical_device:GPU:1"), ("NVIDIA A100-PCIE-40GB", "/physical_device:GPU:0")]


def test_merge_fills_what_one_side_lacks() -> None:
    old = merge_gpu_views(parse_nvidia_smi(OLD_DRIVER, GPU_FIELDS[:-1]),
                          _tf_view("Tesla V100-SXM2-16GB", cap=(7, 0)), None)
    assert old[0]["compute_capability"] == "7.0" and old[0]["driver"] == "470.57.02"
    no_smi = merge_gpu_views([], _tf_view("NVIDIA H100 80GB HBM3", cap=(9, 0)), None)
    assert no_smi == [{"index": None, "uuid": None, "name": "NVIDIA H100 80GB HBM3",
                       "memory_mb": None, "driver": None, "compute_capability": "9.0",
                       "tf_device": "/physical_device:GPU:0"}]


def test_peak_keys_tell_gpu_models_and_cpus_of_one_name_apart() -> None:
    a100 = peak_key("NVIDIA A100-SXM4-80GB", "gpu", "bfloat16", "2.21.0")
    h100 = peak_key("NVIDIA H100 80GB HBM3", "gpu", "bfloat16", "2.21.0")
    assert a100 != h100
    assert a100 == f"NVIDIA A100-SXM4-80GB|gpu|bfloat16|tf2.21.0|n{MATMUL_N}"
    # this machine's CPU: its name, the matmul flags it has, and the CPUs this process may use
    identity = fingerprint.cpu_identity()
    flags = fingerprint.cpu_flags()
    assert identity == (f"{fingerprint.cpu_model()} [{' '.join(flags)}] "
                        f"x{len(os.sched_getaffinity(0))}")
    assert set(flags) <= set(Path("/proc/cpuinfo").read_text().split())
    assert ("avx512f" in flags) == ("avx512f" in Path("/proc/cpuinfo").read_text().split())
    assert peak_key(identity, "cpu", "float32", "2.21.0") != peak_key(
        fingerprint.cpu_model(), "cpu", "float32", "2.21.0")


@pytest.mark.slow
def test_a_cpu_peak_is_settled_by_measurements_in_turn_and_an_unnamed_one_is_not_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    from bench.utilization import peak

    # keyed by the CPU's name alone, as caches once were: it may be another CPU of that name
    name_only = f"{fingerprint.cpu_model()}|cpu|float32|tf{tf.__version__}|n{MATMUL_N}"
    (tmp_path / "peak.json").write_text(json.dumps({name_only: {
        "flops_per_s": 1.0, "samples": [1.0, 1.0, 1.0], "device": "/cpu:0", "dtype": "float32"}}))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    assert peak.device_model("/cpu:0", "cpu") == fingerprint.cpu_identity()
    first = peak.peak_flops("/cpu:0", "cpu", "float32")  # nothing cached: measures once
    assert first["key"] != name_only and len(first["samples"]) == 1
    assert first["flops_per_s"] > 1e9
    assert peak.peak_flops("/cpu:0", "cpu", "float32")["samples"] == first["samples"]
    spans = [peak.settle("/cpu:0", "cpu", "float32") for _ in range(3)]
    assert spans[0] is not None and spans[1] is not None and spans[2] is None  # 3 settle it
    assert spans[0][0] < spans[0][1] <= spans[1][0] < spans[1][1]
    settled = peak.peak_flops("/cpu:0", "cpu", "float32")
    assert len(settled["samples"]) == 3 and settled["flops_per_s"] == max(settled["samples"])


def _tensorflow_gpus() -> dict[str, Any]:
    """What a fresh TensorFlow process here sees: the truth the facts must agree with."""
    code = ("import json, tensorflow as tf; b = tf.sysconfig.get_build_info(); "
            "g = tf.config.list_physical_devices('GPU'); print(json.dumps("
            "{'count': len(g), 'cuda': tf.test."
            "is_built_with_cuda(), 'cuda_version': b.get('cuda_version'), "
            "'cudnn_version': b.get('cudnn_version'), 'version': tf.__version__, 'first_gpu': "
            "tf.config.experimental.get_device_details(g[0]).get('device_name') if g else None}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    return _tensorflow_gpus()


ONE_VARIANT = """
[measure]
control = false

[train]
api = "ctl"

[[strategies]]
name = "default"
"""


# The peak the run finds in its cache: settled (MEASUREMENTS samples), so a hit measures nothing.
SEEDED_SAMPLES = [2.0e11, 2.6e11, 2.3e11]


@pytest.fixture(scope="module")
def made_up_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose `nvidia-smi` answers for two T4s (this TensorFlow sees none of them)."""
    directory = tmp_path_factory.mktemp("made-up-host")
    path = directory / "nvidia-smi"
    path.write_text(f"#!/bin/sh\nprintf '%s' '{T4_PAIR}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return directory


def on_path(directory: Path) -> str:
    return f"{directory}{os.pathsep}{os.environ['PATH']}"


def seeded_peak_key(truth: dict[str, Any]) -> str:
    """The key the record's peak must have: the model of the device the step runs on."""
    if truth["count"]:
        return peak_key(truth["first_gpu"], "gpu", "float32", truth["version"])
    return peak_key(fingerprint.cpu_identity(), "cpu", "float32", truth["version"])


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory, made_up_host: Path,
            truth: dict[str, Any]) -> BenchRun:
    cache = tmp_path_factory.mktemp("seeded-peak-cache")
    (cache / "peak.json").write_text(json.dumps({seeded_peak_key(truth): {
        "flops_per_s": max(SEEDED_SAMPLES), "samples": SEEDED_SAMPLES, "device": "seeded",
        "dtype": "float32"}}))
    return run_in_fresh_dir(tmp_path_factory, "gpufacts", ONE_VARIANT,
                            env={"PATH": on_path(made_up_host), "BENCH_CACHE_DIR": str(cache)})


@pytest.mark.slow
def test_a_worker_record_carries_the_gpu_facts(one_run: BenchRun, truth: dict[str, Any],
                                               made_up_host: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", on_path(made_up_host))  # this process sees the made-up host too
    monkeypatch.delenv(ChildEnv.name("host_gpus"), raising=False)
    host = parse_nvidia_smi(T4_PAIR, GPU_FIELDS)
    assert fingerprint.gpus() == host
    assert one_run.proc.returncode == 0, one_run.proc.stderr
    [record] = one_run.records
    assert record["status"] == "ok", record.get("reason")
    gpu = record["gpu"]
    # both host GPUs with nvidia-smi's facts; TensorFlow computes on neither (a CPU build here,
    # and a GPU machine's own GPUs are not T4s): no TensorFlow device is pinned on them
    assert [g for g in gpu["gpus"] if g["uuid"]] == [{**g, "tf_device": None} for g in host]
    if truth["count"] == 0:
        # this machine: the count is TensorFlow's (none), not nvidia-smi's two, and only the
        # host's GPUs are listed, pinned on nothing
        assert gpu["count"] == 0 and gpu["gpus"] == [{**g, "tf_device": None} for g in host]
    else:  # a GPU machine: its own GPUs beside the made-up ones, each pinned on its device
        assert gpu["count"] == truth["count"] > 0
        pinned = [g["tf_device"] for g in gpu["gpus"] if g["tf_device"]]
        assert pinned == [f"/physical_device:GPU:{i}" for i in range(truth["count"])]
    if truth["cuda"]:
        assert gpu["built_with_cuda"] is True and gpu["cuda_build"]["cuda_version"]
    else:  # this machine: a CPU build says so instead of leaving the keys out
        assert gpu["built_with_cuda"] is False
        assert gpu["cuda_build"] == {"cuda_version": None, "cudnn_version": None}
    assert one_run.run_dir is not None
    environment = json.loads((one_run.run_dir / "environment.json").read_text())
    assert environment["gpus"] == fingerprint.gpus()


@pytest.mark.slow
def test_the_record_peak_is_keyed_by_the_device_model(one_run: BenchRun,
                                                      truth: dict[str, Any]) -> None:
    [record] = one_run.records
    peak = record["utilization"]["peak"]
    tf_version = record["env"]["tensorflow"]
    kind = record["devices"]["kind"]
    assert kind == "cpu" or record["gpu"]["count"] > 0
    if kind == "cpu":
        assert peak["key"] == peak_key(fingerprint.cpu_identity(), "cpu", "float32", tf_version)
    assert peak["model"] == peak["key"].split("|")[0]
    # the seeded entry of the device it ran on, not the host's T4s: found, not measured again
    assert peak["key"] == seeded_peak_key(truth)
    assert peak["samples"] == SEEDED_SAMPLES and peak["flops_per_s"] == max(SEEDED_SAMPLES)
    assert record["utilization"]["peak_measured_here"] is None
    assert "T4" not in peak["model"]


@pytest.mark.parametrize("gpus, variant_id, role, expected", [
    (8, "mirrored-r2-ctl-float32-gb128", "main", "growth"),  # 2 of 8 GPUs, one replica each
    (1, "mirrored-r2-ctl-float32-gb128", "main", "limit"),  # 2 logical GPUs on one
    (0, "mirrored-r2-ctl-float32-gb128", "main", None),  # logical CPUs
    (8, MWMS_2x2, "worker", "growth"),  # disjoint pairs
    (1, MWMS_2x2, "worker", "limit"),  # two workers split one GPU, two logical GPUs each
    (1, MWMS_2x1, "worker", "limit"),  # two workers share one GPU, one replica each
    (8, PS, "chief", None),  # the coordinator computes nothing
])
def test_gpu_processes_grow_their_memory_unless_they_split_a_gpu(
        gpus: int, variant_id: str, role: str, expected: str | None) -> None:
    """The plan on a made-up host, then each training process's layout as its worker makes it
    from the GPUs the plan left it: memory growth exactly where no logical-GPU limit is set."""
    variants = {v.id: v for path in (STRATEGIES, CLUSTERS) for v in load_variants(path)[1]}
    variant = variants[variant_id]
    processes = [p for p in plan_variant(variant, Inventory.fake(gpus, memory_mb=16000))
                 if p.role == role]
    assert processes and all(p.trains for p in processes), (variant_id, role)
    for process in processes:
        visible = [g for g in process.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        task = Task(process.role, process.index, process.trains) if variant.is_cluster else None
        layout = plan_layout(variant.devices, gpus_per_process(variant, task), len(visible),
                             shared=process.env.get(ChildEnv.name("gpu_shared")) == "1")
        assert layout.gpu_memory == expected, (process, layout)
        assert (ChildEnv.name("logical_gpu_memory_mb") in process.env) == (
            expected == "limit"), process


def _after_memory_growth() -> dict[str, Any]:
    """A fresh TensorFlow process that sets memory growth, then two logical CPUs: the GPUs it
    counted, each GPU's growth, and whether the device layout could still be set."""
    code = ("import json, tensorflow as tf; from bench.training.devices import "
            "enable_memory_growth as e; n = e(); gpus = tf.config.list_physical_devices('GPU'); "
            "growth = [tf.config.experimental.get_memory_growth(g) for g in gpus]; "
            "cpu = tf.config.list_physical_devices('CPU')[0]; "
            "tf.config.set_logical_device_configuration(cpu, "
            "[tf.config.LogicalDeviceConfiguration()] * 2); "
            "print(json.dumps({'count': n, 'growth': growth, "
            "'logical_cpus': len(tf.config.list_logical_devices('CPU'))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def after_memory_growth() -> dict[str, Any]:
    return _after_memory_growth()


@pytest.mark.slow
def test_memory_growth_leaves_the_device_layout_to_be_set(
        after_memory_growth: dict[str, Any]) -> None:
    """Memory growth is set before TensorFlow starts its context (a ps task sets it, then the
    process configures its devices): the logical CPUs a layout asks for can still be made."""
    assert after_memory_growth["logical_cpus"] == 2


@pytest.mark.slow
def test_memory_growth_covers_every_gpu_tensorflow_sees(after_memory_growth: dict[str, Any],
                                                        truth: dict[str, Any]) -> None:
    if truth["count"] == 0:
        # Fails instead under CI=true where nvidia-smi lists GPUs this TensorFlow cannot use
        # (a CPU wheel on a GPU runner): there it could have been checked.
        if IN_CI and fingerprint.gpus():
            pytest.fail("CI=true and nvidia-smi lists GPUs, but TensorFlow sees none: memory "
                        "growth could not be checked", pytrace=False)
        pytest.skip("no GPU TensorFlow can use: memory growth has nothing to act on here")
    assert after_memory_growth["count"] == truth["count"]
    assert after_memory_growth["growth"] == [True] * truth["count"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_ps_task_sets_memory_growth_and_serves(tmp_path: Path, truth: dict[str, Any]) -> None:
    ps, worker = _free_port(), _free_port()
    config = {"cluster": {"ps": [f"localhost:{ps}"], "worker": [f"localhost:{worker}"]},
              "task": {"type": "ps", "index": 0}}
    log = tmp_path / "ps.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(entrypoints.command(entrypoints.PS_SERVER), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=sink, stdin=subprocess.DEVNULL,
                                env={**os.environ, "TF_CONFIG": json.dumps(config),
                                     "TF_CPP_MIN_LOG_LEVEL": "2"})
    try:
        deadline = time.monotonic() + 120
        while "serving ps:0" not in log.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert proc.poll() is None, log.read_text()  # still serving
        assert f"(memory growth on {truth['count']} GPU(s))" in log.read_text()
        with socket.create_connection(("localhost", ps), timeout=10):
            pass  # the gRPC server listens on its TF_CONFIG address
    finally:
        proc.kill()
        proc.wait(timeout=30)
