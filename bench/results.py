"""Run directories: layout, atomic writes, JSON-lines records, and loading into pandas.

A run directory is the unit every later tool (report, compare) reads:

    results/<scenario>-<UTC timestamp>/
        scenario.toml       the scenario exactly as given
        variants.json       the expanded matrix
        environment.json    the parent's environment fingerprint
        records.jsonl       one record per finished variant (bench.record.model.VariantRecord),
                            one JSON line each, appended as each finishes
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
from bench.record.model import VariantRecord
from bench.scaling import add_scaling_efficiency

if TYPE_CHECKING:
    import pandas as pd

    from bench.scenario.schema import Variant

RECORDS_FILE = "records.jsonl"
VARIANTS_FILE = "variants.json"
TIMING_FILE = "timing.json"  # where the run's wall time went (bench.perf.overhead)
ENVIRONMENT_FILE = "environment.json"
SCENARIO_FILE = "scenario.toml"
LOGS_DIR = "logs"  # every process's log, gate FIFO and record hand-over of a run
# A nightly run's confirmation re-runs, inside its run directory: kept with the night they judge,
# and no runs of a store, which lists its top-level run directories only.
CONFIRMATIONS_DIR = "confirmations"


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
        (path / LOGS_DIR).mkdir()
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


def read_environment(run_dir: Path) -> dict[str, Any]:
    """The run's environment.json ({} for a run written without one)."""
    path = run_dir / ENVIRONMENT_FILE
    return read_json(path) if path.exists() else {}


def variant_by_id(variants: Sequence[Variant] | Sequence[dict[str, Any]], variant_id: str,
                  source: str | Path) -> Variant:
    """The variant `variant_id` among a scenario's variants or a run's variants.json entries
    (only that entry is validated); a missing id is one BenchError line naming `source` and the
    ids it has."""
    from bench.scenario.schema import Variant  # the scenario's schema: not for readers of runs

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


def append_record(run_dir: Path, record: VariantRecord) -> None:
    """Append one line and flush it to disk: an interrupted run keeps every finished variant."""
    line = json.dumps(record.to_json(), default=str)
    with open(run_dir / RECORDS_FILE, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_records(run_dir: Path) -> list[VariantRecord]:
    """The run's records, of either schema (bench.record.model); a line that is no record is one
    BenchError naming the file and the line."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise BenchError(f"{path}: line {number}: not JSON ({exc})") from None
            records.append(VariantRecord.load(data, f"{path}: line {number}"))
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


def confirmation_dirs(run_dir: Path) -> list[Path]:
    """The run's confirmation re-runs (`bench nightly`), oldest first; most runs have none."""
    folder = run_dir / CONFIRMATIONS_DIR
    return find_run_dirs([folder]) if folder.is_dir() else []


def runs_of_scenario(store: Path, scenario: str, exclude: Path | None = None) -> list[Path]:
    """Run directories of `scenario` in a store (one run dir, or a folder of them), oldest first."""
    runs = [r for r in find_run_dirs([store])
            if exclude is None or r.resolve() != exclude.resolve()]
    return sorted((r for r in runs if any(v.get("scenario_name") == scenario
                                          for v in read_json(r / VARIANTS_FILE))),
                  key=lambda r: r.name)


def _flatten(run_dir: Path, env: dict[str, Any], rec: VariantRecord) -> dict[str, Any]:
    """One row: the variant's axes and its figures. `examples_per_sec` is the headline (THE
    throughput), `typical_step_examples_per_sec` the global batch ÷ the median step."""
    variant = rec.variant
    thr = rec.throughput
    step = rec.step_time
    timing = rec.timing
    loss = rec.loss
    use = rec.utilization
    return {
        "run": run_dir.name,
        "run_dir": str(run_dir),
        "scenario": variant.scenario_name,
        "scenario_digest": variant.scenario_digest,
        "variant_id": rec.variant_id,
        "status": rec.status,
        "reason": rec.reason,
        "strategy": variant.strategy,
        "replicas": rec.replicas,
        "planned_replicas": variant.replicas,
        "workers": variant.workers,
        "ps": variant.ps,
        "cross_device_ops": variant.cross_device_ops,
        "collective": variant.collective,
        "api": variant.api,
        "distribute_dataset": variant.distribute_dataset,
        "precision": variant.precision,
        "batch_rule": variant.batch_rule,
        "per_replica_batch": rec.per_replica_batch,
        "global_batch": rec.global_batch,
        "learning_rate": variant.learning_rate,
        "model": variant.model_name,
        "data_source": rec.data_source,
        "device_kind": rec.device_kind,
        "examples_per_sec": rec.headline,
        "typical_step_examples_per_sec": rec.typical_step_rate,
        "examples_per_sec_mean_rate": thr.mean_rate if thr else None,
        "spread_pct": rec.spread_pct,
        "step_time_median_s": rec.median_step_s,
        "step_time_mean_s": step.mean if step else None,
        "step_time_stdev_s": step.stdev if step else None,
        "step_time_p5_s": step.p5 if step else None,
        "step_time_p95_s": step.p95 if step else None,
        "timed_steps": step.n if step else None,
        "startup_s": timing.startup_s if timing else None,
        "first_step_s": timing.first_step_s if timing else None,
        "initial_loss": loss.initial if loss else None,
        "final_loss": loss.final if loss else None,
        "git_commit": env.get("git_commit"),
        "started_at": env.get("started_at"),
        "scaling_efficiency": rec.scaling_efficiency,
        "achieved_flops_per_s": use.achieved_flops_per_s if use else None,
        "mfu": use.mfu if use else None,
        "scaling_kind": rec.scaling_kind,
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
        env = read_environment(run_dir)
        records = add_scaling_efficiency(read_records(run_dir))
        rows.extend(_flatten(run_dir, env, rec) for rec in records)
    frame = pd.DataFrame(rows, columns=list(_flatten(Path("."), {}, VariantRecord()).keys()))
    return frame.astype(_DTYPES)
