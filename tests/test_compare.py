"""The regression detector: pure statistics on synthetic samples, record matching, and the CLI."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import fingerprint, results
from bench.compare.detector import compare_records, compare_samples, mann_whitney_p
from bench.compare.simulation import rates, synthetic_run
from bench.record.model import VariantRecord
from bench.scenario.loading import parse_scenario
from bench.scenario.matrix import expand
from tests.conftest import bench

DOC = {"scenario": {"name": "cmp"}, "batch": {"rule": "weak", "per_replica": 16},
       "train": {"api": "ctl"}, "compare": {"min_effect": 0.05},
       "strategies": [{"name": "default"}, {"name": "mirrored", "replicas": 2, "min_effect": 0.2}]}


def test_aa_almost_never_flags_and_a_10pct_slowdown_always_does() -> None:
    false_alarms, detections = rates(trials=40, shift=0.10, seed=0)
    assert false_alarms == 0.0
    assert detections == 1.0


def test_mann_whitney_matches_known_values() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 200)
    assert mann_whitney_p(a, a.copy()) > 0.9
    assert mann_whitney_p(a, a + 1.0) < 1e-10
    assert 0.0 <= mann_whitney_p(a, rng.normal(0, 1, 150)) <= 1.0


def test_mann_whitney_is_scipys_asymptotic_test() -> None:
    """bench's own copy (scipy.stats takes about a second to import, a `bench compare`'s whole
    budget) gives scipy's two-sided p-value, with ties (step times on a coarse clock) and without."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    for shift in (0.0, 0.05, 0.3):
        a, b = rng.normal(1, 0.2, 120), rng.normal(1 + shift, 0.2, 90)
        for x, y in ((a, b), (np.round(a, 1), np.round(b, 1))):
            expected = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
            assert mann_whitney_p(x, y) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_improvement_and_min_effect() -> None:
    rng = np.random.default_rng(2)
    base = synthetic_run(rng)
    assert compare_samples(base, synthetic_run(rng, 0.8)).status == "improvement"
    slower = synthetic_run(rng, 1.10)
    assert compare_samples(base, slower, min_effect=0.05).status == "regression"
    assert compare_samples(base, slower, min_effect=0.20).status == "unchanged"


def test_an_unchanged_verdict_says_why_a_significant_ratio_is_no_change() -> None:
    """A ratio of 0.92 at a tiny p is "unchanged" when it misses the minimum effect or its
    interval reaches 1; its line says which, and says nothing where nothing needs saying."""
    rng = np.random.default_rng(7)
    base = synthetic_run(rng, windows=6)
    small = compare_samples(base, synthetic_run(rng, 0.92, windows=6), min_effect=0.10)
    assert small.status == "unchanged" and small.p_value < 1e-4
    assert re.fullmatch(r"significant \(p = \S+\) but [78]\.\d% faster is within the minimum "
                        r"effect of 10%", small.note), small.note
    # half the candidate's windows as fast as the baseline's, half 16% faster: the pooled
    # median moves 8%, the windows disagree, the interval over windows reaches 1
    split = [w * (0.84 if i % 2 else 1.0) for i, w in enumerate(synthetic_run(rng, windows=6))]
    torn = compare_samples(base, split)
    assert torn.status == "unchanged" and torn.p_value < 0.01 and torn.ratio < 0.95
    assert torn.ci_high is not None and torn.ci_high >= 1.0
    assert torn.note == (f"significant (p = {torn.p_value:.2g}) but the 99% interval "
                         f"{torn.ci_low:.3f}-{torn.ci_high:.3f} includes 1 (the windows disagree)")
    lean = compare_samples(base, synthetic_run(rng, 0.85, windows=1, steps=8), always_ci=False)
    assert lean.status == "unchanged" and lean.note.startswith("not significant (p = ")
    assert "not below 0.01" in lean.note
    same = compare_samples(base, synthetic_run(rng, windows=6))
    assert same.status == "unchanged" and same.p_value > 0.01 and same.note == ""


def record(variant, scale: float, rng: np.random.Generator, *, kind: str = "cpu",
           status: str = "ok") -> VariantRecord:
    rec = VariantRecord.begin(variant)
    if status == "ok":
        rec.add(samples={"timed": [w.tolist() for w in synthetic_run(rng, scale)]},
                devices={"kind": kind}, data_source="synthetic")
    return rec.finish(status, reason=None if status == "ok" else "boom")


