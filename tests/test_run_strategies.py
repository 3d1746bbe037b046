"""Every local strategy x API on logical CPU devices, through the real `bench run`."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bench.record.model import VariantRecord
from bench.timing import MAD_TO_SIGMA
from bench.trace.metrics import AGREEMENT
from bench.training.schedule import MAX_SIZED_STEPS
from tests.conftest import BenchRun, bench_run, run_in_fresh_dir, write_scenario
from tests.early import EarlyContext, early_fixture

pytestmark = pytest.mark.slow

MATRIX = """
[measure]
control = false   # no A/A twin, no yardstick: just the matrix
trace_steps = 10  # every variant's trace and short epoch are read here
epochs = 1

[train]
api = ["fit", "ctl"]
distribute_dataset = ["experimental_distribute_dataset", "distribute_datasets_from_function"]

[[strategies]]
name = "default"

[[strategies]]
name = "one_device"

[[strategies]]
name = "mirrored"
replicas = [1, 2]

[[strategies]]
name = "central_storage"
replicas = 2
"""


def start_matrix(context: EarlyContext) -> tuple[BenchRun, Path]:
    """The run, and the TMPDIR `bench run` itself was started with."""
    outer_tmp = context.tmp_path_factory.mktemp("outer_tmp")
    return (run_in_fresh_dir(context.tmp_path_factory, "matrix", MATRIX,
                             env={"TMPDIR": str(outer_tmp)}), outer_tmp)


matrix_run = early_fixture("matrix", start_matrix, part=0)
outer_tmp = early_fixture("matrix", start_matrix, part=1)


def test_workers_leave_no_temporary_files(matrix_run: BenchRun, outer_tmp: Path) -> None:
    """Workers end with os._exit, before TensorFlow removes its autograph files: they write
    them into the run's own temporary folder, which the run removes."""
    assert matrix_run.proc.returncode == 0 and matrix_run.run_dir is not None
    assert not list(outer_tmp.glob("__autograph_generated_file*"))
    assert not (matrix_run.run_dir / "tmp").exists()


def test_all_variants_ok(matrix_run: BenchRun) -> None:
    assert matrix_run.proc.returncode == 0, matrix_run.proc.stdout + matrix_run.proc.stderr
    records = matrix_run.records
    assert len(records) == 5 * 3  # 5 strategy points x (fit + 2 dataset modes of ctl)
    bad = {r["variant_id"]: r["reason"] for r in records if r["status"] != "ok"}
    assert not bad


EXPECTED_CLASS = {"default": "_DefaultDistributionStrategy", "one_device": "OneDeviceStrategy",
                  "mirrored": "MirroredStrategy", "central_storage": "CentralStorageStrategy"}


def test_each_record_is_the_strategy_it_claims(matrix_run: BenchRun) -> None:
    for rec in matrix_run.records:
        v = rec["variant"]
        info = rec["strategy_info"]
        assert info["class"] == EXPECTED_CLASS[v["strategy"]], rec["variant_id"]
        assert info["num_replicas_in_sync"] == v["replicas"]
        assert len(rec["devices"]["logical"]) >= v["replicas"]
        # the device kind follows this host: GPUs where TensorFlow sees any, else logical CPUs
        assert rec["devices"]["kind"] == ("gpu" if rec["gpu"]["count"] else "cpu")
        assert rec["devices"]["simulated"] == (rec["devices"]["kind"] == "cpu"
                                                and v["replicas"] > 1)


