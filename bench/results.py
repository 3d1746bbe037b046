"""Run directories: layout, atomic writes, JSON-lines records, and loading into pandas.

A run directory is the unit every later tool (report, compare) reads:

    results/<scenario>-<UTC timestamp>/
        scenario.toml       the scenario exactly as given
        variants.json       the expanded matrix
        environment.json    the parent's environment fingerprint
        records.jsonl       one JSON record per finished variant, appended as each finishes
        logs/<variant>.log  each worker's stdout/stderr
        traces/<variant>/   its profile and TensorBoard event files (bench.report.tensorboard_events)
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError
from bench.scaling import add_scaling_efficiency
from bench.scenario.schema import Variant

if TYPE_CHECKING:
    import pandas as pd

RECORDS_FILE = "records.jsonl"
VARIANTS_FILE = "variants.json"
TIMING_FILE = "timing.json"  # where the run's wall time went (bench.perf.overhead)
ENVIRONMENT_FILE = "environment.json"
SCENARIO_FILE = "scenario.toml"


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "scenario"


def create_run_dir(root: Path, scenario_name: str, now: datetime | None = None) -> Path:
    """Make a fresh directory; never reuse or overwrite an existing one."""
    now = now or datetime.now(UTC)
    root.mkdir(parents=True, exist_ok=True)
    base = f"{slug(scenario_name)}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    for attempt in range(1000):
        path = root / (base if attempt == 0 else f"{base}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        (path / "logs").mkdir()
        return path
    raise RuntimeError(f"cannot create a new run directory under {root}")


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def variant_by_id(variants: Sequence[Variant] | Sequence[dict[str, Any]], variant_id: str,
                  source: str | Path) -> Variant:
    """The variant `variant_id` among a scenario's variants or a run's variants.json entries
    (only that entry is validated); a missing id is one BenchError line naming `source` and the
    ids it has."""
    ids = [v.id if isinstance(v, Variant) else v.get("id") for v in variants]
    if variant_id not in ids:
        raise BenchError(f"{source}: no variant '{variant_id}' (have: {', '.join(map(str, ids))})")
    found = variants[ids.index(variant_id)]
    return found if isinstance(found, Variant) else Variant.model_validate(found)


def init_run(run_dir: Path, scenario_path: Path, variants: list[dict[str, Any]],
             environment: dict[str, Any]) -> None:
    shutil.copyfile(scenario_path, run_dir / SCENARIO_FILE)
    write_json(run_dir / VARIANTS_FILE, variants)
    write_json(run_dir / ENVIRONMENT_FILE, environment)


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """Append one line and flush it to disk: an interrupted run keeps every finished variant."""
    line = json.dumps(record, default=str)
    with open(run_dir / RECORDS_FILE, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                records.append(json.loads(line))
    return records


def is_run_dir(path: Path) -> bool:
    return (path / VARIANTS_FILE).exists()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Accept run directories or folders holding them (e.g. `results/`)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if is_run_dir(p):
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(c for c in p.iterdir() if c.is_dir() and is_run_dir(c)))
        else:
            raise FileNotFoundError(f"{p}: not a bench run directory")
    return found


def runs_of_scenario(store: Path, scenario: str, exclude: Path | None = None) -> list[Path]:
    """Run directories of `scenario` in a store (one run dir, or a folder of them), oldest first."""
    runs = [r for r in find_run_dirs([store])
            if exclude is None or r.resolve() != exclude.resolve()]
    return sorted((r for r in runs if any(v.get("scenario_name") == scenario
                                          for v in read_json(r / VARIANTS_FILE))),
                  key=lambda r: r.name)


def _flatten(run_dir: Path, env: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    variant = rec.get("variant", {})
    thr = rec.get("throughput") or {}
    step = rec.get("step_time") or {}
    timing = rec.get("timing") or {}
    loss = rec.get("loss") or {}
    effective = rec.get("effective") or {}
    return {
        "run": run_dir.name,
        "run_dir": str(run_dir),
        "scenario": variant.get("scenario_name"),
        "scenario_digest": variant.get("scenario_digest"),
        "variant_id": rec.get("variant_id"),
        "status": rec.get("status"),
        "reason": rec.get("reason"),
        "strategy": variant.get("strategy"),
        "replicas": effective.get("replicas", variant.get("replicas")),
        "planned_replicas": variant.get("replicas"),
        "workers": variant.get("workers"),
        "ps": variant.get("ps"),
        "cross_device_ops": variant.get("cross_device_ops"),
        "collective": variant.get("collective"),
        "api": variant.get("api"),
        "distribute_dataset": variant.get("distribute_dataset"),
        "precision": variant.get("precision"),
        "batch_rule": variant.get("batch_rule"),
        "per_replica_batch": effective.get("per_replica_batch", variant.get("per_replica_batch")),
        "global_batch": effective.get("global_batch", variant.get("global_batch")),
        "learning_rate": variant.get("learning_rate"),
        "model": (variant.get("model") or {}).get("name"),
        "data_source": rec.get("data_source"),
        "device_kind": (rec.get("devices") or {}).get("kind"),
        "examples_per_sec": thr.get("median"),
        "examples_per_sec_mean_rate": thr.get("mean_rate"),
        "spread_pct": thr.get("spread_pct"),
        "step_time_median_s": step.get("median"),
        "step_time_mean_s": step.get("mean"),
        "step_time_stdev_s": step.get("stdev"),
        "step_time_p5_s": step.get("p5"),
        "step_time_p95_s": step.get("p95"),
        "timed_steps": step.get("n"),
        "startup_s": timing.get("startup_s"),
        "first_step_s": timing.get("first_step_s"),
        "initial_loss": loss.get("initial"),
        "final_loss": loss.get("final"),
        "git_commit": env.get("git_commit"),
        "started_at": env.get("started_at"),
        "scaling_efficiency": rec.get("scaling_efficiency"),
        "achieved_flops_per_s": (rec.get("utilization") or {}).get("achieved_flops_per_s"),
        "mfu": (rec.get("utilization") or {}).get("mfu"),
        "scaling_kind": rec.get("scaling_kind"),
    }


_DTYPES = {
    "replicas": "Int64", "planned_replicas": "Int64", "workers": "Int64", "ps": "Int64",
    "per_replica_batch": "Int64", "global_batch": "Int64",
    "timed_steps": "Int64",
}


def load_records_frame(*paths: str | Path) -> pd.DataFrame:
    """One row per variant record across one or many run directories (or folders of them)."""
    import pandas as pd

    rows = []
    for run_dir in find_run_dirs(paths):
        env_path = run_dir / ENVIRONMENT_FILE
        env = read_json(env_path) if env_path.exists() else {}
        records = add_scaling_efficiency(read_records(run_dir))
        rows.extend(_flatten(run_dir, env, rec) for rec in records)
    frame = pd.DataFrame(rows, columns=list(_flatten(Path("."), {}, {}).keys()))
    return frame.astype(_DTYPES)
