"""Render run directories into a static, offline HTML site.

    <out>/index.html                every run, grouped by scenario
    <out>/scenario-<slug>.html      a scenario's runs, throughput trend, latest comparison
    <out>/run-<run name>.html       one run's comparison page
    <out>/assets/                   plotly.min.js (once, shared), report.css, report.js
    <out>/.bench-manifest.json      what each page was built from (bench.report.manifest)

Templates are jinja2 with autoescape on: scenario names, descriptions and error texts are data,
never markup. The site loads nothing from the network, so it opens from file:// anywhere.

Runs are read one at a time, oldest first, and only their summaries (bench.report.summaries) are
kept, so memory does not grow with the store's records. Re-rendering a site reads only the runs
that are new or changed, and writes only the pages whose inputs changed: after one more nightly
run, its page, its scenario's page and the index.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

import bench
from bench import fingerprint
from bench.compare.stores import RecordsCache, StoredRuns
from bench.errors import BenchError, file_errors
from bench.report import narrative, tables
from bench.report.chart import Chart, template_script
from bench.report.checkpoints import COLUMNS as CHECKPOINT_COLUMNS
from bench.report.history import Step, judge_run
from bench.report.manifest import Manifest, digest, run_stamp
from bench.report.run_charts import run_charts
from bench.report.runs import RunView, load_run, read_head
from bench.report.scenario_charts import trend_chart
from bench.report.summaries import RunSummary, summarize
from bench.report.targets import COLUMNS as TARGET_COLUMNS
from bench.report.targets import html_rows as target_html_rows
from bench.report.templates import template_environment
from bench.results import (
    check_records,
    confirmation_dirs,
    find_run_dirs,
    readable_runs,
    slug,
    write_text_atomic,
)

MARKER = ".bench-report"
RECENT_RUNS = 50  # rows of a scenario page's run table (the index and the trend hold them all)
ASSETS = "assets"
_STATIC = ("report.css", "report.js")


@dataclass
class RunPage:
    """Everything the comparison part of a page shows for one run, computed once."""

    run: RunView
    charts: list[Chart]
    summary: list[str]
    rows: list[list[tables.Cell]]
    problems: list[tables.ProblemRow]
    traces: list[tables.TraceRow]
    environment: list[tuple[str, str]]
    devices: list[tuple[str, str]]
    workers: list[tables.DetailTable] = field(default_factory=list)
    top_ops: list[tables.DetailTable] = field(default_factory=list)
    checkpoints: list[list[tables.Cell]] = field(default_factory=list)
    checkpoint_columns: tuple[str, ...] = CHECKPOINT_COLUMNS
    targets: list[list[tables.Cell]] = field(default_factory=list)
    target_columns: tuple[str, ...] = TARGET_COLUMNS
    columns: tuple[str, ...] = tables.COLUMNS
    worker_columns: tuple[str, ...] = tables.WORKER_COLUMNS
    op_columns: tuple[str, ...] = tables.OP_COLUMNS
    prefix: str = ""


@dataclass
class ScenarioGroup:
    name: str
    description: str
    page: str
    runs: list[Any] = field(default_factory=list)  # RunSummary (or RunView), oldest first
    trend: Chart | None = None
    steps: list[Step] = field(default_factory=list)


@dataclass
class RunEntry:
    """A run directory of the site before its summary is known: enough to order and group it."""

    path: Path
    stamp: list[Any]
    name: str
    scenario_name: str
    description: str
    started_at: str
    summary: RunSummary | None = None
    page: str = ""
    scenario_page: str = ""


def build_run_page(run: RunView, out_dir: Path) -> RunPage:
    return RunPage(
        run=run, charts=run_charts(run), summary=narrative.summarize_run(run),
        rows=[tables.figures_row(run, rec) for rec in run.records],
        problems=tables.problem_rows(run, out_dir), traces=tables.trace_rows(run, out_dir),
        environment=tables.flatten(run.environment), devices=tables.device_rows(run),
        workers=tables.worker_tables(run), top_ops=tables.top_op_tables(run),
        checkpoints=tables.checkpoint_table(run), targets=target_html_rows(run.records))


def run_page_name(run_name: str) -> str:
    """The file name of a run's page in a site."""
    return f"run-{slug(run_name)}.html"