def test_measurements_are_complete_and_sane(matrix_run: BenchRun) -> None:
    for rec in matrix_run.records:
        v = rec["variant"]
        assert rec["throughput"]["median"] > 0
        step = rec["step_time"]
        assert rec["throughput"]["spread_pct"] == pytest.approx(
            100 * MAD_TO_SIGMA * step["mad"] / step["median"])  # the robust CV of step time
        # unobserved windows of 8 steps that would last well under min_window_s (0.1 s) were
        # lengthened, in both turns alike, from the step time of the warmup and settling; the
        # observed windows keep their 8 steps
        window = rec["measurement"]["window_steps"]
        assert 8 <= window <= MAX_SIZED_STEPS, rec["variant_id"]
        assert window > 8 or 8 * step["median"] > 0.05, (rec["variant_id"], step["median"])
        assert rec["measurement"]["observed_window_steps"] == 8
        assert rec["step_time"]["n"] == 2 * 8
        assert [len(w) for w in rec["samples"]["timed"]] == [8, 8]
        assert len(rec["measurement"]["window_s"]) == len(rec["measurement"]["observed_window_s"]) == 2
        assert len(rec["samples"]["warmup"]) == 2
        # throughput is computed from the GLOBAL batch
        assert rec["throughput"]["median"] == pytest.approx(
            v["global_batch"] / rec["step_time"]["median"])
        timing = rec["timing"]
        assert timing["first_step_s"] > rec["step_time"]["median"]  # tracing happens in warmup
        assert timing["startup_s"] > timing["import_s"] > 0
        assert rec["loss"]["final"] < rec["loss"]["initial"], rec["variant_id"]  # it trained
        assert rec["data_source"].startswith("synthetic(")
        # bench's own per-step time was measured, and it lies inside the samples it taxes
        steps = rec["samples"]["warmup"] + [s for w in rec["samples"]["timed"] for s in w]
        assert 0 < timing["harness_s"] < sum(steps)
        # its hooks run on every loop step before the trace: warmup, and each turn's settling
        # step and both windows (the observed and the unobserved)
        measurement = rec["measurement"]
        settle = measurement["settle_steps"]  # at least 1, as many as 0.1 s held (settle_s)
        assert measurement["interleaved"] and settle >= 1
        loop_steps = 2 + 2 * (settle + window + 8)
        assert timing["harness_share"] == pytest.approx(
            timing["harness_s"] / loop_steps / rec["step_time"]["median"])
        # one short epoch at the finish, on a fresh iterator, ended and timed
        (epoch,) = measurement["epoch_ends"]
        assert epoch["steps"] == 64 and epoch["steps_s"] > 0 and epoch["finished"]
        assert epoch["waited"] == (epoch["end_s"] >= 0.1)
        assert timing["phases"]["epoch_ends"] >= epoch["steps_s"] + epoch["end_s"]


def summary_rows(out: str) -> list[list[str]]:
    """The cells of each body row of the end-of-run table, in order."""
    return [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in out.splitlines() if line.startswith("│")]


def test_scaling_efficiency_in_the_summary(matrix_run: BenchRun) -> None:
    out = matrix_run.proc.stdout
    assert "scaling eff." in out
    records = matrix_run.records
    # weak scaling: n replicas against the 1-replica mirrored point of the same API path
    one = {(r["variant"]["api"], r["variant"]["distribute_dataset"]):
           VariantRecord.load(r).headline for r in records
           if r["variant"]["strategy"] == "mirrored" and r["variant"]["replicas"] == 1}
    rows = summary_rows(out)
    assert len(rows) == len(records), rows
    for rec, row in zip(records, rows, strict=True):
        v = rec["variant"]
        assert f"     ok {rec['variant_id']}  " in out  # its own outcome line
        assert row[0].startswith(v["strategy"]) and row[1] == str(v["replicas"]), row
        if v["strategy"] == "mirrored":
            eff = VariantRecord.load(rec).headline / (v["replicas"] * one[v["api"], v["distribute_dataset"]])
            assert row[-2] == f"{eff:.2f} (weak)", (rec["variant_id"], row)
        else:  # no replica sweep to compare against (central_storage runs at 2 only)
            assert row[-2] == "-", (rec["variant_id"], row)
        assert row[-1] == "ok"


def test_run_directory_layout(matrix_run: BenchRun) -> None:
    run_dir = matrix_run.run_dir
    assert run_dir is not None
    for name in ("scenario.toml", "variants.json", "environment.json", "records.jsonl",
                 "timing.json"):
        assert (run_dir / name).is_file(), name
    # One log per variant and the fork server's; a trace analysis keeps its log only when it
    # failed; the run's data cache is gone.
    assert {p.name for p in (run_dir / "logs").glob("*.log")} == {
        f"{r['variant_id']}.log" for r in matrix_run.records} | {"forkserver.log"}
    assert not (run_dir / "cache").exists()
    assert not list((run_dir / "logs").glob("*.record.json"))  # moved into records.jsonl
    from bench.results import load_records_frame

    frame = load_records_frame(run_dir)
    assert len(frame) == len(matrix_run.records)
    m2 = frame[(frame.strategy == "mirrored") & (frame.replicas == 2)]
    assert m2["scaling_efficiency"].notna().all()
    # the typical-step rate has its own column; `examples_per_sec` is the headline
    assert frame["typical_step_examples_per_sec"].tolist() == pytest.approx(
        [r["throughput"]["median"] for r in matrix_run.records])


def test_a_second_run_never_overwrites_the_first(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, '[train]\napi = "ctl"\n[[strategies]]\nname = "default"\n',
                              name="twice")
    first = bench_run(scenario, tmp_path / "results", "--steps", "4", "--repeats", "1", "--no-control")
    second = bench_run(scenario, tmp_path / "results", "--steps", "4", "--repeats", "1", "--no-control")
    assert first.run_dir != second.run_dir
    assert len(first.records) == len(second.records) == 1


