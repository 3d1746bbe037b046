"""The report of a real small run, opened in headless Chromium as a person would open it.

One `bench run` (default, default+bfloat16, Mirrored 1 and 2 replicas, and CentralStorage, whose
model builder raises an error written in HTML) under a scenario whose name and description are
HTML too. Every chart
must draw, no script may fail, nothing may be fetched from the network, the hostile text must
show as text, and a screenshot of the scenario page is kept in test-artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report.site import run_page_name
from tests.browser import open_page, require_chromium, skip_module_without_browser
from tests.conftest import REPO, BenchRun, bench_run, write_scenario
from tests.early import EarlyContext, early_fixture
from tests.fixtures.faulty import HOSTILE_ERROR

skip_module_without_browser()
pytestmark = pytest.mark.slow
_require_chromium = pytest.fixture(autouse=True)(require_chromium)

NAME = "<script>alert(1)</script>"
DESCRIPTION = "<img src=x onerror=alert(2)> tiny run for the browser test"
CHARTS = {"throughput", "scaling", "breakdown", "distribution", "timeline", "precision", "top-ops",
          "measurement-cost"}
ARTIFACTS = REPO / "test-artifacts"

BODY = f"""
[scenario]
name = "{NAME}"
description = "{DESCRIPTION}"

[train]
api = "fit"

[measure]
warmup_steps = 4
steps = 12
trace_steps = 6

[[strategies]]
name = "default"

[[strategies]]
name = "default"
precision = "mixed_bfloat16"

[[strategies]]
name = "mirrored"
replicas = [1, 2]

[[strategies]]
name = "central_storage"   # the builder raises HOSTILE_ERROR here
"""


def start_xss(context: EarlyContext) -> BenchRun:
    tmp = context.tmp_path_factory.mktemp("browser")
    return bench_run(write_scenario(tmp, BODY, name="xss",
                                    model="tests.fixtures.faulty:hostile_under_central_storage"),
                     tmp / "results")


run = early_fixture("browser_xss", start_xss)


@pytest.fixture(scope="module")
def site(run: BenchRun) -> Path:
    assert run.run_dir is not None, run.proc.stderr
    return run.run_dir.parent.parent / "reports" / run.run_dir.name


def test_bench_run_renders_the_report_and_says_where(run: BenchRun, site: Path) -> None:
    statuses = {r["variant_id"]: r["status"] for r in run.records}
    assert statuses["central_storage-r1-fit-float32-gb16"] == "failed"
    controls = {r["variant_id"]: r["status"] for r in run.records if r["variant"]["control"]}
    assert set(controls.values()) == {"ok"} and len(controls) == 3, controls  # baseline, twin, yardstick
    assert sum(s == "ok" for s in statuses.values()) == 4 + 2, statuses
    page = site / run_page_name(run.run_dir.name)
    assert f"report: {page}" in run.proc.stdout.replace("\n", "")
    assert page.exists() and (site / "index.html").exists()


def test_scenario_page_draws_every_chart_offline(site: Path) -> None:
    (page,) = site.glob("scenario-*.html")
    shot = ARTIFACTS / "report-scenario.png"
    report = open_page(page, screenshot=shot)
    assert report.js_errors == []
    assert report.external_requests == []
    assert report.dialogs == []  # the hostile name and description did not run
    assert report.charts == dict.fromkeys(CHARTS, True)
    assert NAME in report.text and DESCRIPTION in report.text
    assert "1 failed: central_storage-r1-fit-float32-gb16" in report.text
    assert HOSTILE_ERROR in report.text
    assert "Fastest:" in report.text and "Mixed precision vs float32:" in report.text
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_index_and_run_page_open_cleanly(site: Path) -> None:
    index = open_page(site / "index.html")
    assert (index.js_errors, index.external_requests, index.dialogs) == ([], [], [])
    assert NAME in index.text and "xss" not in index.title
    (run_page,) = site.glob("run-*.html")
    report = open_page(run_page, screenshot=ARTIFACTS / "report-run.png")
    assert (report.js_errors, report.external_requests, report.dialogs) == ([], [], [])
    assert report.charts == dict.fromkeys(CHARTS, True)
    assert "bench trace" in report.text  # how to open each variant's trace
