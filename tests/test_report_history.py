"""A store's history in the report: the trend marks what the nightly gate decides, a re-render
after one more run writes only the pages whose inputs changed, old runs' traces can be dropped
while every record stays, and the gate's t-quantiles are scipy's at every degree of freedom.

Records in bench's schema from tests/fixtures/report_runs.py, with a yardstick in the same
rounds, so the runs are judged in yardstick steps as real interleaved runs are.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import results
from bench.compare import runlevel
from bench.compare.detector import compare_records
from bench.compare.tdist import t_quantile
from bench.report.site import render_site
from tests.conftest import bench
from tests.fixtures.report_runs import ENVIRONMENT, ok_record, variant, write_run

SPECS = [("default-r1-fit-float32-gb64", "default", 1, 0.004),
         ("mirrored-r1-fit-float32-gb64", "mirrored", 1, 0.0045),
         ("mirrored-r2-fit-float32-gb128", "mirrored", 2, 0.012)]
STEPS = re.compile(r"<tr><td>([^<]+)</td><td>([^<]+)</td><td class=\"(?:failed|ok)\">(\w+):")


def night(n: int, slower: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One interleaved run: the yardstick and three variants; `slower` scales a variant's steps."""
    stick = variant("yardstick")
    stick["control"] = "yardstick"
    records = [ok_record(stick, 0.003, seed=100 * n)]
    records += [ok_record(variant(vid, strategy, replicas), step * (slower or {}).get(vid, 1.0),
                          seed=100 * n + i + 1)
                for i, (vid, strategy, replicas, step) in enumerate(SPECS)]
    batch = [r["variant_id"] for r in records]
    return [{**r, "interleave": {"batch": batch}} for r in records]


def add_night(root: Path, n: int, slower: dict[str, float] | None = None,
              traces: bool = False, cpu_model: str | None = None) -> Path:
    env = {**ENVIRONMENT, "started_at": f"2026-11-{n + 1:02d}T03:00:00+00:00"}
    if cpu_model:
        env["cpu_model"] = cpu_model
    run = write_run(root, f"report_test-202611{n + 1:02d}T030000Z", night(n, slower),
                    environment=env)
    if traces:
        (run / "traces" / "yardstick").mkdir(parents=True)
        (run / "traces" / "yardstick" / "profile.pb").write_bytes(b"x" * 1000)
    return run


SUSPECT = "mirrored-r1-fit-float32-gb64"  # the variant the re-run tests slow down


def add_rerun(tonight: Path, factor: float) -> Path:
    """A re-run of tonight's suspect, `factor` times slower, where `bench nightly` keeps it: in
    the night's own confirmations/."""
    n = 10 + len(results.confirmation_dirs(tonight))
    return write_run(tonight / results.CONFIRMATIONS_DIR, f"report_test-202611{n}T040000Z",
                     night(n, {SUSPECT: factor}))


def run_gate(tonight: Path, root: Path, reports: Path,
             rerun: Callable[[list[str]], Path] | None = None) -> bool | None:
    """`bench nightly`'s gate of tonight against the store, its console discarded."""
    from rich.console import Console

    from bench.nightly import gate

    with open(os.devnull, "w") as quiet:
        return gate(tonight, root, reports, Console(file=quiet), rerun, confirm_runs=2)


def gate_steps(runs: list[list[dict[str, Any]]], names: list[str]) -> set[tuple[str, str, str]]:
    """What the gate decides of each run against the runs before it, judged the slow way: the
    whole history through compare_records and runlevel.decide, as `bench nightly` calls them."""
    marked = set()
    for i in range(1, len(runs)):
        history = runs[:i]
        if runlevel.usable(history):
            first = compare_records(history[-1], runs[i], history=history, always_ci=False,
                                    run_to_run=False)
            result = runlevel.decide(first, history, [runs[i]])
        else:
            result = compare_records(history[-1], runs[i], history=history, always_ci=False)
        marked |= {(names[i], v.key, v.status) for v in result.verdicts
                   if v.status in ("regression", "improvement")}
    return marked


