"""`bench perf` times real runs of a scenario with both start methods, and the quick commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import bench, write_scenario

pytestmark = pytest.mark.slow

TWO_VARIANTS = """
[train]
api = "ctl"

[measure]
trace_steps = 4

[[strategies]]
name = "default"

[[strategies]]
name = "mirrored"
replicas = 2
"""


def test_perf_breaks_runs_down_and_times_the_commands(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, TWO_VARIANTS, name="perf")
    out = tmp_path / "perf.json"
    proc = bench("perf", str(scenario), "--runs", "1", "--start-method", "forkserver",
                 "--start-method", "spawn", "--cli-repeats", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    fork, spawn = figures["start_methods"]["forkserver"], figures["start_methods"]["spawn"]
    for method in (fork, spawn):
        assert set(method["variants"]) == {"default-r1-ctl-float32-gb16",
                                           "mirrored-r2-ctl-float32-gb32",
                                           # the run's controls cost time too: they are in it
                                           "default-r1-ctl-float32-gb16-control", "yardstick"}
        assert method["phases_s"]["timed"] > 0 and method["phases_s"]["analysis"] > 0
        assert 0 < method["duty_cycle"] <= method["duty_cycle_ceiling"] < 1
        assert method["runner_peak_rss_mb"] > 0 and method["worker_peak_rss_mb"] > 0
        assert 0 < method["harness_share_max"] < 1  # measured in every variant's loop
    # Forked workers skip the import that spawned ones pay (seconds).
    assert fork["phases_s"]["import"] < 0.5 < spawn["phases_s"]["import"]
    assert set(figures["cli"]) == {"bench --help", "bench validate", "bench list --no-devices",
                                   "bench report", "bench compare"}
    assert all(c["median_s"] > 0 for c in figures["cli"].values())
    for title in ("where the time went", "per variant", "command start-up", "duty cycle"):
        assert title in proc.stdout


def test_perf_rejects_a_bad_scenario_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenario]\nname = 'x'\n")
    proc = bench("perf", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and str(bad) in proc.stderr
