"""The docs' samples of real output, made from real runs: `python -m tests.docs_samples`.

`write` runs a few variants of the default scenario in a temporary folder laid out as a clone
(`bench run` as the default scenario measures, then the same with `--quick`) and writes:

- each run's terminal output between the `<!-- sample: NAME ... -->` and `<!-- /sample: NAME -->`
  lines of the page that shows it, after a sentence saying what ran: the command, its plan
  (derived from the code), the machine and the day;
- each run's records, `docs/samples/NAME.jsonl`, from which `problems` renders the terminal's
  summary again to hold the pages to today's code;
- one record of the run, `docs/reference/record-example.json` (the record's reference page ends
  on it; the reference pages are written again after it);
- the report screenshots `docs/assets/report-*.png`: the run's pages in Debian's headless
  Chromium (tests/browser.py), cut to the parts the docs show.

The machine's own paths read as a user's: the checkout and the temporary folder as
`/home/me/bench`, the home folder as `/home/me`.

`problems` (tests/test_docs_samples.py, `python -m tests.docs_samples check`) re-derives what is
cheap to derive and names each sample that no longer matches what the code writes: the commands'
plans and `--quick`'s settings, the summary's columns, rows and sentences (the noise floor's
interval among them), and the record example's schema and field names.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.child_env import ChildEnv
from bench.fingerprint import describe_machine, machine
from bench.scenario.quick import quick_summary
from tests.record_fields import unknown_fields

REPO = Path(__file__).resolve().parent.parent
SCENARIO = "scenarios/mnist_mirrored.toml"
# three of the default scenario's variants: the baseline (with its A/A twin and the yardstick)
# and Mirrored over 1 and 2 replicas (the ratio to the baseline, scaling)
ONLY = ("default-r1-fit-float32-gb64", "mirrored-*-fit-*")
SAMPLES_DIR = Path("docs/samples")
RECORD_EXAMPLE = Path("docs/reference/record-example.json")
EXAMPLE_VARIANT = "mirrored-r2-fit-float32-gb128"
# Parts of the record whose fields are another tool's, kept as it gives them: xprof's analysis
# (bench.trace.analysis) declares only the fields bench's readers use.
OPEN_SECTIONS = ("trace.analysis.",)
USER_CHECKOUT, USER_HOME = "/home/me/bench", "/home/me"
WIDTH = 160  # what `bench run` prints at when its output is not a terminal (bench.cli.common)


@dataclass(frozen=True)
class Sample:
    """One run the docs show: its name (marker, records file), page and extra arguments."""

    name: str
    page: str
    extra: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return ["run", SCENARIO, *(arg for pattern in ONLY for arg in ("--only", pattern)),
                *self.extra]

    @property
    def command(self) -> str:
        return shlex.join(["bench", *self.argv])

    def measure(self) -> Any:
        """The `[measure]` this command runs with, as bench.runner works it out."""
        from bench.runner import RunOptions, apply_overrides
        from bench.scenario.loading import load_scenario

        repeats = (int(self.extra[self.extra.index("--repeats") + 1])
                   if "--repeats" in self.extra else None)
        opts = RunOptions(quick="--quick" in self.extra, repeats=repeats)
        return apply_overrides(load_scenario(REPO / SCENARIO), opts).measure

    def intro(self, where: str) -> str:
        plan = plan_words(self.measure())
        if "--quick" in self.extra:
            return (f"`--quick` makes a smoke test of it: {quick_summary()}. Its figures show that "
                    f"every path runs, not how fast: here {plan}. The real output of "
                    f"`{self.command}` on {where}:")
        return (f"This is the real output of `{self.command}`: a few of the default scenario's "
                f"variants with its two controls, measured as the default scenario measures, in "
                f"fewer rounds: {plan}. On {where}:")


SAMPLES = (Sample("run", "docs/getting-started/reading-results.md", ("--repeats", "6")),
           Sample("quick", "docs/getting-started/first-run.md", ("--quick",)))


def plan_words(m: Any) -> str:
    """A `[measure]` in words, e.g. "12 rounds, each an unobserved window of at least 16 steps
    (more where they take under 0.1 s) and an observed one of 16, after settling for 0.1 s (at
    least 1 step), following 50 warmup steps; then 10 traced steps"."""
    text = (f"{m.repeats} round{'s' * (m.repeats != 1)}, each an unobserved window of "
            f"{'at least ' if m.min_window_s else ''}{m.steps} steps")
    if m.min_window_s:
        text += f" (more where they take under {m.min_window_s:g} s)"
    text += f" and an observed one of {m.steps}, after "
    step_words = f"{m.settle_steps} step{'s' * (m.settle_steps != 1)}"
    text += (f"settling for {m.settle_s:g} s (at least {step_words})" if m.settle_s
             else f"{step_words} of settling")
    text += f", following {m.warmup_steps} warmup steps; "
    return text + (f"then {m.trace_steps} traced steps" if m.trace_steps else "no trace")


