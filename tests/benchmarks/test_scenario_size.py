"""Issue #53's 15-line scenario of 3,072,000 variants is refused within a second, by
`bench validate`, `bench plan` and `bench run` alike, with its count (expanding it took over
120 s and 6 GB before a MemoryError): its size is counted from the axes' lengths.

    python -m pytest -m benchmark tests/benchmarks/test_scenario_size.py -s

Each command's time is compared with the same command refusing a one-line typo, measured side by
side (medians of 5): what is left is the counting, not Python's and bench's start-up.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.errors import ScenarioError
from bench.scenario.loading import load_scenario
from tests.conftest import REPO
from tests.test_scenario_faults import HUGE, doc

pytestmark = pytest.mark.benchmark


def _wall(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True,
                          text=True, cwd=REPO, stdin=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - started, proc


def test_the_huge_matrix_is_refused_within_a_second(tmp_path: Path) -> None:
    huge, typo = tmp_path / "huge.toml", tmp_path / "typo.toml"
    huge.write_text(HUGE)
    typo.write_text(doc("[measure]\nstepz = 1\n"))
    loads = []
    for _ in range(5):
        started = time.perf_counter()
        with pytest.raises(ScenarioError, match="3,072,000 variants"):
            load_scenario(huge)
        loads.append(time.perf_counter() - started)
    print(f"\nload_scenario: median {statistics.median(loads) * 1000:.1f} ms")
    assert statistics.median(loads) < 1.0
    for command in ("validate", "plan", "run"):
        extra = ["--results-dir", str(tmp_path / "results")] if command == "run" else []
        pairs = [(_wall(command, str(huge), *extra), _wall(command, str(typo), *extra))
                 for _ in range(5)]
        for (_, proc), (_, baseline) in pairs:
            assert proc.returncode == 2 and "3,072,000 variants" in proc.stderr, proc.stderr
            assert baseline.returncode == 2 and "stepz" in baseline.stderr, baseline.stderr
        huge_s = statistics.median(h for (h, _), _ in pairs)
        typo_s = statistics.median(t for _, (t, _) in pairs)
        print(f"bench {command}: huge {huge_s:.2f} s, a typo {typo_s:.2f} s, "
              f"difference {huge_s - typo_s:+.2f} s")
        assert huge_s < 1.0 + typo_s
        assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
