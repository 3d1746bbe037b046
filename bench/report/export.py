"""`bench export --format pytest-benchmark`: a run directory as pytest-benchmark's JSON.

Users who live in pytest-benchmark can then `pytest-benchmark compare` bench runs with their own
saved runs. Each ok variant becomes one benchmark whose rounds are its timed steps (seconds per
step), so min/median/IQR/ops mean what pytest-benchmark users expect; the statistics come from
pytest-benchmark's own `Stats`, so the file is exactly what its tools read. The variant's
throughput goes to `extra_info` (`examples_per_sec`: the headline, THE examples/s;
`typical_step_examples_per_sec`: global batch ÷ the median step), its axes to `params`.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from bench import results
from bench.errors import BenchError
from bench.record.model import VariantRecord


def _machine_info(env: dict[str, Any]) -> dict[str, Any]:
    return {"node": env.get("hostname"), "processor": env.get("cpu_model"),
            "machine": platform.machine(), "python_implementation": "CPython",
            "python_version": env.get("python"), "system": env.get("platform"),
            "cpu": {"brand_raw": env.get("cpu_model"), "count": env.get("cpu_count")}}


def _commit_info(env: dict[str, Any]) -> dict[str, Any]:
    commit = str(env.get("git_commit") or "")
    return {"id": commit.removesuffix("+dirty") or "unversioned", "dirty": commit.endswith("+dirty"),
            "project": "bench", "branch": "(unknown)", "time": None, "author_time": None}


def benchmark_entry(record: VariantRecord, run_name: str) -> dict[str, Any] | None:
    """One ok record as a pytest-benchmark benchmark; None when it has no timed samples."""
    from pytest_benchmark.stats import Stats

    samples = record.timed_steps
    if not record.ok or not samples:
        return None
    stats = Stats()
    for sample in samples:
        stats.update(sample)
    variant, thr, timing = record.variant, record.throughput, record.timing
    fields = timing.model_fields_set if timing else set()
    return {
        "group": variant.scenario_name,
        "name": record.variant_id,
        "fullname": f"{variant.scenario_name}::{record.variant_id}",
        "params": variant.axes(),
        "param": record.variant_id,
        "extra_info": {"examples_per_sec": record.headline,
                       "typical_step_examples_per_sec": record.typical_step_rate,
                       "examples_per_sec_mean_rate": thr.mean_rate if thr else None,
                       "spread_pct": record.spread_pct,
                       "global_batch": record.global_batch,
                       "steps_per_sample": (timing.steps_per_sample if "steps_per_sample" in
                                            fields else 1),
                       "data_source": record.data_source,
                       "device_kind": record.device_kind,
                       "run": run_name, "unit": "seconds per training step"},
        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": len(samples),
                    "max_time": 0, "min_time": 0,
                    "warmup": timing.warmup_steps if "warmup_steps" in fields else False},
        "stats": {**stats.as_dict(), "data": samples, "iterations": 1},
    }


def to_pytest_benchmark(run_dir: Path) -> dict[str, Any]:
    from pytest_benchmark import __version__ as pb_version

    if not results.is_run_dir(run_dir):
        raise BenchError(f"{run_dir}: not a bench run directory")
    env = results.read_environment(run_dir)
    entries = [benchmark_entry(rec, run_dir.name) for rec in results.read_records(run_dir)]
    benchmarks = [e for e in entries if e is not None]
    if not benchmarks:
        raise BenchError(f"{run_dir}: no ok variant with timed samples to export")
    return {"machine_info": _machine_info(env), "commit_info": _commit_info(env),
            "benchmarks": benchmarks, "datetime": env.get("started_at"), "version": pb_version}