def block(name: str) -> re.Pattern[str]:
    """A sample's place on its page: the marker lines and what lies between."""
    return re.compile(rf"^<!-- sample: {re.escape(name)} .*?-->\n(.*?)^<!-- /sample: "
                      rf"{re.escape(name)} -->$", re.M | re.S)


def split_block(body: str) -> tuple[str, str]:
    """(the sentence before the output, the output) of a sample's block."""
    intro, _, rest = body.partition("```text\n")
    return " ".join(intro.split()), rest.rsplit("```", 1)[0]


# --------------------------------------------------------------------------------------------
# Writing


def write(root: Path = REPO, samples: tuple[Sample, ...] = SAMPLES, shots: bool = True,
          say: Callable[[str], None] = print) -> None:
    """Run every sample's command and write what it shows into the docs under `root`."""
    with tempfile.TemporaryDirectory(prefix="bench-docs-") as folder:
        work = Path(folder)
        (work / "scenarios").symlink_to(REPO / "scenarios")
        places = {str(work): USER_CHECKOUT, str(work.resolve()): USER_CHECKOUT,
                  str(REPO): USER_CHECKOUT, str(Path.home()): USER_HOME}
        runs = {}
        for sample in samples:
            say(f"running {sample.command}")
            out = bench(sample.argv, work)
            run_dir = newest_run(work / "results")
            runs[sample.name] = run_dir
            where = ran_on(run_dir)
            page = root / sample.page
            text = normalised(out, places)
            body = f"{sample.intro(where)}\n\n```text\n{text}```\n"
            replace_block(page, sample.name, body)
            lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
            (root / SAMPLES_DIR).mkdir(parents=True, exist_ok=True)
            (root / SAMPLES_DIR / f"{sample.name}.jsonl").write_text(
                "".join(normalised(line, places) for line in lines), encoding="utf-8")
            say(f"wrote {sample.page} and {SAMPLES_DIR / sample.name}.jsonl")
        if "run" in runs:
            records = [json.loads(line) for line in
                       (root / SAMPLES_DIR / "run.jsonl").read_text(encoding="utf-8").splitlines()]
            example = next(r for r in records if r["variant_id"] == EXAMPLE_VARIANT)
            (root / RECORD_EXAMPLE).write_text(json.dumps(example, indent=1, ensure_ascii=False)
                                               + "\n", encoding="utf-8")
            from bench.cli import docs

            for path in docs.write(root):
                say(f"wrote {path.relative_to(root)}")
            if shots:
                bench(["report", "results", "--out", "reports/all"], work)
                screenshots(work, runs["run"].name, root / "docs" / "assets", say)