@pytest.fixture
def variants():
    return expand(parse_scenario(DOC))


def test_records_are_matched_by_identity(variants) -> None:
    rng = np.random.default_rng(3)
    default, mirrored = variants
    base = [record(default, 1.0, rng), record(mirrored, 1.0, rng)]
    cand = [record(default, 1.15, rng), record(mirrored, 1.15, rng)]
    verdicts = {v.key: v for v in compare_records(base, cand).verdicts}
    assert verdicts[default.id].status == "regression"
    # the mirrored variant sets min_effect = 0.2 in the scenario: 15% is below it
    assert verdicts[mirrored.id].status == "unchanged"
    assert verdicts[mirrored.id].min_effect == 0.2


def test_vanished_and_newly_failing_variants_are_reported(variants) -> None:
    rng = np.random.default_rng(4)
    default, mirrored = variants
    base = [record(default, 1.0, rng), record(mirrored, 1.0, rng)]
    result = compare_records(base, [record(default, 1.0, rng, status="failed")])
    status = {v.key: v.status for v in result.verdicts}
    assert status == {default.id: "now-failing", mirrored.id: "missing"}
    assert result.regressed


def test_different_device_kinds_are_refused_unless_forced(variants) -> None:
    rng = np.random.default_rng(5)
    default = variants[0]
    base, cand = [record(default, 1.0, rng)], [record(default, 1.0, rng, kind="gpu")]
    refused = compare_records(base, cand)
    assert refused.refused and "device kind differs" in refused.refused
    forced = compare_records(base, cand, force=True)
    assert not forced.refused and "forced" in forced.verdicts[0].note


def write_run(root: Path, variants, scale: float, seed: int, cpu: str | None = None) -> Path:
    """A run of synthetic records; with `cpu`, an environment.json naming that CPU model."""
    rng = np.random.default_rng(seed)
    run_dir = results.create_run_dir(root, "cmp")
    results.write_json(run_dir / results.VARIANTS_FILE,
                       [v.model_dump(mode="json", by_alias=True) for v in variants])
    if cpu is not None:
        results.write_json(run_dir / results.ENVIRONMENT_FILE,
                           {**fingerprint.environment(), "cpu_model": cpu})
    for v in variants:
        results.append_record(run_dir, record(v, scale, rng))
    return run_dir


def test_cli_exit_codes_and_reports(tmp_path: Path, variants) -> None:
    base = write_run(tmp_path / "store", variants, 1.0, 10)
    same = write_run(tmp_path / "cand", variants, 1.0, 11)
    slower = write_run(tmp_path / "cand", variants, 1.3, 12)
    ok = bench("compare", str(tmp_path / "store"), str(same))  # a baseline store works too
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "no regression" in ok.stdout
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    bad = bench("compare", str(base), str(slower), "--markdown", str(md), "--json", str(js))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "REGRESSION" in bad.stdout and "REGRESSION" in md.read_text()
    report = json.loads(js.read_text())
    assert report["regressed"] is True
    assert {v["status"] for v in report["verdicts"]} == {"regression"}
    # One baseline run cannot show run-to-run drift: every output says so.
    assert report["baseline_runs"] == 1 and "single run" in report["caveat"]
    assert "caveat: the baseline is a single run" in bad.stdout.replace("\n", " ")
    assert "> Caveat: the baseline is a single run" in md.read_text()
    page = (tmp_path / "r.html").read_text()  # the HTML page goes beside the Markdown
    assert "REGRESSION" in page and "Caveat: the baseline is a single run" in page
    for verdict in report["verdicts"]:
        assert f"<td>{verdict['key']}</td>" in page
        assert f'aria-label="ratio {verdict["ratio"]:.3f}, interval {verdict["ci_low"]:.3f} to' in page
    assert not re.search(r"(src|href)=", page)  # one offline file: loads nothing
    assert "&#34;" not in page  # the inlined stylesheet is not escaped into broken CSS
    named = tmp_path / "named.html"
    again = bench("compare", str(base), str(same), "--html", str(named))
    assert again.returncode == 0 and "no regression" in named.read_text()
    unusable = bench("compare", str(base), str(tmp_path / "nowhere"))
    assert unusable.returncode == 2 and "not a bench run directory" in unusable.stderr
    assert "Traceback" not in unusable.stderr