def test_the_trend_marks_what_the_gate_decides(tmp_path: Path) -> None:
    root = tmp_path / "store"
    slow = {1: {"default-r1-fit-float32-gb64": 1.3},  # judged by step samples (1 run before)
            5: {"mirrored-r1-fit-float32-gb64": 1.3}}  # judged by whole runs (5 runs before)
    dirs = [add_night(root, n, slow.get(n)) for n in range(7)]
    page = (render_site([root], tmp_path / "site").parent / "scenario-report_test.html").read_text()
    shown = set(STEPS.findall(page))
    expected = gate_steps([results.read_records(d) for d in dirs], [d.name for d in dirs])
    assert shown == expected
    assert (dirs[1].name, "default-r1-fit-float32-gb64", "regression") in shown
    assert (dirs[5].name, "mirrored-r1-fit-float32-gb64", "regression") in shown
    assert "judged by whole runs" in page  # the run-level verdict says how it was reached


def test_a_machine_change_is_no_step_in_the_trend_or_at_the_gate(tmp_path: Path) -> None:
    slower = {vid: 1.3 for vid, *_ in SPECS}  # the variants, not the one-thread yardstick
    for cpu in ("Test CPU", "Other CPU"):
        root, reports = tmp_path / cpu, tmp_path / f"reports-{cpu}"
        for n in range(5):
            add_night(root, n)
        fifth = add_night(root, 5, slower, cpu_model=cpu)
        first_here = run_gate(fifth, root, reports)
        second_here = run_gate(add_night(root, 6, slower, cpu_model=cpu), root, reports)
        site = render_site([root], tmp_path / f"site-{cpu}").parent
        page = (site / "scenario-report_test.html").read_text()
        shown = set(STEPS.findall(page))
        if cpu == "Test CPU":  # the same machine, 30% slower: a step, and the gate flags it
            assert first_here is True and second_here is False
            assert shown == {(fifth.name, vid, "regression") for vid, *_ in SPECS}
            assert "machine: " not in page
        else:  # another machine: it starts its own baseline, then is judged against it
            assert first_here is None and second_here is False
            assert shown == set()
            assert page.count('"text":"machine: Other CPU x2"') == 1  # the trend's line


def test_a_night_the_gate_re_ran_is_marked_with_its_re_runs(tmp_path: Path) -> None:
    """The gate re-runs a suspect and keeps the re-runs in the night's run directory; the trend
    judges the night with them, as the gate did. Three stored nights spread ~5% (2 degrees of
    freedom): a night ×1.35 alone falls short of the deciding bar, with two re-runs it clears it."""
    root, site = tmp_path / "store", tmp_path / "site"
    for n, factor in enumerate((1.0, 1.06, 0.95)):
        add_night(root, n, {SUSPECT: factor})
    tonight = add_night(root, 3, {SUSPECT: 1.35})
    render_site([root], site)  # before the gate: the night stands alone
    page = site / "scenario-report_test.html"

    def marked_tonight() -> list[tuple[str, str, str]]:
        return [step for step in STEPS.findall(page.read_text()) if step[0] == tonight.name]

    assert marked_tonight() == []

    factors = iter((1.33, 1.37))

    def rerun(suspects: list[str]) -> Path:
        assert suspects == [SUSPECT]
        return add_rerun(tonight, next(factors))

    assert run_gate(tonight, root, tmp_path / "reports", rerun) is True
    assert len(results.confirmation_dirs(tonight)) == 2
    assert [d.name for d in results.find_run_dirs([root])] == [  # re-runs are no stored runs
        f"report_test-202611{n:02d}T030000Z" for n in range(1, 5)]
    render_site([root], site)  # the re-runs change the night's stamp: it is judged again
    assert marked_tonight() == [(tonight.name, SUSPECT, "regression")]
    assert re.search(r"regression: step time ×1\.3\d\d, CI [\d.]+–[\d.]+ against the 3 runs "
                     r"before it, judged by whole runs with its 2 confirmation re-run\(s\)",
                     page.read_text())