def test_every_variant_leaves_a_trace_outside_the_timed_window(matrix_run: BenchRun) -> None:
    for rec in matrix_run.records:
        trace = rec["trace"]
        assert trace["status"] == "captured", rec["variant_id"]
        assert trace["dir"].endswith(f"traces/{rec['variant_id']}")
        xplanes = list(Path(trace["dir"]).glob("plugins/profile/*/*.xplane.pb"))
        assert len(xplanes) == 1 and xplanes[0].stat().st_size > 1000
        # traced steps are their own window: never part of the timed statistics
        assert len(rec["samples"]["traced"]) == trace["steps"] == 10
        assert rec["step_time"]["n"] == 2 * rec["measurement"]["observed_window_steps"]
        # the profiler's cost: the traced steps against as many untraced ones just before
        untraced = rec["samples"]["trace_base"]
        assert len(untraced) == 10
        assert trace["overhead_ratio"] == pytest.approx(statistics.median(
            t / u for t, u in zip(rec["samples"]["traced"], untraced, strict=True)))
        low, high = trace["overhead_interval"]
        assert low <= trace["overhead_ratio"] <= high
        assert trace["overhead_flagged"] is (low > 1.02)
        assert 0.5 < trace["overhead_ratio"] < 10, rec["variant_id"]


def test_every_record_carries_the_trace_breakdown(matrix_run: BenchRun) -> None:
    for rec in matrix_run.records:
        analysis = rec["trace"]["analysis"]
        assert analysis["status"] == "ok", (rec["variant_id"], analysis.get("error"))
        breakdown = analysis["breakdown_ms"]
        assert set(breakdown) == {"input", "compute", "collective", "other"}
        assert all(v >= 0 for v in breakdown.values())
        assert sum(breakdown.values()) == pytest.approx(analysis["step_time_ms"]["mean"], abs=0.01)
        # xprof's steps are bench's traced steps (less the first and last): its mean lies among them
        trace_mean = analysis["step_time_ms"]["mean"]
        traced_ms = [s * 1000 for s in rec["samples"]["traced"]]
        assert 0.95 * min(traced_ms) <= trace_mean <= 1.05 * max(traced_ms), rec["variant_id"]
        assert analysis["top_ops"] and analysis["input_conclusion"]
        check = analysis["cross_check"]
        bench_ms = rec["step_time"]["median"] * 1000
        assert check["bench_median_step_ms"] == pytest.approx(bench_ms, abs=1e-3)
        assert check["trace_mean_step_ms"] == trace_mean
        assert check["ratio"] == pytest.approx(trace_mean / bench_ms, abs=1e-3)
        # judged on the unrounded ratio: the stored one is rounded (1.2504 is stored as 1.25)
        assert check["agrees"] == (1 / AGREEMENT <= trace_mean / bench_ms <= AGREEMENT)
        if rec["variant"]["replicas"] == 2 and rec["variant"]["strategy"] == "mirrored":
            assert breakdown["collective"] > 0  # two replicas all-reduce their gradients
        # its outcome line gives the breakdown scaled to its own untraced median step
        untraced_ms = rec["step_time"]["median"] * 1000
        assert f"of the step; on the untraced {untraced_ms:.2f} ms step: " in matrix_run.proc.stdout


def test_every_record_has_flops_and_mfu_against_the_measured_peak(matrix_run: BenchRun) -> None:
    # The seed MLP on 28x28x1 inputs: forward 2 * (784*256 + 256*128 + 128*10) FLOPs per example;
    # a train step is 3x that, minus layer 1's input gradient, which nothing needs.
    forward = 2 * (784 * 256 + 256 * 128 + 128 * 10)
    per_example = 3 * forward - 2 * 784 * 256
    for rec in matrix_run.records:
        use = rec["utilization"]
        assert use["status"] == "ok", use
        assert use["flops_per_step"] == pytest.approx(per_example * rec["effective"]["global_batch"],
                                                      rel=0.01)
        assert use["achieved_flops_per_s"] == pytest.approx(
            use["flops_per_step"] / rec["step_time"]["median"])
        assert use["peak"]["dtype"] == "float32" and use["peak_devices"] == 1  # logical CPUs
        assert 0 < use["mfu"] < 1
    # The peak is the best of up to 3 measurements from separate workers, then settled.
    counts = [len(r["utilization"]["peak"]["samples"]) for r in matrix_run.records]
    assert counts == sorted(counts) and 1 <= counts[0] and counts[-1] == 3, counts
    for rec in matrix_run.records:
        peak = rec["utilization"]["peak"]
        assert peak["flops_per_s"] == max(peak["samples"])