def bench(argv: list[str], cwd: Path) -> str:
    """`bench ARGV` from `cwd` with this interpreter and a cache of its own, as a fresh clone runs
    it; its output (an error if it failed)."""
    env = {**os.environ, ChildEnv.name("cache_dir"): str(cwd / "cache")}  # a fresh clone's: empty
    proc = subprocess.run([sys.executable, "-m", "bench", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench {shlex.join(argv)} exited {proc.returncode}:\n"
                           f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def newest_run(results: Path) -> Path:
    return max((p for p in results.iterdir() if (p / "records.jsonl").exists()),
               key=lambda p: p.stat().st_mtime)


def ran_on(run_dir: Path) -> str:
    """"Intel Xeon ... x2, 2026-12-01": the machine and the day, from the run's fingerprint."""
    env = json.loads((run_dir / "environment.json").read_text(encoding="utf-8"))
    day = datetime.fromisoformat(str(env["started_at"])).date().isoformat()
    return f"{describe_machine(machine(env))}, {day}"


def normalised(text: str, places: dict[str, str]) -> str:
    """`text` with this machine's paths as a user's (longest first), lines without trailing
    blanks."""
    for here in sorted(places, key=len, reverse=True):
        text = text.replace(here, places[here])
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def replace_block(page: Path, name: str, body: str) -> None:
    text = page.read_text(encoding="utf-8")
    found = list(block(name).finditer(text))
    if len(found) != 1:
        raise RuntimeError(f"{page}: {len(found)} blocks of sample '{name}', want 1")
    page.write_text(text[:found[0].start(1)] + body + text[found[0].end(1):], encoding="utf-8")


# The parts of the run's pages the docs show: (file, page, first element or None for the
# page's top, last element or None for the page's end).
SHOTS = (("report-run.png", "run", None, "#section-throughput"),
         ("report-step-times.png", "run", "#section-distribution", "#section-timeline"),
         ("report-index.png", "index", None, "footer"))
# The region's top (a section's, with its heading's margin) and bottom in page coordinates.
_REGION = """
const y = (sel, edge) => document.querySelector(sel).getBoundingClientRect()[edge] + window.scrollY;
const margin = (sel) => parseFloat(getComputedStyle(document.querySelector(sel + " h2") ||
                                                    document.body).marginTop) || 0;
return {top: arguments[0] ? Math.max(0, y(arguments[0], "top") - margin(arguments[0]) - 8) : 0,
        bottom: y(arguments[1], "bottom") + 8, width: document.documentElement.scrollWidth};
"""


def screenshots(work: Path, run_name: str, assets: Path, say: Callable[[str], None]) -> None:
    """The report's pages in headless Chromium, each part the docs show cut out as a PNG."""
    from tests.browser import open_page

    pages = {"run": work / "reports" / run_name / f"run-{run_name}.html",
             "index": work / "reports" / "all" / "index.html"}
    for kind, path in pages.items():
        wanted = [(name, top, bottom) for name, page, top, bottom in SHOTS if page == kind]

        def capture(driver: Any, wanted: list[tuple[str, Any, Any]] = wanted) -> dict[str, bytes]:
            shots = {}
            for name, top, bottom in wanted:
                box = driver.execute_script(_REGION, top, bottom)
                clip = {"x": 0, "y": box["top"], "width": box["width"],
                        "height": box["bottom"] - box["top"], "scale": 1}
                shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True, "clip": clip})
                shots[name] = base64.b64decode(shot["data"])
            return shots

        report = open_page(path, width=1280, interact=capture)
        if report.js_errors or report.external_requests or not all(report.charts.values()):
            raise RuntimeError(f"{path}: errors {report.js_errors}, requests "
                               f"{report.external_requests}, charts {report.charts}")
        for name, png in report.interaction.items():
            (assets / name).write_bytes(png)
            say(f"wrote {(assets / name).relative_to(REPO) if assets.is_relative_to(REPO) else name}")


# --------------------------------------------------------------------------------------------
# Checking


def problems(root: Path = REPO) -> list[str]:
    """Where the samples under `root` no longer match what the code writes (empty: none)."""
    found = []
    for sample in SAMPLES:
        found += [f"{sample.page}, sample '{sample.name}': {p}" for p in sample_problems(root, sample)]
    found += [f"{RECORD_EXAMPLE}: {p}" for p in example_problems(root)]
    return found


