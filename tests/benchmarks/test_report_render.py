"""How long the HTML report takes for 1,000 records, in two shapes.

- one run of 1,000 variants (the worst case for one page: every chart carries 1,000 series);
- a history of 100 runs × 10 variants (a nightly store: 100 run pages, one trend).

Each record carries 3 × 100 per-step samples, like the default scenario. Run with
`python -m pytest -m benchmark tests/benchmarks/test_report_render.py -s`; the medians land in
pytest-benchmark's table and extra_info. There is no timed assertion here (the machine is
shared); the closing note of issue #5 quotes the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report.site import render_site
from tests.fixtures.report_runs import ENVIRONMENT, records_for, write_run

pytestmark = pytest.mark.benchmark


@pytest.fixture(scope="module")
def one_big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big") / "results"
    write_run(root, "big-20261122T000000Z", records_for("big", 1000))
    return root


@pytest.fixture(scope="module")
def hundred_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history") / "results"
    for n in range(100):
        env = {**ENVIRONMENT, "started_at": f"2026-08-{1 + n // 4:02d}T{n % 4 * 6:02d}:00:00+00:00"}
        write_run(root, f"nightly-2026{n:04d}", records_for("nightly", 10, seed=n),
                  environment=env)
    return root


@pytest.mark.parametrize("shape", ["one_run_1000_variants", "100_runs_x_10_variants"])
def test_render_1000_records(benchmark, shape: str, one_big_run: Path, hundred_runs: Path,
                             tmp_path: Path) -> None:
    source = one_big_run if shape == "one_run_1000_variants" else hundred_runs
    counter = iter(range(100))
    index = benchmark.pedantic(lambda: render_site([source], tmp_path / f"site{next(counter)}"),
                               rounds=3, iterations=1, warmup_rounds=0)
    pages = list(index.parent.glob("*.html"))
    size_mb = sum(p.stat().st_size for p in pages) / 1e6
    benchmark.extra_info.update(records=1000, pages=len(pages), html_mb=round(size_mb, 1))
    print(f"\n{shape}: median {benchmark.stats.stats.median:.2f} s, {len(pages)} pages, "
          f"{size_mb:.1f} MB of HTML")
    assert len(pages) == (3 if shape == "one_run_1000_variants" else 102)
