"""[target]: training to a quality target on real Fashion-MNIST, recorded per seed, ranked, shown;
a bad target is one line naming its field."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from bench.compare.convergence import convergence_verdict
from bench.data.arrays import DEBIAN_FASHION_MNIST_DIR
from bench.record.model import VariantRecord
from bench.record.target import spread
from bench.scenario.digest import digest_json
from bench.scenario.loading import load_scenario
from bench.scenario.target import default_direction, value_problem
from tests.browser import IN_CI
from tests.conftest import FASHION_MNIST_CTL, REPO, BenchRun, bench, run_in_fresh_dir
from tests.early import EarlyContext, early_fixture

EVERY = 3840  # 60 steps of 64, 30 of 128
BODY = f"""
[measure]
warmup_steps = 2
steps = 8
repeats = 2
control = false
timeout_s = 240

{FASHION_MNIST_CTL}
[target]
value = 0.7
every_examples = {EVERY}
max_examples = 38400
max_seconds = 30
seeds = 2

[[strategies]]
name = "default"
api = ["fit", "ctl"]

[[strategies]]
name = "mirrored"
replicas = 2
batch = {{ per_replica = 64, lr_scaling = "linear", lr_warmup_examples = {EVERY} }}

[[strategies]]
name = "one_device"
batch = {{ per_replica = 64, learning_rate = 1e12 }}
"""


def start_target_run(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "to_target", BODY)


target_run = early_fixture("to_target", start_target_run)


@pytest.fixture(scope="module")
def run(target_run: BenchRun) -> BenchRun:
    if not DEBIAN_FASHION_MNIST_DIR.exists():
        if IN_CI:
            pytest.fail(f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing", pytrace=False)
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    assert target_run.proc.returncode == 0, target_run.proc.stdout[-3000:]
    return target_run


LEARNS = ("default-r1-fit-float32-gb64", "default-r1-ctl-float32-gb64",
          "mirrored-r2-weak-linear-wu3840-ctl-float32-gb128")
DIVERGES = "one_device-r1-weak-ctl-float32-gb64"


@pytest.mark.slow
def test_every_variant_is_judged_at_the_same_examples_seen(run: BenchRun) -> None:
    records = run.by_id()
    assert sorted(records) == sorted([*LEARNS, DIVERGES])
    for vid in LEARNS:
        target = records[vid]["target"]
        assert records[vid]["status"] == "ok" and target["status"] == "ok", target
        assert len(target["seeds"]) == 2 and [s["seed"] for s in target["seeds"]] == [0, 1]
        for seed in target["seeds"]:
            examples = [p["examples"] for p in seed["curve"]]
            assert examples == [EVERY * (i + 1) for i in range(len(examples))], vid
            assert all(p["seconds"] > 0 for p in seed["curve"]) and seed["eval_s"] > 0
            assert seed["status"] == "reached", seed
            assert seed["curve"][-1]["value"] >= 0.7 > max(
                [p["value"] for p in seed["curve"][:-1]], default=0.0)
            assert seed["examples"] == seed["curve"][-1]["examples"]
            assert seed["epochs"] == pytest.approx(seed["examples"] / 60000)
            assert 0 < seed["first_step_s"] < seed["seconds"]


@pytest.mark.slow
def test_the_figures_across_seeds_and_the_projection(run: BenchRun) -> None:
    for vid in LEARNS:
        rec = run.by_id()[vid]
        target = rec["target"]
        reached = sorted(s["examples"] for s in target["seeds"])
        assert target["reached"] == 2
        assert target["examples"]["median"] == (reached[0] + reached[1]) / 2
        assert (target["examples"]["low"], target["examples"]["high"]) == tuple(reached)
        headline = rec["throughput"]["headline"]
        assert target["headline"] == headline
        assert target["projected_s"] == pytest.approx(target["examples"]["median"] / headline)
        assert target["agreement"] == pytest.approx(target["measured_steady_s"] /
                                                    target["projected_s"])
        for seed in target["seeds"]:  # the cache filled before the clock, counted apart
            assert 0 < seed["pipeline_s"] < seed["wall_s"] - seed["seconds"] - seed["eval_s"]
    mirrored = run.by_id()[LEARNS[2]]["target"]
    assert mirrored["learning_rate"] == 0.002 and mirrored["warmup_examples"] == EVERY


@pytest.mark.slow
def test_the_record_places_the_headline_against_a_cached_first_pass(run: BenchRun) -> None:
    """Fashion-MNIST's 60,000 examples at batch 64 are 938 steps: every headline step of this
    short plan runs while tf.data's cache fills, and the record says so."""
    for vid in LEARNS:
        rec = run.by_id()[vid]
        first = rec["measurement"]["first_pass"]
        batch = rec["effective"]["global_batch"]
        assert first["train_examples"] == 60000 and first["pass_steps"] == -(-60000 // batch)
        assert first["timed_steps_inside"] == first["timed_steps"] == rec["timing"]["timed_steps"]


@pytest.mark.slow
def test_a_diverging_variant_is_recorded_and_the_run_goes_on(run: BenchRun) -> None:
    rec = run.by_id()[DIVERGES]
    assert rec["status"] == "ok" and rec["target"]["reached"] == 0
    for seed in rec["target"]["seeds"]:
        assert seed["status"] == "diverged" and seed["stopped_by"] == "diverged", seed
        assert seed["examples"] is None and seed["curve"][-1]["value"] is None
    assert "2 diverged" in run.proc.stdout


@pytest.mark.slow
def test_the_terminal_and_the_report_rank_by_time_to_target(run: BenchRun) -> None:
    out = run.proc.stdout
    # entries that differ only in their [batch] table differ in the throughput table too; the
    # run's own terminal wraps the cell where its widths put it, a wide one holds it whole
    from bench.report.runs import load_run
    from bench.report.terminal import render_summary

    assert "batch rule" in out
    wide = Console(file=io.StringIO(), width=400)
    render_summary(wide, load_run(run.run_dir).records)
    assert "weak, lr linear, warmup 3,840 ex" in wide.file.getvalue()
    assert "Time to target (accuracy ≥ 0.7 on test" in out and "Fastest to accuracy ≥ 0.7" in out
    fastest = min(LEARNS, key=lambda v: run.by_id()[v]["target"]["seconds"]["median"])
    assert f"Fastest to accuracy ≥ 0.7: {fastest}" in out.replace("\n", " ")
    reports = run.run_dir.parent.parent / "reports" / run.run_dir.name
    page = next(reports.glob("run-*.html")).read_text()
    for part in ("section-targets", "target-curves-examples", "target-curves-seconds",
                 "target-speed", f"Fastest to accuracy ≥ 0.7: {fastest}"):
        assert part in page, part


GOOD = """
[scenario]
name = "t"
[data]
name = "fashion_mnist"
[batch]
per_replica = 64
[target]
value = 0.8
every_examples = 15360
max_examples = 200000
[[strategies]]
name = "default"
[[strategies]]
name = "mirrored"
replicas = 2
"""


@pytest.mark.parametrize(("change", "field", "words"), [
    (("value = 0.8", "value = 1.5"), "target.value", "outside what accuracy can reach"),
    (("value = 0.8", 'metric = "loss"\nvalue = -1.0'), "target.value", "never negative"),
    (("value = 0.8", 'metric = "auc"\nvalue = 0.8'), "target.metric", "not computed by the model"),
    (("every_examples = 15360", "every_examples = 300000"), "target.every_examples",
     "beyond the budget of 200,000 examples"),
    (("every_examples = 15360", "every_examples = 15000"), "target.every_examples",
     "not a multiple of the global batch 64"),
    (('name = "fashion_mnist"', 'name = "fashion_mnist"\nfallback = "synthetic"'),
     "data.fallback", "synthetic stand-in"),
    (('name = "fashion_mnist"', 'name = "synthetic"\nnum_examples = 40'),
     "data.num_examples", "fewer than one of each"),
    (("max_examples = 200000", "max_seconds = 200.0\nseeds = 2"), "target.max_examples",
     "give a budget"),
    (("max_examples = 200000", "max_examples = 200000\nmax_seconds = 200.0\nseeds = 2"),
     "target.max_seconds", "reach measure.timeout_s"),
    (("value = 0.8", 'value = 0.8\neval_split = "validation"'), "target.eval_split",
     "has the splits 'train' and 'test'"),
])
def test_a_bad_target_is_one_line_naming_its_field(tmp_path: Path, change: tuple[str, str],
                                                   field: str, words: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(*change))
    proc = bench("validate", str(path))
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}: {field}: " in lines[0] and words in lines[0], lines[0]


