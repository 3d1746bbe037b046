"""The typed record (bench.record.model): records of schema 1 and 2 load, report and compare
alike, a record reads back to the JSON it came from, and a record bench cannot read is one line.
Pure Python, no TensorFlow (the CLI in subprocesses), about 6 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench import results
from bench.errors import DamagedRun
from bench.record.model import SCHEMA, VariantRecord, load_all
from bench.scaling import add_scaling_efficiency
from tests.conftest import bench
from tests.fixtures.report_runs import standard_records, write_run

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A real record bench wrote before the record was typed (schema 1): the docs' example until then.
SCHEMA1_RECORD = FIXTURES / "record_schema1.json"


def written_now(records: list[dict]) -> list[VariantRecord]:
    """The same measurements as this bench writes them: schema 2, with the headline (the old
    records' typical-step rate, which their windows' wall clocks would have given)."""
    out = []
    for old in load_all(records):
        new = VariantRecord.load({**old.to_json(), "schema": SCHEMA})
        if new.throughput is not None:
            new.throughput.headline = old.headline
        out.append(new)
    return out


def test_an_old_run_loads_reports_and_compares_against_a_new_one(tmp_path: Path) -> None:
    old_records = standard_records()
    old = write_run(tmp_path / "store", "report_test-20261120T000000Z", old_records)
    assert all("schema" not in json.loads(line)
               for line in (old / results.RECORDS_FILE).read_text().splitlines())
    new = write_run(tmp_path / "new", "report_test-20261125T000000Z", [],
                    planned=[r["variant"] for r in old_records])
    for record in written_now(old_records):
        results.append_record(new, record)
    lines = [json.loads(line) for line in (new / results.RECORDS_FILE).read_text().splitlines()]
    assert {line["schema"] for line in lines} == {2}
    assert lines[0]["throughput"]["headline"] == lines[0]["throughput"]["median"]

    old_back, new_back = results.read_records(old), results.read_records(new)
    assert [r.schema_version for r in old_back] == [1] * 6
    assert [r.headline for r in old_back] == [r.headline for r in new_back]  # median stands in
    assert [r.global_batch for r in old_back] == [64, 64, 64, 128, 128, 64]
    frame = results.load_records_frame(old, new)
    assert frame.groupby("run")["examples_per_sec"].sum().nunique() == 1

    report = bench("report", str(old), str(new), "--out", str(tmp_path / "site"))
    assert report.returncode == 0, report.stdout + report.stderr
    for run in (old, new):
        page = (tmp_path / "site" / f"run-{run.name}.html").read_text()
        assert "mirrored-r2-fit-float32-gb128" in page and "Fastest: default-r1" in page
    compared = bench("compare", str(tmp_path / "store"), str(new))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "no regression" in compared.stdout and "unchanged" in compared.stdout
    backwards = bench("compare", str(new), str(old))  # a new baseline, an old candidate
    assert backwards.returncode == 0 and "no regression" in backwards.stdout, backwards.stdout


def test_a_record_reads_back_to_the_json_it_came_from(tmp_path: Path) -> None:
    real = json.loads(SCHEMA1_RECORD.read_text(encoding="utf-8"))
    for data in [real, *standard_records()]:
        record = VariantRecord.load(data)
        assert record.to_json() == data
        assert json.loads(json.dumps(record.to_json())) == data
    record = VariantRecord.load(real)
    assert record.schema_version == 1 and record.headline == real["throughput"]["headline"]
    assert record.typical_step_rate == real["throughput"]["median"]
    assert record.control_role == "baseline" and record.counts_as_variant
    scaled = add_scaling_efficiency([record])[0]
    assert "scaling_efficiency" not in scaled.to_json()  # derived for readers, never written


def test_a_records_variant_is_frozen_and_a_copy_keys_on_its_own_fields() -> None:
    """The variant's JSON form and keys are kept once computed: nothing may change them
    underneath, and a copy with other fields has other keys."""
    variant = VariantRecord.load(standard_records()[0]).variant
    key, precision = variant.key(), variant.axis("precision")
    assert variant.key(["precision"]) != key and variant.key() is key
    with pytest.raises(ValidationError):
        variant.precision = "mixed_bfloat16"
    other = variant.model_copy(update={"precision": "mixed_bfloat16"})
    assert other.axis("precision") == "mixed_bfloat16" != precision
    assert other.key() != key and other.key(["precision"]) == variant.key(["precision"])
    assert variant.key() == key and variant.axis("precision") == precision


def test_a_record_bench_cannot_read_is_left_out_and_named(tmp_path: Path) -> None:
    run = write_run(tmp_path, "r", standard_records()[:1])
    good = (run / results.RECORDS_FILE).read_text()
    newer = {**json.loads(good), "schema": SCHEMA + 1}
    (run / results.RECORDS_FILE).write_text(good + json.dumps(newer) + "\n")
    with pytest.warns(DamagedRun, match=rf"records.jsonl: line 2: schema {SCHEMA + 1} is not"):
        assert len(results.read_records(run)) == 1
    (run / results.RECORDS_FILE).write_text(good.replace('"status": "ok"', '"status": 7'))
    proc = bench("report", str(run), "--out", str(tmp_path / "site"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("warning: ") and proc.stderr.count("\n") == 1
    assert proc.stderr.strip().endswith("records.jsonl: line 1: status: Input should be 'ok', "
                                        "'skipped' or 'failed'; left out (0 record(s) read)"), \
        proc.stderr
