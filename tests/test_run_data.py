"""Data read from files, end to end: `bench data write-tfrecord`, then `bench run` on the shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.record.model import VariantRecord
from tests.conftest import BenchRun, bench, bench_run, write_scenario
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

TFRECORD = """
strategies = [{{ name = "mirrored", replicas = 2 }}]
measure = {{ warmup_steps = 2, steps = 6, repeats = 1, trace_steps = 0 }}

[data]
name = "tfrecord"
files = "{files}"
num_classes = 10
resize = [32, 32]
random_flip = true
map_parallelism = 2

[train]
api = ["fit", "ctl"]
distribute_dataset = "distribute_datasets_from_function"  # each pipeline reads its own files
"""


def write_shards(factory: pytest.TempPathFactory) -> str:
    """The tiny synthetic scenario's examples written as 4 shards by the real CLI: their glob."""
    tmp = factory.mktemp("shards")
    source = write_scenario(tmp, "[[strategies]]\nname = \"default\"", name="src")
    proc = bench("data", "write-tfrecord", str(source),
                 "--out", str(tmp / "shards"), "--shards", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pattern = str(tmp / "shards" / "synthetic-train-*-of-*.tfrecord")
    assert f'files = "{pattern}"' in proc.stdout and "512 examples of [28, 28, 1]" in proc.stdout
    return pattern


def start_tfrecord(context: EarlyContext) -> tuple[BenchRun, str]:
    """The shards, and a run that reads them."""
    shards = write_shards(context.tmp_path_factory)
    tmp = context.tmp_path_factory.mktemp("tfrecord")
    path = write_scenario(tmp, TFRECORD.format(files=shards), name="tfrecord")
    return bench_run(path, tmp / "results"), shards


tfrecord_run = early_fixture("tfrecord", start_tfrecord, part=0)
shards = early_fixture("tfrecord", start_tfrecord, part=1)


def test_fit_and_the_per_pipeline_custom_loop_train_on_the_shards(tfrecord_run: BenchRun,
                                                                 shards: str) -> None:
    run = tfrecord_run
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    # the yardstick reads its own data
    variants = [r for r in run.records if VariantRecord.load(r).counts_as_variant]
    assert sorted(r["variant_id"] for r in variants) == [
        "mirrored-r2-ctl-dsfn-float32-gb32", "mirrored-r2-fit-float32-gb32"]
    for rec in variants:
        assert rec["status"] == "ok", rec["reason"]
        assert rec["data_source"] == f"tfrecord:{shards} (train, 4 files, examples [28, 28, 1] " \
                                     "float32)"
        assert rec["loss"]["final"] < rec["loss"]["initial"], rec["variant_id"]
    assert f"data: tfrecord:{shards} (train, 4 files" in run.proc.stdout


def test_a_glob_matching_nothing_fails_the_variant_with_the_reason(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "*.tfrecord")
    body = TFRECORD.format(files=missing).replace('["fit", "ctl"]', '"fit"')
    run = bench_run(write_scenario(tmp_path, body, name="nofiles"), tmp_path / "results",
                    "--no-control")
    assert run.proc.returncode == 1
    (rec,) = run.records
    assert rec["status"] == "failed"
    assert rec["reason"].startswith(f"data.files: no files match '{missing}'")
    assert "Traceback" not in run.proc.stdout
