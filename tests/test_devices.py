"""Device layout decisions: GPUs when present, logical CPUs otherwise, skips when impossible."""

from __future__ import annotations

import pytest

from bench.errors import VariantSkipped
from bench.placement import plan_layout
from bench.training.precision import check_supported as check_precision
from bench.training.strategies import check_supported as check_strategy


def test_no_gpu_means_logical_cpu_devices() -> None:
    layout = plan_layout("auto", 4, gpus_available=0)
    assert layout.kind == "cpu"
    assert layout.devices == ("/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3")
    assert layout.logical_cpus == 4 and layout.simulated


def test_gpus_are_used_when_present() -> None:
    layout = plan_layout("auto", 2, gpus_available=4)
    assert layout.kind == "gpu" and layout.devices == ("/gpu:0", "/gpu:1")
    assert layout.logical_cpus == 1 and not layout.simulated


def test_more_replicas_than_gpus_split_them_into_logical_gpus() -> None:
    layout = plan_layout("auto", 8, gpus_available=2)
    assert layout.kind == "gpu" and len(layout.devices) == 8
    assert layout.logical_gpus_per_gpu == 4 and layout.simulated
    assert plan_layout("auto", 3, gpus_available=2).logical_gpus_per_gpu == 2


def test_nccl_is_skipped_on_logical_gpus() -> None:
    with pytest.raises(VariantSkipped, match="NCCL is not supported when using virtual GPUs"):
        check_strategy("mirrored", "nccl", plan_layout("auto", 2, gpus_available=1))
    with pytest.raises(VariantSkipped, match="logical GPUs"):
        check_strategy("multi_worker_mirrored", "auto", plan_layout("auto", 2, 1), "nccl")
    check_strategy("mirrored", "auto", plan_layout("auto", 2, gpus_available=1))  # TF falls back


def test_demanding_gpus_without_any_is_a_skip() -> None:
    with pytest.raises(VariantSkipped, match="no GPU"):
        plan_layout("gpu", 1, gpus_available=0)


def test_cpu_can_be_forced_on_a_gpu_machine() -> None:
    assert plan_layout("cpu", 2, gpus_available=2).kind == "cpu"


def test_nccl_is_skipped_on_cpu_only() -> None:
    with pytest.raises(VariantSkipped, match="NcclAllReduce"):
        check_strategy("mirrored", "nccl", plan_layout("auto", 2, 0))
    check_strategy("mirrored", "nccl", plan_layout("auto", 2, 2))  # no exception on GPUs


def test_float16_on_cpu_is_skipped_unless_asked_for() -> None:
    with pytest.raises(VariantSkipped, match="mixed_float16 on CPU"):
        check_precision("mixed_float16", "cpu", "skip")
    check_precision("mixed_float16", "cpu", "run")
    check_precision("mixed_float16", "gpu", "skip")
    check_precision("mixed_bfloat16", "cpu", "skip")
    check_precision("mixed_float16", "cpu", "skip", "jax")  # XLA's float16 runs on a CPU