def sample_problems(root: Path, sample: Sample) -> list[str]:
    from bench.record.model import VariantRecord

    blocks = list(block(sample.name).finditer((root / sample.page).read_text(encoding="utf-8")))
    if len(blocks) != 1:
        return [f"{len(blocks)} blocks between its markers, want 1"]
    intro, output = split_block(blocks[0][1])
    out = []
    for said in (f"`{sample.command}`", plan_words(sample.measure()),
                 *([quick_summary()] if "--quick" in sample.extra else [])):
        if said not in intro:
            out.append(f"the sentence before it does not say '{said}' (what the code runs)")
    path = root / SAMPLES_DIR / f"{sample.name}.jsonl"
    try:
        records = [VariantRecord.load(json.loads(line), str(path))
                   for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError) as exc:
        return [*out, f"its records: {exc}"]
    return out + summary_problems(output, summary_text(records))


def summary_text(records: list[Any]) -> str:
    """What `bench run` prints of these records after its per-variant lines."""
    from rich.console import Console

    from bench.report.terminal import render_summary
    from bench.scaling import add_scaling_efficiency

    console = Console(file=io.StringIO(), width=WIDTH, color_system=None, force_terminal=False)
    render_summary(console, add_scaling_efficiency(records))
    return console.file.getvalue()  # type: ignore[attr-defined]


KEY_COLUMNS = ("strategy", "replicas", "API", "precision", "global batch", "status")


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """The first table's header lines and its body rows' cells, as rich draws them."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("┏")), None)
    if start is None:
        return [], []
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("└")), len(lines))
    header = [line for line in lines[start:end] if line.startswith("┃")]
    rows = [[cell.strip() for cell in line.strip("│").split("│")]
            for line in lines[start:end] if line.startswith("│")]
    return header, rows


def column_names(header: list[str]) -> list[str]:
    """A table's column names from its header lines (a name rich wrapped is joined again)."""
    cells = [[c.strip() for c in line.strip("┃").split("┃")] for line in header]
    return [" ".join(part for part in parts if part) for parts in zip(*cells, strict=True)]


def summary_problems(sample: str, rendered: str) -> list[str]:
    """The sample's summary against the one rendered now: the table's columns and each row's
    key cells, and every sentence after the tables (noise floor, legends, data), word for word."""
    out = []
    (head, rows), (now_head, now_rows) = table(sample), table(rendered)
    if head != now_head:
        out.append(f"its table's columns are not today's: {' '.join(now_head)}")
    columns = column_names(now_head)
    keys = [i for i, c in enumerate(columns) if c in KEY_COLUMNS]
    if [[r[i] for i in keys] for r in rows if len(r) == len(columns)] != \
            [[r[i] for i in keys] for r in now_rows] or len(rows) != len(now_rows):
        out.append("its table's rows are not the variants of its records")
    words = " ".join(sample.split())
    for line in rendered.split("└")[-1].splitlines()[1:]:  # after the last table
        if line.strip() and " ".join(line.split()) not in words:
            out.append(f"it does not say '{line.strip()}'")
    return out


def example_problems(root: Path) -> list[str]:
    from bench.record.model import SCHEMA, VariantRecord

    example = json.loads((root / RECORD_EXAMPLE).read_text(encoding="utf-8"))
    if example.get("schema") != SCHEMA:
        return [f"schema {example.get('schema', 1)}, and bench writes schema {SCHEMA}"]
    out = [f"'{name}' is no field of the record" for name in unknown_fields(example)
           if not name.startswith(OPEN_SECTIONS)]
    if VariantRecord.load(example).to_json() != example:
        out.append("reading it and writing it back changes it")
    runs = (root / SAMPLES_DIR / "run.jsonl").read_text(encoding="utf-8").splitlines()
    if example not in (json.loads(line) for line in runs):
        out.append(f"not a record of the run behind the samples ({SAMPLES_DIR}/run.jsonl)")
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        found = problems()
        for problem in found:
            print(problem)
        return 1 if found else 0
    if argv:
        print(__doc__)
        return 2
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
