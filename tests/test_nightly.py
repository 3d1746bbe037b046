"""`bench nightly` end to end: a store that starts empty, an A/A night, a deliberately slow night.

The slow night adds a real 768 x 768 matmul to every step (`model.extra_matmul`), several times
the tiny MLP's step here, and is judged by whole runs against a store of three (the nightly run
and its two re-runs against the stored runs, bench.compare.runlevel), on the scenario page as in
the gate; `compare.min_effect = 0.5` keeps run-to-run drift on this shared machine (up to ~20%
between runs of the same code, more in bursts) from failing the A/A night.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench import results
from tests.conftest import REPO, bench, index_or_skip, write_scenario

pytestmark = pytest.mark.slow

BODY = """
[train]
api = "fit"

[measure]
warmup_steps = 5
steps = 30
trace_steps = 0

[compare]
min_effect = 0.5

[[strategies]]
name = "default"
"""


def nightly(scenario: Path, store: Path, reports: Path, *args: str) -> tuple[int, str]:
    proc = bench("nightly", str(scenario), "--store", str(store), "--reports-dir", str(reports),
                 *args)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc.returncode, proc.stdout


def test_first_night_starts_the_store_then_gates(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, BODY, name="nightly_t")
    store, reports = tmp_path / "store", tmp_path / "reports"
    code, out = nightly(scenario, store, reports)
    assert code == 0, out
    assert "this run starts the baseline store" in out
    assert len(list(store.iterdir())) == 1
    assert (reports / "index.html").exists()

    # same code again (A/A), with an upgrade candidate beside it: TensorFlow 2.20's environment
    # (tests/test_environments.py builds it once per session)
    index_or_skip()
    first_page = {p: p.stat().st_mtime_ns for p in reports.glob("run-*.html")}
    code, out = nightly(scenario, store, reports, "--candidate-env", "tensorflow=2.20.*")
    assert code == 0, out
    # the render is incremental: the first night's page is not written again
    assert {p: p.stat().st_mtime_ns for p in first_page} == first_page
    assert "nightly: no regression" in out and "(tf2.20, upgrade candidate)" in out
    assert len(list(store.iterdir())) == 2
    (verdict,) = [json.loads(p.read_text()) for p in reports.glob("compare-*Z.json")]
    assert [(v["key"], v["status"]) for v in verdict["verdicts"]] == [
        ("default-r1-fit-float32-gb16", "unchanged")]  # the store gate leaves the candidate out
    (upgrade,) = [json.loads(p.read_text()) for p in reports.glob("compare-*-tf2.20.json")]
    assert (upgrade["baseline_env"], upgrade["candidate_env"], upgrade["same_run"]) == (
        "none", "tf2.20", True)
    assert [v["key"] for v in upgrade["verdicts"]] == ["default-r1-fit-float32-gb16-tf2.20"]

    # a third run, without the candidate (dropping it is no "missing" variant): from now on the
    # store is large enough for the gate to judge by whole runs
    code, out = nightly(scenario, store, reports, "--keep-traces", "1")
    assert code == 0, out
    assert len(list(store.iterdir())) == 3
    assert "store: dropped the traces of" in out  # every record stays
    assert all(len((run / "records.jsonl").read_text().splitlines()) >= 2 for run in store.iterdir())

    slow_store = tmp_path / "slow_store"  # a copy: the slow night must not join the store
    shutil.copytree(store, slow_store)
    (tmp_path / "slow").mkdir()
    slow = write_scenario(tmp_path / "slow", BODY + "\n[model]\nextra_matmul = 768\n",
                          name="nightly_t")
    code, out = nightly(slow, slow_store, tmp_path / "slow_reports")
    assert code == 1, out
    assert "nightly: REGRESSION in nightly_t-" in out
    assert "re-running them 2 time(s) to confirm" in out
    (md,) = (tmp_path / "slow_reports").glob("compare-*.md")
    row = next(line for line in md.read_text().splitlines()
               if line.startswith("| default-r1-fit-float32-gb16 |"))
    # the nightly run and its two re-runs against the store's three runs, in yardstick steps
    assert "| regression |" in row and "run-level: 3 candidate run(s) vs 3 stored" in row
    (result,) = [json.loads(p.read_text()) for p in (tmp_path / "slow_reports").glob("compare-*.json")]
    verdict = next(v for v in result["verdicts"] if v["key"] == "default-r1-fit-float32-gb16")
    assert verdict["ratio"] > 1.5 and verdict["ci_low"] > 1.0
    # the re-runs stay with the night they judged, and the scenario page marks the night as the
    # gate did: with them
    (night,) = set(slow_store.iterdir()) - {slow_store / run.name for run in store.iterdir()}
    assert len(results.confirmation_dirs(night)) == 2
    page = (tmp_path / "slow_reports" / "scenario-nightly_t.html").read_text()
    assert "Detected steps" in page
    assert re.search(r"regression: step time ×[\d.]+, CI [\d.]+–[\d.]+ against the 3 runs before "
                     r"it, judged by whole runs with its 2 confirmation re-run\(s\)", page), page


def test_bad_scenario_fails_before_anything_runs(tmp_path: Path) -> None:
    good = write_scenario(tmp_path, BODY, name="good")
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenario]\nname = 'bad'\n")
    proc = bench("nightly", str(good), str(bad), "--store", str(tmp_path / "store"),
                 "--reports-dir", str(tmp_path / "reports"))
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(f"error: {bad}: ")
    assert not (tmp_path / "store").exists()


def test_the_workflow_runs_the_nox_session_that_runs_bench_nightly() -> None:
    import yaml

    workflow = yaml.safe_load((REPO / ".github/workflows/nightly.yml").read_text())
    steps = workflow["jobs"]["nightly"]["steps"]
    assert any(step.get("run") == "nox -s nightly" for step in steps)
    assert {"reports/nightly", "results/nightly"} <= {
        line.strip() for step in steps if "upload-artifact" in step.get("uses", "")
        for line in step["with"]["path"].splitlines()}
    noxfile = (REPO / "noxfile.py").read_text()
    assert 'def nightly(session' in noxfile and '"bench", "nightly"' in noxfile