def test_runs_measured_differently_are_named_in_every_output(tmp_path: Path) -> None:
    """A `--quick` candidate against a full baseline: other rounds, windows and settling, and
    every output says so before its verdicts."""
    def measured(**measure: object) -> list:
        return expand(parse_scenario({**DOC, "measure": measure}))

    full = measured(warmup_steps=10, steps=100, repeats=12, settle_steps=24, min_window_s=0.1)
    quick = measured(warmup_steps=3, steps=20, repeats=2, settle_steps=1, min_window_s=0.0,
                     trace_steps=0)
    base = write_run(tmp_path / "store", full, 1.0, 30)
    cand = write_run(tmp_path / "cand", quick, 1.0, 31)
    md, js = tmp_path / "q.md", tmp_path / "q.json"
    done = bench("compare", str(base), str(cand), "--markdown", str(md), "--json", str(js))
    assert done.returncode == 0, done.stdout + done.stderr
    differ = ("the two runs were measured differently (min_window_s 0.1 -> 0.0, repeats 12 -> 2, "
              "settle_steps 24 -> 1, steps 100 -> 20, warmup_steps 10 -> 3; ")
    assert json.loads(js.read_text())["measured_differently"].startswith(differ)
    assert f"> **Warning:** {differ}" in md.read_text()
    page = html.unescape((tmp_path / "q.html").read_text())
    assert f"<strong>Warning:</strong> {differ}" in page
    assert f"warning: {differ}" in " ".join(done.stdout.split())
    alike = bench("compare", str(base), str(write_run(tmp_path / "cand", full, 1.0, 32)),
                  "--json", str(js))
    assert alike.returncode == 0 and json.loads(js.read_text())["measured_differently"] is None
    assert "measured differently" not in alike.stdout


def test_stored_runs_of_another_machine_are_no_baseline(tmp_path: Path, variants) -> None:
    from rich.console import Console

    from bench.nightly import gate

    store = tmp_path / "store"
    for seed in (20, 21):  # a faster machine's runs: 30% quicker
        write_run(store, variants, 0.7, seed, cpu="Intel Xeon Platinum 8481C")
    cand = write_run(tmp_path / "cand", variants, 1.0, 22, cpu="AMD EPYC")
    refused = bench("compare", str(store), str(cand))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert "no run of scenario 'cmp' on this run's machine (AMD EPYC [" in line
    assert "its 2 run(s) ran on Intel Xeon Platinum 8481C [" in line and "--force" in line
    assert "\n" not in line and "Traceback" not in line
    forced = bench("compare", str(store), str(cand), "--force")
    assert forced.returncode == 1 and "REGRESSION" in forced.stdout  # the machine, not the code
    write_run(store, variants, 1.0, 23, cpu="AMD EPYC")  # one run on the candidate's machine
    mixed = bench("compare", str(store), str(cand))
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    assert "2 run(s) of the baseline ran on another machine: set aside" in mixed.stdout
    # the nightly gate starts a machine's own baseline rather than judge it by another's
    console = Console(record=True, width=300)
    elsewhere = tmp_path / "elsewhere"
    write_run(elsewhere, variants, 0.7, 24, cpu="Intel Xeon Platinum 8481C")
    assert gate(cand, elsewhere, tmp_path / "site", console) is None
    assert "this run starts this machine's baseline" in " ".join(console.export_text().split())
    assert gate(cand, store, tmp_path / "site", console) is False


def test_a_run_before_the_machine_fields_matches_on_the_rest() -> None:
    old = fingerprint.machine({"cpu_model": "AMD EPYC", "cpu_count": 2})
    new = fingerprint.machine({"cpu_model": "AMD EPYC", "cpu_count": 2, "cpu_flags": ["avx2"],
                               "gpus": [], "hostname": "another-vm"})
    assert fingerprint.same_machine(old, new) and fingerprint.same_machine(new, old)
    assert not fingerprint.same_machine(new, {**new, "cpu_flags": ["avx2", "avx512f"]})
    gpus = fingerprint.machine({"cpu_model": "x", "gpus": [{"name": "A100"}, {"name": "A100"}]})
    assert fingerprint.describe_machine(gpus) == "x + 2 A100"
    assert fingerprint.describe_machine(new) == "AMD EPYC [avx2] x2"


