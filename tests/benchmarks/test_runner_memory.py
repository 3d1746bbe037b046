"""The runner's peak RSS stays under issue #8's 300 MB however many variants a run has.

While variants run, the runner holds only their records and a progress bar; what grows with the
number of variants is the end of the run (`bench.runner.conclude`): the summary table, the HTML
report and the time breakdown over every record. This runs that code, in a fresh process as
`bench run` would, over 1,000 records of 3 × 100 samples each (a real default-scenario record is
about 16 KB of JSON; these are the same shape). `bench perf` reports the runner's peak for a
real run of the default scenario.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.perf.self_benchmark import TARGETS
from tests.conftest import REPO
from tests.fixtures.report_runs import records_for, write_run

pytestmark = pytest.mark.benchmark

CONCLUDE = """
import json, os, sys, time
from pathlib import Path
from rich.console import Console
from bench import results
from bench.runner import RunOptions, conclude

run_dir, reports = Path(sys.argv[1]), Path(sys.argv[2])
started = time.perf_counter()
records = results.read_records(run_dir)  # what the runner has accumulated by the end
with open(os.devnull, "w") as sink:
    breakdown = conclude(run_dir, records, RunOptions(reports_dir=reports), Console(file=sink),
                         started, {})
print(json.dumps({"records": len(records), "rss_mb": breakdown["runner_peak_rss_mb"]}))
"""


@pytest.mark.parametrize("count", [10, 1000])
def test_runner_peak_rss_with_many_variants(tmp_path: Path, count: int) -> None:
    run_dir = write_run(tmp_path / "results", f"many-{count}", records_for("many", count))
    out = subprocess.run([sys.executable, "-c", CONCLUDE, str(run_dir), str(tmp_path / "reports")],
                         capture_output=True, text=True, cwd=REPO, timeout=600, check=True)
    figures = json.loads(out.stdout.splitlines()[-1])
    print(f"\n{count} variants: runner peak RSS {figures['rss_mb']:.0f} MB")
    assert figures["records"] == count
    assert (tmp_path / "reports" / run_dir.name / "index.html").exists()
    assert figures["rss_mb"] <= TARGETS["runner_peak_rss_mb"]
