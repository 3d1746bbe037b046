"""`bench export --format pytest-benchmark`: files pytest-benchmark's own tools read and compare."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import bench
from tests.fixtures.report_runs import standard_records, write_run


def test_export_is_read_and_compared_by_pytest_benchmark(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", standard_records())
    slow = write_run(tmp_path, "slow", standard_records(slowdown=1.2))
    for run in (base, slow):
        proc = bench("export", str(run), "--out", str(tmp_path / f"{run.name}.json"))
        assert proc.returncode == 0, proc.stderr
        assert "wrote 4 benchmark(s)" in proc.stdout  # the failed and skipped variants are left out
    doc = json.loads((tmp_path / "base.json").read_text())
    first = doc["benchmarks"][0]
    record = standard_records()[0]
    assert first["name"] == record["variant_id"]
    assert first["stats"]["rounds"] == 300 and len(first["stats"]["data"]) == 300
    # the headline, not the typical-step rate beside it (the fixture's differ by 3-7%)
    assert first["extra_info"]["examples_per_sec"] == record["throughput"]["headline"]
    assert doc["commit_info"]["id"] == "0123456789abcdef0123456789abcdef01234567"
    out = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", "base.json",
                          "slow.json", "--columns=median", "--group-by=name"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True)
    for rec in standard_records()[:4]:
        assert f"{rec['variant_id']} (slow)" in out.stdout
    assert out.stdout.count("(1.20)") == 4  # every variant's median step time is 1.2x


def test_export_refuses_to_overwrite_and_rejects_bad_input(tmp_path: Path) -> None:
    run = write_run(tmp_path, "run", standard_records())
    existing = tmp_path / "keep.json"
    existing.write_text("mine")
    for args, message in (
            ((str(run), "-o", str(existing)), f"error: {existing}: exists; not overwriting"),
            ((str(tmp_path / "nope"),), f"error: {tmp_path / 'nope'}: not a bench run directory")):
        proc = bench("export", *args)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[0].startswith(message), proc.stderr
        assert "Traceback" not in proc.stderr
    # --format is a choice typer checks, as --start-method is: its usage error names the option
    proc = bench("export", str(run), "--format", "csv")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Invalid value for '--format'" in proc.stderr and "'csv'" in proc.stderr, proc.stderr
    assert existing.read_text() == "mine"