def group_by_scenario(runs: list[Any]) -> list[ScenarioGroup]:
    """Assign page names (unique even when two scenario names share a slug)."""
    groups: dict[str, ScenarioGroup] = {}
    used: set[str] = set()
    for run in runs:
        group = groups.get(run.scenario_name)
        if group is None:
            base = f"scenario-{slug(run.scenario_name)}"
            page, n = f"{base}.html", 1
            while page in used:
                n += 1
                page = f"{base}-{n}.html"
            used.add(page)
            group = groups[run.scenario_name] = ScenarioGroup(run.scenario_name, run.description,
                                                              page)
        group.runs.append(run)
        group.description = run.description or group.description  # newest wins
        run.page = run_page_name(run.name)
        run.scenario_page = group.page
    return list(groups.values())


def prepare_out_dir(out_dir: Path) -> None:
    """Refuse to write into a folder that holds anything but an earlier bench report."""
    with file_errors(out_dir, "write"):
        if out_dir.exists() and not out_dir.is_dir():
            raise BenchError(f"{out_dir}: exists and is not a directory")
        if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
            raise BenchError(f"{out_dir}: exists and is not a bench report; not writing into it "
                             "(choose another --out)")
        (out_dir / ASSETS).mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / MARKER, "written by `bench report`; safe to delete and re-render\n")


def copy_assets(out_dir: Path) -> None:
    """plotly.min.js once per site (4.8 MB; copied only when missing or changed)."""
    assets = out_dir / ASSETS
    plotly_js = resources.files("plotly") / "package_data" / "plotly.min.js"
    target = assets / "plotly.min.js"
    with resources.as_file(plotly_js) as source, file_errors(target, "write"):
        if not target.exists() or target.stat().st_size != source.stat().st_size:
            shutil.copyfile(source, target)
    write_text_atomic(assets / "plotly-template.js", template_script())
    for name in _STATIC:
        write_text_atomic(assets / name,
                          (resources.files("bench.report") / "static" / name).read_text("utf-8"))


def _entries(paths: list[Path], manifest: Manifest) -> list[RunEntry]:
    """Every run under `paths`, oldest first; a run unchanged since the last render comes with
    its summary, any other with its small files read only. A damaged run is left out with a
    warning (results.readable_runs)."""

    def entry(run_dir: Path) -> RunEntry:
        stamp = run_stamp(run_dir)
        summary = manifest.summary(run_dir, stamp)
        if summary is not None:
            check_records(run_dir)
            return RunEntry(run_dir, stamp, summary.name, summary.scenario_name,
                            summary.description, summary.started_at, summary)
        environment, _, name, description = read_head(run_dir)
        return RunEntry(run_dir, stamp, run_dir.name, name, description,
                        str(environment.get("started_at") or ""))

    entries = [found for _, found in readable_runs(find_run_dirs(paths), entry)]
    return sorted(entries, key=lambda e: (e.started_at, e.name))


