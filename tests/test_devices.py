"""Device layout decisions: GPUs when present, logical CPUs otherwise, skips when impossible."""

from __future__ import annotations

import pytest

from bench.errors import VariantSkipped
from bench.training.devices import plan_layout
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


def test_more_gpus_than_exist_is_a_skip() -> None:
    with pytest.raises(VariantSkipped, match="needs 8 GPUs, this machine has 2"):
        plan_layout("auto", 8, gpus_available=2)


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