def test_the_good_target_validates(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    assert bench("validate", str(path)).returncode == 0


def test_mlperf_drops_the_fastest_and_slowest_from_five_seeds() -> None:
    five = spread([5.0, 1.0, 3.0, 9.0, 4.0], seeds=5)
    assert (five.median, five.low, five.high, five.seeds, five.dropped) == (4.0, 3.0, 5.0, 3, 2)
    two = spread([2.0, 4.0], seeds=2)
    assert (two.median, two.dropped) == (3.0, 0)
    # fewer than half the seeds reached it: no median of the lucky ones
    assert spread([2.0], seeds=3).median is None


def test_directions_and_values_follow_the_metric() -> None:
    assert default_direction("accuracy") == "above" and default_direction("loss") == "below"
    assert default_direction("mean_squared_error") == "below"
    assert value_problem("accuracy", 0.0) and not value_problem("accuracy", 1.0)
    assert value_problem("loss", -0.1) and not value_problem("loss", 0.0)
    assert not math.isnan(0.5) and value_problem("my_metric", -5.0) is None


def test_a_scenario_without_a_target_keeps_its_digest() -> None:
    scenario = load_scenario(REPO / "scenarios" / "mnist_mirrored.toml")
    text = digest_json(scenario.model_dump(mode="json", by_alias=True))
    assert '"target"' not in text and "lr_warmup_examples" not in text
    assert "batch" not in json.loads(text)["strategies"][0]
    shipped = load_scenario(REPO / "scenarios" / "batch_scaling.toml")
    text = digest_json(shipped.model_dump(mode="json", by_alias=True))
    assert '"target"' in text and '"start"' not in text  # the default start, added later


def _with_target(examples: list[int], reached: bool = True) -> VariantRecord:
    seeds = [{"seed": i, "status": "reached" if reached else "not_reached",
              "examples": n if reached else None} for i, n in enumerate(examples)]
    figures = spread([float(n) for n in examples], len(examples)) if reached else None
    return VariantRecord.load({
        "schema": 2, "variant_id": "v", "status": "ok", "variant": {"id": "v"},
        "target": {"status": "ok", "metric": "accuracy", "value": 0.85, "seeds": seeds,
                   "examples": figures.to_json() if figures else None}})


def test_compare_judges_examples_to_target_with_the_seeds_spread_as_noise() -> None:
    base = _with_target([61440, 61440, 76800])
    same = convergence_verdict(base, _with_target([61440, 76800, 76800]), 0.05)
    assert same is not None and same.status == "unchanged" and same.ratio == 1.25
    more = convergence_verdict(base, _with_target([92160, 107520, 107520]), 0.05)
    assert more is not None and more.status == "regression" and more.ratio == 1.75
    assert "examples to target ×1.75" in more.words
    fewer = convergence_verdict(_with_target([92160, 107520, 107520]), base, 0.05)
    assert fewer is not None and fewer.status == "improvement"
    lost = convergence_verdict(base, _with_target([0, 0], reached=False), 0.05)
    assert lost is not None and lost.status == "lost" and lost.candidate_examples is None
    assert "no longer reaches accuracy 0.85" in lost.words


@pytest.mark.slow
def test_bench_compare_flags_a_run_that_needs_more_examples(run: BenchRun, tmp_path: Path
                                                            ) -> None:
    candidate = tmp_path / run.run_dir.name
    shutil.copytree(run.run_dir, candidate)
    lines = []
    for line in (candidate / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["variant_id"] == LEARNS[0]:
            for key in ("median", "low", "high"):
                rec["target"]["examples"][key] *= 3
        lines.append(json.dumps(rec))
    (candidate / "records.jsonl").write_text("\n".join(lines) + "\n")
    markdown = tmp_path / "compare.md"
    proc = bench("compare", str(run.run_dir), str(candidate), "--markdown", str(markdown))
    out = proc.stdout.replace("\n", " ")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "examples to target ×3.00" in out and "REGRESSION" in out
    base = run.by_id()[LEARNS[0]]["target"]["examples"]["median"]
    cell = f"{base:,.0f} → {3 * base:,.0f} ×3.00"
    assert "examples to target" in proc.stdout  # the table's own column
    assert f"| {cell} |" in markdown.read_text()
    page = markdown.with_suffix(".html").read_text()
    assert f'<td class="num status-regression">{cell}</td>' in page


@pytest.mark.slow
def test_the_target_charts_are_valid_plotly_figures(run: BenchRun) -> None:
    import plotly.graph_objects as go

    from bench.report.runs import load_run
    from bench.report.target_charts import target_charts
    from bench.report.targets import target_rows

    charts = target_charts(load_run(run.run_dir))
    assert [c.id for c in charts] == ["target-curves-examples", "target-curves-seconds",
                                      "target-speed"]
    for chart in charts:
        assert chart.rendered, chart.note
        go.Figure(chart.figure)  # raises on any property plotly does not know
    curves = charts[0].figure["data"]
    assert len(curves) == 2 * (len(LEARNS) + 1)  # a line per seed, the diverged ones' too
    assert all(x % EVERY == 0 for trace in curves for x in trace["x"])
    legend = [t["name"] for t in curves if t["showlegend"]]  # a variant each, not a seed
    assert len(legend) == len(set(legend)) == len({t["legendgroup"] for t in curves})
    assert all(t["name"] == t["legendgroup"] for t in curves)
    speed = charts[2].figure["data"][0]
    ranked = [row.variant_id for row in target_rows(load_run(run.run_dir).records)]
    assert [ranked[int(t) - 1] for t in speed["text"]] == speed["customdata"]  # dot = its rank


BOTH_BACKENDS = 'api = ["fit", "ctl"]\nbackend = ["tensorflow", "jax"]'
BACKENDS_BODY = f"""
[measure]
warmup_steps = 2
steps = 8
repeats = 2
control = false
trace_steps = 0
epochs = 0
timeout_s = 240

{FASHION_MNIST_CTL.replace('api = "ctl"', BOTH_BACKENDS)}
[target]
value = 0.7
every_examples = {EVERY}
max_examples = 38400
max_seconds = 30
start = "aligned"

[[strategies]]
name = "default"

[[strategies]]
name = "default"
api = "fit"
feed = "numpy"
"""
NUMPY_FITS = ("default-r1-numpy-fit-float32-gb64", "default-r1-numpy-jax-fit-float32-gb64")


def start_backends_target_run(context: EarlyContext) -> BenchRun:
    return run_in_fresh_dir(context.tmp_path_factory, "to_target_backends", BACKENDS_BODY)


backends_target_run = early_fixture("to_target_backends", start_backends_target_run)


@pytest.mark.slow
def test_jax_variants_train_to_target_from_the_same_start_as_tensorflows(
        backends_target_run: BenchRun) -> None:
    """`start = "aligned"`: JAX's custom loop trains the very model TensorFlow's does, so its
    accuracy at every evaluation is TensorFlow's; JAX's fit trains to the target too (on
    another order of the same data: Keras' JAX trainer iterates the pipeline once before
    training, docs/guides/jax.md#time-to-target)."""
    if not DEBIAN_FASHION_MNIST_DIR.exists():
        if IN_CI:
            pytest.fail(f"CI=true but {DEBIAN_FASHION_MNIST_DIR} is missing", pytrace=False)
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    run = backends_target_run
    assert run.proc.returncode == 0, run.proc.stdout[-3000:]
    records = run.by_id()
    for vid in ("default-r1-jax-fit-float32-gb64", "default-r1-jax-ctl-float32-gb64"):
        target = records[vid]["target"]
        assert target["status"] == "ok" and target["reached"] == 1, (vid, target)
        assert target["seeds"][0]["first_step_s"] > 0 and target["projected_s"] > 0
    tf_curve = records["default-r1-ctl-float32-gb64"]["target"]["seeds"][0]["curve"]
    jax_curve = records["default-r1-jax-ctl-float32-gb64"]["target"]["seeds"][0]["curve"]
    assert [p["examples"] for p in jax_curve] == [p["examples"] for p in tf_curve]
    assert [p["value"] for p in jax_curve] == pytest.approx([p["value"] for p in tf_curve],
                                                            abs=2e-3)
    for vid in NUMPY_FITS:  # fit fed the in-memory arrays trains to the target too
        (seed,) = records[vid]["target"]["seeds"]
        assert seed["status"] == "reached", (vid, seed)
        assert [p["examples"] for p in seed["curve"]] == [
            EVERY * (i + 1) for i in range(len(seed["curve"]))], vid
    out = " ".join(run.proc.stdout.split())
    assert "Time to target" in out and "default-r1-jax-ctl-float32-gb64" in out
