"""Every scenario in scenarios/ runs end to end with `bench run --quick`: what a user gets first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, bench_run

pytestmark = pytest.mark.slow

SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_runs_quick(scenario: Path, tmp_path: Path) -> None:
    run = bench_run(scenario, tmp_path / "results", "--quick", timeout=900)
    out = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out
    statuses = {r["variant_id"]: r["status"] for r in run.records}
    assert "ok" in statuses.values(), statuses
    for rec in run.records:
        if rec["status"] == "skipped":
            assert rec["reason"], rec["variant_id"]
        else:
            assert rec["status"] == "ok" and rec["throughput"]["median"] > 0, rec["variant_id"]
    assert (tmp_path / "reports" / run.run_dir.name / "index.html").exists()