class _Writer:
    """Writes a page unless the manifest says it was built from the same inputs."""

    def __init__(self, out_dir: Path, old: Manifest, new: Manifest, run_count: int) -> None:
        self.out_dir, self.old, self.new = out_dir, old, new
        self.env = _templates()
        self.common = {"generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                       "bench_version": bench.__version__}
        self.run_count = run_count

    def needed(self, page: str, inputs: str) -> bool:
        self.new.pages[page] = inputs
        return not self.old.current(self.out_dir, page, inputs)

    def write(self, page: str, template: str, **context: object) -> None:
        html = self.env.get_template(template).render(**self.common, **context)
        write_text_atomic(self.out_dir / page, html)


@cache
def _templates() -> jinja2.Environment:
    """One template environment per process: compiling the templates is the costly part."""
    return template_environment()


def _run_inputs(writer: _Writer, entry: RunEntry) -> str:
    return digest(writer.new.version, entry.stamp, str(entry.path.resolve()), entry.page,
                  entry.scenario_page, str(writer.out_dir.resolve()))


def _render_group(group: ScenarioGroup, entries: list[RunEntry], writer: _Writer,
                  read: RecordsCache) -> None:
    """The group's run pages that changed, each run's steps against the runs before it on its
    machine (as the nightly gate judges a night), and the scenario page; `group.runs` becomes the
    runs' summaries."""
    out_dir = writer.out_dir
    chain = ""
    summaries: list[RunSummary] = []
    inputs = [_run_inputs(writer, entry) for entry in entries]
    due = [writer.needed(entry.page, page_inputs) for entry, page_inputs in zip(
        entries, inputs, strict=True)]
    for i, entry in enumerate(entries):
        chain = digest(chain, str(entry.path), entry.stamp)
        summary = entry.summary
        head = read_head(entry.path) if summary is None or due[i] else None
        if summary is None:
            summary = summarize(load_run(entry.path, read(entry.path), page=False, head=head))
        summary.page, summary.scenario_page = entry.page, entry.scenario_page
        if summary.steps_key != chain:
            here = [j for j in range(i)
                    if fingerprint.same_machine(summaries[j].hardware, summary.hardware)]
            summary.steps = judge_run(summary.name, read(entry.path), summary.figures,
                                      [summaries[j].figures for j in here],
                                      StoredRuns([entries[j].path for j in here], read),
                                      [read(d) for d in confirmation_dirs(entry.path)])
            summary.steps_key = chain
        if due[i]:
            run = load_run(entry.path, read(entry.path), head=head)
            run.page, run.scenario_page = entry.page, entry.scenario_page
            writer.write(entry.page, "run.html.j2", view=build_run_page(run, out_dir),
                         has_charts=True, run_count=None)
        writer.new.keep(entry.path, entry.stamp, summary)
        summaries.append(summary)
    group.runs = summaries
    group.steps = [step for summary in summaries for step in summary.steps]
    page_inputs = digest(writer.new.version, chain, group.page, group.description,
                         [(s.page, s.scenario_page) for s in summaries], str(out_dir.resolve()))
    if writer.needed(group.page, page_inputs):
        latest = load_run(entries[-1].path, read(entries[-1].path))
        latest.page, latest.scenario_page = entries[-1].page, entries[-1].scenario_page
        group.trend = trend_chart(summaries, group.steps)
        writer.write(group.page, "scenario.html.j2", scenario=group,
                     view=build_run_page(latest, out_dir), has_charts=True,
                     run_count=writer.run_count, recent_runs=RECENT_RUNS)


def render_site(paths: list[Path], out_dir: Path) -> Path:
    """Render every run under `paths` into `out_dir`; return the path of index.html.

    Into a site rendered before, only the pages whose inputs changed are written (see
    bench.report.manifest).
    """
    old = Manifest.load(out_dir)
    entries = _entries(paths, old)
    if not entries:
        raise BenchError(f"{' '.join(map(str, paths))}: no bench run directories found")
    prepare_out_dir(out_dir)
    copy_assets(out_dir)
    new = Manifest(old.version)
    writer = _Writer(out_dir, old, new, len(entries))
    scenarios = group_by_scenario(entries)
    read = RecordsCache()
    for group in scenarios:
        _render_group(group, [e for e in entries if e.scenario_page == group.page], writer, read)
    runs = [s for group in scenarios for s in group.runs]
    runs.sort(key=lambda r: (r.started_at, r.name))
    inputs = digest(new.version, [(r.name, r.page, r.scenario_page, new.runs[r.path]["stamp"])
                                  for r in runs], [g.page for g in scenarios])
    if writer.needed("index.html", inputs):
        writer.write("index.html", "index.html.j2", runs=runs, scenarios=scenarios,
                     has_charts=False, run_count=len(runs))
    new.save(out_dir)
    return out_dir / "index.html"


def default_out_dir(paths: list[Path], reports_root: Path = Path("reports")) -> Path:
    """reports/<run name> for one run, reports/<folder name> for a folder of runs."""
    if len(paths) == 1:
        return reports_root / (paths[0].resolve().name or "report")
    return reports_root / f"report-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
