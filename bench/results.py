"""Run directories: layout, the readers and writers of their files and of outputs (a fault is one
BenchError line; a damaged line or run is left out with a DamagedRun warning), and pandas.

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

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.errors import BenchError, DamagedRun, file_error, file_errors, shown_path
from bench.record.model import VariantRecord
from bench.scaling import add_scaling_efficiency

T = TypeVar("T")

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
MAX_NAME_BYTES = 200  # of a name that becomes a file name (255 bytes, less bench's suffixes)


def slug(name: str) -> str:
    """`name` as a file name: its path parts stripped, and a long one cut (with a digest of the
    whole, so two long names stay two)."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "scenario"
    if len(text) <= MAX_NAME_BYTES:
        return text
    return f"{text[:MAX_NAME_BYTES - 17]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def file_name_problem(name: object) -> str | None:
    """What keeps `name` (a variant id, read from a run) from being one file name in a folder,
    or None: bench makes logs/<id>.log and traces/<id>/ of it."""
    if not isinstance(name, str) or not name:
        return "empty" if name == "" else "not text"
    if "/" in name or "\0" in name or name in (".", ".."):
        return "not a file name (a path separator, NUL or a dot folder)"
    if (size := len(name.encode("utf-8", "surrogatepass"))) > MAX_NAME_BYTES:
        return f"{size:,} bytes, longer than a file name may be ({MAX_NAME_BYTES})"
    return None


def check_writable(folder: Path) -> None:
    """That `folder` could be made and written into (a scratch folder made and removed in it, or
    in the nearest part of its path that exists): a command refuses an output it cannot write
    before any work whose results would go there, and leaves nothing behind."""
    with file_errors(folder, "write into it"):
        existing = Path(folder)
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(existing))
        tempfile.TemporaryDirectory(dir=existing, prefix=".bench-probe-").cleanup()


def make_dirs(folder: Path) -> None:
    """`folder` and its parents; one BenchError line naming it if they cannot be made."""
    with file_errors(folder, "write into it"):
        folder.mkdir(parents=True, exist_ok=True)


