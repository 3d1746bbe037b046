"""Render run directories into a static, offline HTML site.

    <out>/index.html                every run, grouped by scenario
    <out>/scenario-<slug>.html      a scenario's runs, throughput trend, latest comparison
    <out>/run-<run name>.html       one run's comparison page
    <out>/assets/                   plotly.min.js (once, shared), report.css, report.js

Templates are jinja2 with autoescape on: scenario names, descriptions and error texts are data,
never markup. The site loads nothing from the network, so it opens from file:// anywhere.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import jinja2

import bench
from bench.errors import BenchError
from bench.report import narrative, tables
from bench.report.chart import Chart, template_script
from bench.report.checkpoints import COLUMNS as CHECKPOINT_COLUMNS
from bench.report.history import Step, detect_steps
from bench.report.run_charts import run_charts
from bench.report.runs import RunView, load_run_views
from bench.report.scenario_charts import trend_chart
from bench.results import slug, write_text_atomic

MARKER = ".bench-report"
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
    columns: tuple[str, ...] = tables.COLUMNS
    worker_columns: tuple[str, ...] = tables.WORKER_COLUMNS
    op_columns: tuple[str, ...] = tables.OP_COLUMNS
    prefix: str = ""


@dataclass
class ScenarioGroup:
    name: str
    description: str
    page: str
    runs: list[RunView] = field(default_factory=list)
    trend: Chart | None = None
    steps: list[Step] = field(default_factory=list)


def build_run_page(run: RunView, out_dir: Path) -> RunPage:
    return RunPage(
        run=run, charts=run_charts(run), summary=narrative.summarize_run(run),
        rows=[tables.figures_row(run, rec) for rec in run.records],
        problems=tables.problem_rows(run, out_dir), traces=tables.trace_rows(run, out_dir),
        environment=tables.flatten(run.environment), devices=tables.device_rows(run),
        workers=tables.worker_tables(run), top_ops=tables.top_op_tables(run),
        checkpoints=tables.checkpoint_table(run))


def group_by_scenario(runs: list[RunView]) -> list[ScenarioGroup]:
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
        run.page = f"run-{slug(run.name)}.html"
        run.scenario_page = group.page
    return list(groups.values())


def prepare_out_dir(out_dir: Path) -> None:
    """Refuse to write into a folder that holds anything but an earlier bench report."""
    if out_dir.exists() and not out_dir.is_dir():
        raise BenchError(f"{out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
        raise BenchError(f"{out_dir}: exists and is not a bench report; not writing into it "
                         "(choose another --out)")
    (out_dir / ASSETS).mkdir(parents=True, exist_ok=True)
    (out_dir / MARKER).write_text("written by `bench report`; safe to delete and re-render\n")


def copy_assets(out_dir: Path) -> None:
    """plotly.min.js once per site (4.8 MB; copied only when missing or changed)."""
    assets = out_dir / ASSETS
    plotly_js = resources.files("plotly") / "package_data" / "plotly.min.js"
    target = assets / "plotly.min.js"
    with resources.as_file(plotly_js) as source:
        if not target.exists() or target.stat().st_size != source.stat().st_size:
            shutil.copyfile(source, target)
    write_text_atomic(assets / "plotly-template.js", template_script())
    for name in _STATIC:
        write_text_atomic(assets / name,
                          (resources.files("bench.report") / "static" / name).read_text("utf-8"))


def template_environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("bench.report", "templates"),
        autoescape=True,  # every {{ }} is escaped unless a value is explicitly marked safe
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_site(paths: list[Path], out_dir: Path) -> Path:
    """Render every run under `paths` into `out_dir`; return the path of index.html."""
    try:
        runs = load_run_views(paths)
    except FileNotFoundError as exc:
        raise BenchError(str(exc)) from None
    if not runs:
        raise BenchError(f"{' '.join(map(str, paths))}: no bench run directories found")
    prepare_out_dir(out_dir)
    copy_assets(out_dir)
    env = template_environment()
    scenarios = group_by_scenario(runs)
    common = {"generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "bench_version": bench.__version__, "run_count": len(runs)}

    def write(name: str, template: str, **context: object) -> None:
        html = env.get_template(template).render(**common, **context)
        write_text_atomic(out_dir / name, html)

    pages = {run.name: build_run_page(run, out_dir) for run in runs}
    for run in runs:
        write(run.page, "run.html.j2", view=pages[run.name], has_charts=True)
    for group in scenarios:
        group.steps = detect_steps(group.runs)
        group.trend = trend_chart(group.runs, group.steps)
        write(group.page, "scenario.html.j2", scenario=group, view=pages[group.runs[-1].name],
              has_charts=True)
    write("index.html", "index.html.j2", runs=runs, scenarios=scenarios, has_charts=False)
    return out_dir / "index.html"


def default_out_dir(paths: list[Path], reports_root: Path = Path("reports")) -> Path:
    """reports/<run name> for one run, reports/<folder name> for a folder of runs."""
    if len(paths) == 1:
        return reports_root / (paths[0].resolve().name or "report")
    return reports_root / f"report-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