def test_a_young_stores_night_is_marked_only_if_its_re_runs_confirm_it(tmp_path: Path) -> None:
    """Before the store holds `runlevel.MIN_STORE_RUNS` runs the gate keeps a suspect only if
    every re-run regresses too; the trend marks the night as the gate decided, either way."""
    for confirmed in (True, False):
        root, site = tmp_path / f"store-{confirmed}", tmp_path / f"site-{confirmed}"
        add_night(root, 0)
        tonight = add_night(root, 1, {SUSPECT: 1.3})
        factors = iter((1.3, 1.3) if confirmed else (1.3, 1.0))

        def rerun(suspects: list[str], tonight: Path = tonight,
                  factors: Iterator[float] = factors) -> Path:
            return add_rerun(tonight, next(factors))

        assert run_gate(tonight, root, tmp_path / f"reports-{confirmed}", rerun) is confirmed
        page = (render_site([root], site).parent / "scenario-report_test.html").read_text()
        marked = [(run, v) for run, v, status in STEPS.findall(page) if status == "regression"]
        assert marked == ([(tonight.name, SUSPECT)] if confirmed else [])
        assert ("confirmed by its 2 re-run(s)" in page) is confirmed


def test_the_gate_reads_few_stored_runs_records(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With the site's manifest holding every stored run's figures, the gate reads the records
    of the newest stored run and of each variant's typical run only, not the whole store: a
    year of nights must not be read every night."""
    root, site = tmp_path / "store", tmp_path / "site"
    dirs = [add_night(root, n) for n in range(12)]
    render_site([root], site)
    real, read = results.read_records, []
    monkeypatch.setattr(results, "read_records", lambda run: read.append(run) or real(run))
    assert run_gate(dirs[-1], root, site) is False
    stored = {run for run in read if run != dirs[-1]}
    assert stored and len(stored) <= len(SPECS) + 1, sorted(run.name for run in stored)


def _pages(site: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in site.glob("*.html")}


def test_one_more_run_rewrites_only_its_page_its_scenario_and_the_index(tmp_path: Path) -> None:
    root, site = tmp_path / "store", tmp_path / "site"
    dirs = [add_night(root, n) for n in range(4)]
    render_site([root], site)
    before = _pages(site)
    scenario_before = (site / "scenario-report_test.html").read_text()
    render_site([root], site)  # nothing changed: nothing written
    assert _pages(site) == before

    new = add_night(root, 4, {"mirrored-r2-fit-float32-gb128": 1.5})
    render_site([root], site)
    after = _pages(site)
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {f"run-{new.name}.html", "scenario-report_test.html", "index.html"}
    scenario_after = (site / "scenario-report_test.html").read_text()
    assert new.name in scenario_after and new.name not in scenario_before
    assert f'href="run-{new.name}.html"' in (site / "index.html").read_text()

    # A changed input re-renders the pages built from it: a record rewritten in an old run.
    path = dirs[1] / results.RECORDS_FILE
    records = [json.loads(line) for line in path.read_text().splitlines()]  # as on disk
    records[1]["throughput"].update(headline=12345.0, median=12789.0)
    (dirs[1] / results.RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    render_site([root], site)
    again = _pages(site)
    assert {n for n in again if again[n] != after[n]} == {
        f"run-{dirs[1].name}.html", "scenario-report_test.html", "index.html"}
    assert "12,345" in (site / f"run-{dirs[1].name}.html").read_text()


def test_any_change_to_bench_renders_the_site_anew(tmp_path: Path) -> None:
    """A run's kept summary and pages come from code well beyond bench.report (the records'
    model, the machine's fingerprint that splits the trend): a change to any of it is a new
    render version, so no page or summary of the old code is kept."""
    copy = tmp_path / "copy"
    shutil.copytree(Path(results.__file__).parent, copy / "bench",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def version() -> str:
        proc = subprocess.run([sys.executable, "-c", "from bench.report.manifest import "
                               "render_version; print(render_version())"], cwd=copy,
                              env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True,
                              text=True, check=True)
        return proc.stdout.strip()

    first = version()
    assert version() == first  # the same code: the same version
    fingerprint = copy / "bench" / "fingerprint.py"
    fingerprint.write_text(fingerprint.read_text() + "\n# a change outside bench.report\n")
    assert version() != first


def test_chart_data_is_written_at_four_significant_digits(tmp_path: Path) -> None:
    root = tmp_path / "store"
    run = add_night(root, 0)
    html = (render_site([root], tmp_path / "site").parent / f"run-{run.name}.html").read_text()
    numbers = re.findall(r"-?\d+\.\d+(?:e-?\d+)?",
                         " ".join(re.findall(r'data-figure="[^"]+">(.*?)</script>', html, re.S)))
    assert numbers
    digits = [len(n.split("e")[0].lstrip("-").replace(".", "").lstrip("0")) for n in numbers]
    assert max(digits) <= 4


def test_prune_drops_old_traces_and_keeps_every_record(tmp_path: Path) -> None:
    root = tmp_path / "store"
    dirs = [add_night(root, n, traces=True) for n in range(3)]
    rerun = add_night(dirs[0] / results.CONFIRMATIONS_DIR, 10, traces=True)  # a night's re-run
    records = [results.read_records(d) for d in dirs]
    proc = bench("prune", str(root), "--keep-traces", "1")
    assert proc.returncode == 0, proc.stderr
    assert "pruned the traces of 2 run(s)" in proc.stdout
    assert [(d / "traces").exists() for d in [*dirs, rerun]] == [False, False, True, False]
    assert [results.read_records(d) for d in dirs] == records
    html = (render_site([root], tmp_path / "site").parent / f"run-{dirs[0].name}.html").read_text()
    assert "dropped by `bench prune`" in html
    bad = bench("prune", str(tmp_path / "nowhere"), "--keep-traces", "1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [f"error: {tmp_path / 'nowhere'}: not a bench run directory"]


def test_t_quantiles_are_scipys_at_every_degree_of_freedom() -> None:
    from scipy.stats import norm, t

    for df in (1, 2, 9, 30, 31, 60, 120):
        for level in (0.90, 0.99):
            assert t_quantile(df, level) == pytest.approx(float(t.ppf(level, df)), rel=1e-12)
    assert t_quantile(31, 0.99) > float(norm.ppf(0.99)) + 0.1  # no jump to the normal after 30


def test_compare_starts_without_importing_scipy() -> None:
    code = ("import sys, bench.compare.detector, bench.compare.runlevel, bench.cli; "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_long_trend_draws_bands_writes_its_labels_once_and_is_valid_plotly(tmp_path: Path) -> None:
    import dataclasses

    import plotly.graph_objects as go

    from bench.report.runs import load_run
    from bench.report.scenario_charts import LONG, trend_chart
    from bench.report.summaries import summarize

    one = summarize(load_run(add_night(tmp_path / "store", 0)))
    runs = [dataclasses.replace(one, name=f"run-{i}", started_at=f"2026-12-{1 + i // 24:02d}T"
                                f"{i % 24:02d}:00:00", commit=f"{i:010d}") for i in range(LONG)]
    chart = trend_chart(runs)
    go.Figure(chart.figure)  # raises ValueError naming any invalid property
    bands = [t for t in chart.figure["data"] if t.get("fill") == "tonexty"]
    assert len(bands) == len(SPECS) and not any("error_y" in t for t in chart.figure["data"])
    written = json.loads(chart.figure_json)
    assert written["shared"]["runs"][5] == f"2026-12-01 05:00<br>{5:010d}"
    assert chart.figure_json.count("2026-12-01 05:00") == 1  # once, not once per variant
    assert all(t["x"] == "@runs" for t in written["data"])
    assert written["layout"]["xaxis"]["categoryarray"] == "@runs"
