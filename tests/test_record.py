"""The typed record (bench.record.model): a field a section does not have fails where it is
written; records of schema 1 migrate as they load and report and compare alike with schema 2;
a stored record reads back to the JSON it came from, unknown fields too; a record bench cannot
read is one line. Pure Python, no TensorFlow (the CLI in subprocesses), about 6 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench import results
from bench.errors import DamagedRun
from bench.record.measured import Measurement, ParentTiming, Timing
from bench.record.model import SCHEMA, VariantRecord
from bench.scaling import add_scaling_efficiency
from bench.scenario.loading import load_variants
from tests.conftest import REPO, bench
from tests.fixtures.report_runs import ok_record, schema_1, standard_records, variant, write_run

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A real record bench wrote before the record was typed (schema 1): the docs' example until then.
SCHEMA1_RECORD = FIXTURES / "record_schema1.json"


def test_an_old_run_loads_reports_and_compares_against_a_new_one(tmp_path: Path) -> None:
    """The same measurements as bench wrote them before the headline (schema 1) and as it
    writes them now: the old run reads its typical-step rate as its headline."""
    new_records = standard_records()
    old = write_run(tmp_path / "store", "report_test-20261120T000000Z",
                    [schema_1(r) for r in new_records])
    assert all("schema" not in json.loads(line)
               for line in (old / results.RECORDS_FILE).read_text().splitlines())
    new = write_run(tmp_path / "new", "report_test-20261125T000000Z", new_records)

    old_back, new_back = results.read_records(old), results.read_records(new)
    assert [r.schema_version for r in old_back] == [SCHEMA] * 6  # migrated as they load
    ok = [r for r in new_records if r["status"] == "ok"]
    assert [r.headline for r in old_back if r.ok] == [r["throughput"]["median"] for r in ok]
    assert [r.headline for r in new_back if r.ok] == [r["throughput"]["headline"] for r in ok]
    assert all(n.headline < o.headline for o, n in zip(old_back, new_back, strict=True) if o.ok)
    assert [r.global_batch for r in old_back] == [64, 64, 64, 128, 128, 64]
    frame = results.load_records_frame(old, new)
    assert frame.groupby("run")["examples_per_sec"].sum().to_dict() == pytest.approx({
        old.name: sum(r["throughput"]["median"] for r in ok),
        new.name: sum(r["throughput"]["headline"] for r in ok)})

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


def test_a_record_reads_back_to_the_json_it_came_from() -> None:
    for data in standard_records():
        record = VariantRecord.load(data)
        assert record.to_json() == data
        assert json.loads(json.dumps(record.to_json())) == data
    record = VariantRecord.load(standard_records()[0])
    assert record.control_role is None and record.counts_as_variant
    scaled = add_scaling_efficiency([record])[0]
    assert "scaling_efficiency" not in scaled.to_json()  # derived for readers, never written


def test_fields_a_newer_bench_wrote_are_kept_through_every_writer(tmp_path: Path) -> None:
    """A record holding fields this bench does not know (a newer one wrote them) keeps them
    as the launchers and the runner add theirs, and is written back with them."""
    data = standard_records()[0]
    newer = {**data, "power": {"watts": 41.5},
             "timing": {**data["timing"], "compile_s": 0.25},
             "samples": {**data["samples"], "per_core": [[0.1, 0.2]]}}
    record = VariantRecord.load(newer)
    record.add(wall_s=5.0, launch={"start_method": "spawn"})
    record.section("timing").parent = ParentTiming(analysis_s=0.5, total_s=6.0)
    results.append_record(tmp_path, record)
    [back] = results.read_records(tmp_path)
    written = back.to_json()
    assert written["power"] == {"watts": 41.5}
    assert written["timing"]["compile_s"] == 0.25 and written["timing"]["parent"]["total_s"] == 6
    assert written["samples"]["per_core"] == [[0.1, 0.2]]
    assert written["wall_s"] == 5.0 and written["launch"] == {"start_method": "spawn"}
    assert {k: v for k, v in written.items() if k not in ("wall_s", "launch", "timing")} == {
        k: v for k, v in newer.items() if k != "timing"}


def test_a_field_the_record_does_not_have_fails_where_it_is_written() -> None:
    """The worker builds its sections typed; a misspelt field is an error there, not a key
    kept silently that every reader sees as None."""
    _, variants = load_variants(REPO / "scenarios" / "mnist_mirrored.toml")
    record = VariantRecord.begin(variants[0])
    with pytest.raises(ValidationError, match=r"wramup_s\n  Extra inputs are not permitted"):
        record.add(timing=Timing(import_s=1.0, wramup_s=0.5))
    with pytest.raises(ValidationError, match=r"timing\.wramup_s\n  Extra inputs"):
        record.add(timing={"import_s": 1.0, "wramup_s": 0.5})
    with pytest.raises(ValidationError, match=r"measurement\.speeds\.mode\n  Extra inputs"):
        record.add(measurement={"window_s": [0.1], "speeds": {"mode": []}})
    record.add(timing=Timing(import_s=1.0, warmup_s=0.5))
    with pytest.raises(ValidationError, match="wramup_s\n  Object has no attribute"):
        record.section("timing").wramup_s = 0.5
    with pytest.raises(ValidationError, match="timnig\n  Object has no attribute"):
        record.add(timnig=Timing())
    with pytest.raises(ValidationError, match="unobserved_s"):
        Measurement(unobserved_s=[0.1])
    assert record.to_json()["timing"] == {"import_s": 1.0, "warmup_s": 0.5}  # nothing kept
    assert record.measurement is None and "timnig" not in record.to_json()


def test_a_schema_1_record_migrates_as_it_loads() -> None:
    """A real schema-1 record (from after the headline, before the observed windows), and one
    from before the headline: read as schema 2, every field they held kept as it was."""
    real = json.loads(SCHEMA1_RECORD.read_text(encoding="utf-8"))
    record = VariantRecord.load(real)
    assert real["schema"] == 1 and record.schema_version == SCHEMA
    assert record.headline == real["throughput"]["headline"]
    assert record.typical_step_rate == real["throughput"]["median"]
    window_s = real["measurement"]["window_s"]  # the per-step windows' clocks: the headline's
    assert record.measurement.window_s == window_s and record.measurement.observed_window_s == []
    assert record.unobserved_window_s == sum(window_s) and record.observed_window_s == 0.0
    assert record.trace is None and not record.profiler_flagged
    written = record.to_json()
    assert {k: v for k, v in written.items() if k not in ("schema", "measurement")} == {
        k: v for k, v in real.items() if k not in ("schema", "measurement")}
    assert written["measurement"] == {**real["measurement"], "observed_window_s": []}
    assert VariantRecord.load(written).to_json() == written  # migrated once, then as it is

    new = ok_record(variant("default-r1-fit-float32-gb64"), 0.004)
    new["trace"]["overhead_ratio"] = 1.6
    old = schema_1(new)
    before = VariantRecord.load(old)
    assert before.headline == new["throughput"]["median"] != new["throughput"]["headline"]
    assert before.window_rates == old["throughput"]["per_repeat"]
    assert before.measurement.window_s == [sum(w) for w in new["samples"]["timed"]]
    assert before.unobserved_window_s == pytest.approx(sum(map(sum, new["samples"]["timed"])))
    assert before.profiler_flagged  # 1.6 over the 1.5 that flagged the profiler then
    assert old == schema_1(new)  # the stored record is untouched


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
