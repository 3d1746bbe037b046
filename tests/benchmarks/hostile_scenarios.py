"""Every hostile scenario of tests/test_scenario_faults.py through `bench validate`, `bench plan`
and `bench run`, as a table: exit code, wall time, the one line on stderr.

    python tests/benchmarks/hostile_scenarios.py [--commands validate plan run] [--json FILE]

Each case is a real file in a temporary folder and a real `python -m bench` subprocess. A case
counts as right when the command exits 2 with exactly one stderr line that names the file and
the field, and no traceback; the last line sums the cases up. The issue's 3,072,000-variant
scenario is `huge_matrix`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.test_scenario_faults import CASES  # noqa: E402


def attempt(command: str, path: Path, field: str, message: str, results: Path) -> dict:
    extra = ["--results-dir", str(results)] if command == "run" else []
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench", command, str(path), *extra],
                          capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL,
                          timeout=600)
    seconds = time.perf_counter() - started
    lines = proc.stderr.strip().splitlines()
    where = f"error: {path}: {field}: " if field else f"error: {path}: "
    right = (proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(where)
             and message in lines[0] and "Traceback" not in proc.stdout + proc.stderr)
    return {"command": command, "exit": proc.returncode, "seconds": round(seconds, 2),
            "line": lines[0] if len(lines) == 1 else proc.stderr.strip()[-300:],
            "right": right, "traceback": "Traceback" in proc.stdout + proc.stderr,
            "started_a_run": results.exists() and any(results.iterdir())}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", nargs="+", default=["validate", "plan", "run"])
    parser.add_argument("--json", type=Path, help="Also write the rows here.")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        for case, (text, field, message) in sorted(CASES.items()):
            path = Path(tmp) / f"{case}.toml"
            path.write_text(text, encoding="utf-8")
            for command in args.commands:
                row = {"case": case, **attempt(command, path, field, message,
                                               Path(tmp) / f"results-{case}")}
                rows.append(row)
                shown = row["line"].replace(f"{path}", f"{case}.toml")
                print(f"{case:24} {command:8} exit {row['exit']} {row['seconds']:6.2f} s "
                      f"{'ok ' if row['right'] else 'BAD'} {shown}", flush=True)
    bad = [r for r in rows if not r["right"]]
    print(f"{len(rows)} attempts of {len(CASES)} cases: {len(rows) - len(bad)} one-line "
          f"rejections, {sum(r['traceback'] for r in rows)} tracebacks, "
          f"{sum(r['exit'] != 2 for r in rows)} wrong exit codes, "
          f"{sum(r['started_a_run'] for r in rows)} runs started")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    sys.exit(1 if any(not r["right"] for r in main()) else 0)
