"""Run directories, record appends, scaling efficiency and the pandas loader."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import results
from bench.errors import BenchError, DamagedRun
from bench.record.measured import StepTime, Throughput
from bench.record.model import VariantRecord
from bench.scaling import add_scaling_efficiency
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import REPO

DOC = {
    "scenario": {"name": "r"},
    "batch": {"rule": "weak", "per_replica": 32},
    "train": {"api": "fit"},
    "strategies": [{"name": "default"}, {"name": "mirrored", "replicas": [1, 2, 4]}],
}


def ok_record(variant, examples_per_sec: float) -> VariantRecord:
    """An ok record whose headline is `examples_per_sec`; its typical-step rate is a few
    percent above, by a factor of its own (as in a real run), so a figure computed from it
    reads otherwise."""
    typical = examples_per_sec * (1.03 + 0.02 * variant.index)
    rec = VariantRecord.begin(variant)
    rec.throughput = Throughput(headline=examples_per_sec, median=typical,
                                mean_rate=examples_per_sec, spread_pct=1.0,
                                per_repeat=[examples_per_sec])
    rec.step_time = StepTime(median=variant.global_batch / typical, n=10)
    return rec.finish("ok")


def finished(variant, status: str, reason: str) -> VariantRecord:
    return VariantRecord.begin(variant).finish(status, reason=reason)


@pytest.fixture
def variants():
    return expand(parse_scenario(DOC))


def test_run_dirs_are_never_reused(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = results.create_run_dir(tmp_path, "my scenario/<x>", now)
    second = results.create_run_dir(tmp_path, "my scenario/<x>", now)
    assert first != second
    assert first.name == "my_scenario_x-20260102T030405Z"
    assert second.name == first.name + "-1"
    assert (first / "logs").is_dir()


def test_records_append_and_survive_a_partial_run(tmp_path: Path, variants) -> None:
    run_dir = results.create_run_dir(tmp_path, "r")
    results.append_record(run_dir, ok_record(variants[0], 100.0))
    results.append_record(run_dir, finished(variants[1], "failed", "boom"))
    back = results.read_records(run_dir)
    assert [r.status for r in back] == ["ok", "failed"]
    assert back[1].reason == "boom"
    assert len((run_dir / results.RECORDS_FILE).read_text().splitlines()) == 2


def test_scaling_efficiency_is_against_the_same_strategy_at_one_replica(variants) -> None:
    default, m1, m2, m4 = variants
    records = add_scaling_efficiency([ok_record(default, 500.0), ok_record(m1, 400.0),
                                      ok_record(m2, 600.0), ok_record(m4, 800.0)])
    eff = {r.variant_id: r.scaling_efficiency for r in records}
    assert eff[m2.id] == pytest.approx(600 / (2 * 400))
    assert eff[m4.id] == pytest.approx(800 / (4 * 400))
    assert eff[m1.id] == pytest.approx(1.0)
    assert eff[default.id] is None  # no replica sweep for the baseline strategy
    assert {r.scaling_kind for r in records if r.scaling_efficiency} == {"weak"}


def test_no_efficiency_without_a_successful_single_replica_run(variants) -> None:
    _, m1, m2, _ = variants
    records = add_scaling_efficiency([finished(m1, "failed", "x"), ok_record(m2, 600.0)])
    assert all(r.scaling_efficiency is None for r in records)


def test_load_records_frame_reads_many_run_dirs(tmp_path: Path, variants) -> None:
    for throughput_scale in (1.0, 2.0):
        run_dir = results.create_run_dir(tmp_path, "r")
        results.init_run(run_dir, _scenario_file(tmp_path), [v.model_dump(mode="json")
                                                             for v in variants],
                         {"git_commit": "abc", "started_at": "now"})
        for v, thr in zip(variants, (500.0, 400.0, 600.0, 800.0), strict=True):
            results.append_record(run_dir, ok_record(v, thr * throughput_scale))
        results.append_record(run_dir, finished(variants[0], "skipped", "why"))
    frame = results.load_records_frame(tmp_path)  # a folder of run directories
    assert len(frame) == 10
    assert frame["run"].nunique() == 2
    assert set(frame["status"]) == {"ok", "skipped"}
    assert str(frame["replicas"].dtype) == "Int64"
    m2 = frame[(frame.strategy == "mirrored") & (frame.replicas == 2)]
    assert list(m2["scaling_efficiency"]) == pytest.approx([0.75, 0.75])
    assert sorted(m2["examples_per_sec"]) == [600.0, 1200.0]
    assert frame.loc[frame.status == "skipped", "reason"].tolist() == ["why", "why"]


def test_load_records_frame_rejects_something_else(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="missing: not a bench run directory"):
        results.load_records_frame(tmp_path / "missing")


def test_a_line_cut_short_is_left_out_and_named_and_the_rest_is_read(tmp_path: Path,
                                                                      variants) -> None:
    """What a crash mid-write leaves: every whole record read, the cut line in a warning and in
    the records' `damage`, for the report's page."""
    run_dir = results.create_run_dir(tmp_path, "r")
    for variant in variants[:3]:
        results.append_record(run_dir, ok_record(variant, 100.0))
    path = run_dir / results.RECORDS_FILE
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.warns(DamagedRun, match=r"records.jsonl: line 3: cut short .*2 record\(s\) read"):
        back = results.read_records(run_dir)
    assert [r.variant_id for r in back] == [v.id for v in variants[:2]]
    assert back.damage == [f"{path}: line 3: cut short (the run stopped while writing it); "
                           "left out"]


def test_a_stored_record_needs_the_fields_every_writer_sets(tmp_path: Path, variants) -> None:
    run_dir = results.create_run_dir(tmp_path, "r")
    results.append_record(run_dir, ok_record(variants[0], 100.0))
    line = json.loads((run_dir / results.RECORDS_FILE).read_text())
    for missing in ("variant_id", "status", "variant"):
        (run_dir / results.RECORDS_FILE).write_text(json.dumps(
            {k: v for k, v in line.items() if k != missing}) + "\n")
        with pytest.warns(DamagedRun, match=rf"line 1: {missing}: missing"):
            assert results.read_records(run_dir) == []


@pytest.mark.parametrize("name, problem", [
    ("v" * 201, "201 bytes, longer than a file name may be (200)"),
    ("../up", "not a file name"), ("..", "not a file name"), ("", "empty"), (7, "not text")])
def test_a_variant_id_that_cannot_be_a_file_name_is_named(name: object, problem: str) -> None:
    assert results.file_name_problem(name).startswith(problem)
    assert results.file_name_problem("mirrored-r2-fit-float32-gb128") is None


def test_a_long_name_becomes_a_bounded_file_name() -> None:
    long = results.slug("s" * 20_000_000)
    assert len(long) == results.MAX_NAME_BYTES and long != results.slug("s" * 19_999_999)
    assert results.slug("my scenario/../x") == "my_scenario_.._x"


def test_a_file_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("kept\n")
    with pytest.raises(BenchError) as info:
        results.write_json(tmp_path / "a-file" / "out.json", {})
    assert str(info.value) == (f"{tmp_path}/a-file/out.json: cannot write: a part of its path "
                               "is a file, not a folder")
    (tmp_path / "out.json").mkdir()
    with pytest.raises(BenchError, match="out.json: cannot write: is a folder, not a file"):
        results.write_text_atomic(tmp_path / "out.json", "{}")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "a-file", tmp_path / "out.json"]  # no .tmp
    assert (tmp_path / "a-file").read_text() == "kept\n"


@pytest.mark.parametrize("content, expect, problem", [
    (b"[]", dict, "holds a list, not an object"),
    (b"{", None, "not JSON (Expecting property name enclosed in double quotes"),
    (b"\xff", None, "not UTF-8 text (byte 0xff at offset 0)"),
    (b"[" * 100_000 + b"]" * 100_000, None, "nested too deeply to read")])
def test_json_that_cannot_be_read_is_one_line_naming_the_file(
        tmp_path: Path, content: bytes, expect: type | None, problem: str) -> None:
    path = tmp_path / "environment.json"
    path.write_bytes(content)
    with pytest.raises(BenchError) as info:
        results.read_json(path, expect)
    assert str(info.value).startswith(f"{path}: {problem}")


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.src.toml"
    path.write_text(json.dumps(DOC))
    return path


def test_a_variant_is_found_by_id_in_a_scenario_or_a_run(tmp_path: Path, variants) -> None:
    entries = [v.model_dump(mode="json", by_alias=True) for v in variants]
    wanted = variants[2]
    assert results.variant_by_id(variants, wanted.id, "s.toml") is wanted
    assert results.variant_by_id(entries, wanted.id, "variants.json") == wanted  # validated
    with pytest.raises(BenchError) as info:
        results.variant_by_id(entries, "nope", "run/variants.json")
    assert str(info.value) == (f"run/variants.json: no variant 'nope' (have: "
                               f"{', '.join(v.id for v in variants)})")


@pytest.mark.parametrize("entry", [
    ("bench.worker", "--record", "{record}"),
    ("bench.launch.supervisor", "--record", "{record}", "--network", "host"),
    ("bench", "worker", "--variant", "nope", "{variants}"),
])
def test_every_entry_point_names_a_missing_variant_in_one_line(
        tmp_path: Path, variants, entry: tuple[str, ...]) -> None:
    """The worker, the local-cluster supervisor and `bench worker` look variants up alike."""
    path = tmp_path / results.VARIANTS_FILE
    results.write_json(path, [v.model_dump(mode="json", by_alias=True) for v in variants])
    module, *rest = (a.format(record=tmp_path / "r.json", variants=path) for a in entry)
    ids = () if module == "bench" else ("--variants", str(path), "--id", "nope")
    proc = subprocess.run([sys.executable, "-m", module, *rest, *ids], capture_output=True,
                          text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(
        f"{path}: no variant 'nope' (have: {', '.join(v.id for v in variants)})"), proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()