def test_compare_imports_no_tensorflow() -> None:
    code = "import sys, bench.compare.detector; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_baseline_store_absorbs_run_to_run_drift() -> None:
    from bench.compare.simulation import drift_rates

    # whole runs drift by 10% CV, as on this shared machine
    rates_ = drift_rates(trials=30, shift=1.0, seed=0)
    assert rates_["aa_single"] > 0.2  # one run vs one run cries wolf...
    assert rates_["aa_store"] == 0.0  # ...a store of 5 runs does not
    assert rates_["detect_store"] >= 0.9  # and a 2x slowdown still flags (29 of 30 here)


def test_store_verdicts_say_why_they_were_demoted(variants) -> None:
    rng = np.random.default_rng(6)
    default = variants[0]
    history = [[record(default, scale, rng)] for scale in (0.8, 1.0, 1.25, 0.9, 1.15)]
    verdict = compare_records(history[-1], [record(default, 1.25, rng)], history=history).verdicts[0]
    assert verdict.history_runs == 5 and verdict.between_run_cv > 0.1
    assert verdict.status == "unchanged"
    assert "run-to-run variation" in verdict.note


def test_a_store_compares_with_its_typical_run_not_a_burst(variants) -> None:
    rng = np.random.default_rng(7)
    default = variants[0]
    history = [[record(default, scale, rng)] for scale in (1.0, 1.02, 1.6)]  # the newest: a burst
    chosen = compare_records(history[-1], [record(default, 1.0, rng)], history=history,
                             run_to_run=False).verdicts[0]
    assert chosen.baseline_median_s == pytest.approx(0.005 * 1.02, rel=0.05)  # the median run
    assert chosen.status == "unchanged"  # not an "improvement" against the burst


def test_a_regression_must_hold_in_every_re_run(variants) -> None:
    from bench.compare.reruns import confirm

    rng = np.random.default_rng(8)
    default, mirrored = variants[0], variants[1]
    base = [record(default, 1.0, rng), record(mirrored, 1.0, rng)]

    def candidate(default_scale: float, mirrored_scale: float) -> object:
        return compare_records(base, [record(default, default_scale, rng),
                                      record(mirrored, mirrored_scale, rng)])

    first = candidate(1.5, 1.5)  # both look 50% slower once
    assert [v.status for v in first.verdicts] == ["regression", "regression"]
    result = confirm(first, [candidate(1.5, 1.0), candidate(1.5, 1.5)])  # mirrored: a burst
    by_key = {v.key: v for v in result.verdicts}
    assert by_key[default.id].status == "regression"
    assert "confirmed by 2 re-run(s)" in by_key[default.id].note
    assert by_key[mirrored.id].status == "unchanged"
    assert "not confirmed: 1 of 2 re-run(s) regressed" in by_key[mirrored.id].note
    assert result.confirmations == 2 and result.caveat is None


def test_nightly_gate_rates_under_bursts_of_interference() -> None:
    from bench.compare.simulation import nightly_rates

    rates_ = nightly_rates(trials=30, shift=0.5, seed=1)
    assert rates_["aa_single"] > 0.15  # one run vs one run: bursts cry wolf
    assert rates_["aa_nightly"] <= 0.07  # typical stored baseline + confirming re-runs
    assert rates_["detect_nightly"] >= 0.8  # and a 50% slowdown is still caught
    assert rates_["detect_store"] < rates_["detect_nightly"]  # the interval alone misses it


def test_input_pipeline_axes_tell_variants_apart() -> None:
    """input_bound.toml's variants differ only in map_parallelism / prefetch: four identities."""
    from bench.compare.detector import identity
    from bench.scaling import group_key
    from bench.scenario.loading import load_variants

    _, variants = load_variants(Path(__file__).parent.parent / "scenarios/input_bound.toml")
    records = [VariantRecord.begin(v) for v in variants]
    assert len({identity(r) for r in records}) == len(records) == 4
    assert len({group_key(r.variant) for r in records}) == 4
    old = VariantRecord.load({"variant": {**records[0].variant.as_dict, "data": {}}})  # from
    assert identity(old)[-2:] == ("autotune", "autotune")  # before the axes