def create_run_dir(root: Path, scenario_name: str, now: datetime | None = None) -> Path:
    """Make a fresh directory; never reuse or overwrite an existing one."""
    now = now or datetime.now(UTC)
    base = f"{slug(scenario_name)}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    with file_errors(root, "create a run directory in it"):
        root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            path = root / (base if attempt == 0 else f"{base}-{attempt}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            (path / LOGS_DIR).mkdir()
            return path
    raise BenchError(f"{root}: cannot create a new run directory (1,000 of {base} exist)")


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file and a failed
    write leaves the old one whole. A device or pipe (/dev/null, /dev/stdout) is written into,
    never replaced. Any failure is one BenchError line naming `path`."""
    path = Path(path)
    with file_errors(path, "write"):
        if path.exists() and not path.is_file() and not path.is_dir():
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise


def write_json(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str))


def read_json(path: Path, expect: type | None = None) -> Any:
    """The JSON of `path`; unreadable, not UTF-8 or JSON, nested too deep, or (with `expect`) of
    another type is one BenchError line naming it."""
    with file_errors(path):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    if expect is not None and not isinstance(data, expect):
        raise BenchError(f"{shown_path(path)}: holds {_json_kind(data)}, not {_json_kind(expect())}")
    return data


def _json_kind(value: Any) -> str:
    name = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def read_environment(run_dir: Path) -> dict[str, Any]:
    """The run's environment.json ({} for a run written without one)."""
    path = run_dir / ENVIRONMENT_FILE
    return read_json(path, dict) if path.exists() else {}


def read_variants(run_dir: Path) -> list[dict[str, Any]]:
    """The run's variants.json: a list of variants, each an object whose id can be a file
    name; anything else is one BenchError line naming the file and the entry."""
    path = run_dir / VARIANTS_FILE
    variants = read_json(path, list)
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise BenchError(f"{path}: entry {i}: holds {_json_kind(variant)}, not an object")
        if "id" in variant and (problem := file_name_problem(variant["id"])):
            raise BenchError(f"{path}: entry {i}: id: {problem}")
    return variants


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
    with file_errors(run_dir / SCENARIO_FILE, "write"):
        shutil.copyfile(scenario_path, run_dir / SCENARIO_FILE)
    write_json(run_dir / VARIANTS_FILE, variants)
    write_json(run_dir / ENVIRONMENT_FILE, environment)


def append_record(run_dir: Path, record: VariantRecord) -> None:
    """Append one line and flush it to disk: an interrupted run keeps every finished variant."""
    line = json.dumps(record.to_json(), default=str)
    with file_errors(run_dir / RECORDS_FILE, "append a record"), \
            open(run_dir / RECORDS_FILE, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class RunRecords(list[VariantRecord]):
    """A run's records as read, and `damage`: one line for each line of its records.jsonl that
    held no record and was left out."""

    def __init__(self, records: Iterable[VariantRecord] = (), damage: Iterable[str] = ()) -> None:
        super().__init__(records)
        self.damage = list(damage)


def read_records(run_dir: Path) -> RunRecords:
    """The run's records, of either schema (bench.record.model). A line that holds no record (cut
    short by a crash, not UTF-8 or JSON, nested too deep, failing the record's model, a variant
    id that cannot be a file name) is left out and named in a DamagedRun warning, and the other
    lines are read; a records.jsonl that cannot be opened is one BenchError line."""
    path = Path(run_dir) / RECORDS_FILE
    records = RunRecords()
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return records
    except OSError as exc:
        raise file_error(path, exc) from None
    with file_errors(path), fh:
        for number, raw in enumerate(fh, 1):
            try:
                record = _record_of(raw, f"{path}: line {number}")
            except BenchError as exc:
                records.damage.append(f"{exc}; left out")
                continue
            if record is not None:
                records.append(record)
    for damage in records.damage:
        warnings.warn(f"{damage} ({len(records)} record(s) read)", DamagedRun, stacklevel=2)
    return records


def _record_of(raw: bytes, where: str) -> VariantRecord | None:
    """One line of records.jsonl as a record (None for a blank line), or a BenchError naming
    `where` and what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise file_error(where, exc) from None
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if not raw.endswith(b"\n"):
            raise BenchError(f"{where}: cut short (the run stopped while writing it)") from None
        raise file_error(where, exc) from None
    except RecursionError as exc:
        raise file_error(where, exc) from None
    record = VariantRecord.load_stored(data, where)
    if problem := file_name_problem(record.variant_id):
        raise BenchError(f"{where}: variant_id: {problem}")
    return record


def check_records(run_dir: Path) -> None:
    """That the run's records.jsonl, if it has one, can be opened: a cheap look before its
    records are read."""
    path = run_dir / RECORDS_FILE
    try:
        open(path, "rb").close()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise file_error(path, exc) from None


def read_metadata(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's environment and variants, once its records.jsonl is known to open: what a
    store reads of each run before it reads any records (one BenchError line if it cannot)."""
    check_records(run_dir)
    return read_environment(run_dir), read_variants(run_dir)


def readable_runs(dirs: Sequence[Path], read: Callable[[Path], T]) -> list[tuple[Path, T]]:
    """Each run of `dirs` with what `read` makes of it. A run that `read` cannot read (one
    BenchError line) is named in a DamagedRun warning and left out, so one damaged run does not
    hide the others; when none is left, the first one's error is the error."""
    found, damaged = [], []
    for run_dir in dirs:
        try:
            found.append((run_dir, read(run_dir)))
        except BenchError as exc:
            damaged.append(str(exc))
    if damaged and not found:
        more = f" (and {len(damaged) - 1} other damaged run(s))" if len(damaged) > 1 else ""
        raise BenchError(damaged[0] + more)
    for damage in damaged:
        warnings.warn(f"{damage}; this run is left out", DamagedRun, stacklevel=2)
    return found


def is_run_dir(path: Path) -> bool:
    with file_errors(path):
        return (path / VARIANTS_FILE).exists()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Accept run directories or folders holding them (e.g. `results/`)."""
    found: list[Path] = []
    for p in map(Path, paths):
        with file_errors(p):
            if is_run_dir(p):
                found.append(p)
            elif p.is_dir():
                found.extend(sorted(c for c in p.iterdir() if c.is_dir() and is_run_dir(c)))
            else:
                raise BenchError(f"{shown_path(p)}: not a bench run directory")
    return found


def confirmation_dirs(run_dir: Path) -> list[Path]:
    """The run's confirmation re-runs (`bench nightly`), oldest first; most runs have none."""
    folder = run_dir / CONFIRMATIONS_DIR
    return find_run_dirs([folder]) if folder.is_dir() else []


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
