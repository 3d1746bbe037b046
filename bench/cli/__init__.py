"""The `bench` command line. Thin: each command parses options and calls one module."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.errors import BenchError

app = typer.Typer(
    help="Benchmark and profile TensorFlow distribution strategies from declarative scenarios.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
# Piped output (CI logs, files) gets a wide fixed width instead of rich's 80-column fallback.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def _fail(exc: BenchError) -> typer.Exit:
    err_console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True, highlight=False)
    return typer.Exit(code=2)


ScenarioArg = Annotated[Path, typer.Argument(help="Scenario TOML file.", show_default=False)]


class StartMethod(enum.StrEnum):
    forkserver = "forkserver"
    spawn = "spawn"


@app.command()
def run(
    scenario: ScenarioArg,
    results_dir: Annotated[Path, typer.Option("--results-dir", "-o",
                                              help="Where run directories are created.")
                           ] = Path("results"),
    quick: Annotated[bool, typer.Option(help="Smoke test: at most 3 warmup, 20 timed steps, "
                                             "2 repeats, no trace.")] = False,
    warmup: Annotated[Optional[int], typer.Option(min=0, help="Override measure.warmup_steps."
                                                  )] = None,
    steps: Annotated[Optional[int], typer.Option(min=1, help="Override measure.steps.")] = None,
    repeats: Annotated[Optional[int], typer.Option(min=1, help="Override measure.repeats.")
                       ] = None,
    timeout: Annotated[Optional[float], typer.Option(min=1, help="Override measure.timeout_s "
                                                     "(wall-clock budget per variant).")] = None,
    only: Annotated[Optional[list[str]], typer.Option(help="Run only variants whose id matches "
                                                      "this glob (repeatable).")] = None,
    report: Annotated[bool, typer.Option(help="Render the HTML report into "
                                              "REPORTS_DIR/<run name>/ at the end.")] = True,
    reports_dir: Annotated[Path, typer.Option(help="Where --report writes.")] = Path("reports"),
    start_method: Annotated[StartMethod, typer.Option(
        help="forkserver: fork each variant's process from a server that imported TensorFlow "
             "once (fast); spawn: a new interpreter per variant.")] = StartMethod.forkserver,
) -> None:
    """Run every variant of SCENARIO, each in its own process, and write a run directory.

    Exit code: 0 when every variant is ok or skipped, 1 when any failed, 2 on bad input,
    130 when interrupted (finished records are kept).
    """
    from bench.runner import RunOptions
    from bench.runner import run as run_scenario

    opts = RunOptions(results_dir=results_dir, quick=quick, warmup_steps=warmup, steps=steps,
                      repeats=repeats, timeout_s=timeout, only=only or [], report=report,
                      reports_dir=reports_dir, start_method=start_method.value)
    try:
        outcome = run_scenario(scenario, opts, console)
    except BenchError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code=outcome.exit_code)


@app.command()
def validate(scenarios: Annotated[list[Path], typer.Argument(help="Scenario TOML file(s).")]
             ) -> None:
    """Check scenario files and print the variants each expands to."""
    from bench.scenario.loading import load_variants

    for path in scenarios:
        try:
            scenario, variants = load_variants(path)
        except BenchError as exc:
            raise _fail(exc) from None
        table = Table(title=f"{escape(str(path))}: {escape(scenario.name)} → "
                            f"{len(variants)} variant(s)")
        table.add_column("variant id", no_wrap=True)
        for column in ("per-replica batch", "global batch", "learning rate"):
            table.add_column(column, justify="right")
        for v in variants:
            table.add_row(v.id, str(v.per_replica_batch), str(v.global_batch),
                          f"{v.learning_rate:g}")
        console.print(table)


@app.command("list")
def list_(devices: Annotated[bool, typer.Option(help="Probe devices (starts TensorFlow in a "
                                                     "child process).")] = True) -> None:
    """List strategies, models, datasets and the devices available on this machine."""
    from typing import get_args

    from bench.scenario.catalogue import MODELS
    from bench.scenario.schema import ApiName, DataConfig, PrecisionName
    from bench.training.strategies import STRATEGY_DESCRIPTIONS

    def section(title: str, rows: dict[str, str]) -> None:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        for key, text in rows.items():
            table.add_row(escape(key), escape(text))
        console.print(table)

    section("strategies", STRATEGY_DESCRIPTIONS)
    section("models", {**{n: m.description for n, m in MODELS.items()},
                       "package.module:function": "your builder(input_shape, num_classes)"})
    datasets = get_args(DataConfig.model_fields["name"].annotation)
    section("datasets", {name: "" for name in datasets})
    section("apis", {a: "" for a in get_args(ApiName)})
    section("precisions", {p: "" for p in get_args(PrecisionName)})
    if devices:
        from bench.training.probe import probe_in_subprocess

        found = probe_in_subprocess()
        if "error" in found:
            section("devices", {"error": found["error"]})
        else:
            rows = {d: "" for d in found["physical"]}
            if not found["gpus"] and not found["tpus"]:
                rows["note"] = ("no GPU/TPU: replicas run on simulated logical CPU devices, "
                                "which share the same cores")
            section("devices", rows)


@app.command()
def env(devices: Annotated[bool, typer.Option(help="Probe devices in a child process.")] = True
        ) -> None:
    """Print the environment fingerprint that every run records."""
    from bench.fingerprint import environment

    info = environment()
    if devices:
        from bench.training.probe import probe_in_subprocess

        info["devices"] = probe_in_subprocess()
    console.print_json(json.dumps(info, default=str))


@app.command()
def worker(
    scenario: ScenarioArg,
    variant: Annotated[str, typer.Option(help="Variant id (see `bench validate`).")],
    results_dir: Annotated[Path, typer.Option("--results-dir", "-o",
                                              help="Where the chief creates the run directory.")
                           ] = Path("results"),
    resolver: Annotated[str, typer.Option(help="Where the cluster comes from: tf_config (the "
                                               "TF_CONFIG variable, as Kubeflow's TFJob sets it) "
                                               "or slurm (SlurmClusterResolver).")
                        ] = "tf_config",
    port_base: Annotated[int, typer.Option(help="First port per node with --resolver slurm.")
                         ] = 8888,
) -> None:
    """Run ONE task of a cluster variant, started by a cluster manager (TFJob, SLURM, ...).

    Every task of the cluster runs this same command; TF_CONFIG (or SLURM's variables) tells each
    which task it is. The chief writes the record.
    """
    from bench.launch.external import run_task

    if resolver not in ("tf_config", "slurm"):
        raise _fail(BenchError(f"--resolver: expected tf_config or slurm, got {resolver!r}"))
    try:
        code = run_task(scenario, variant, results_dir, resolver, port_base)
    except BenchError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code=code)


cluster_app = typer.Typer(help="Run scenarios on real clusters through their own managers.",
                          no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")


@cluster_app.command()
def manifest(
    scenario: ScenarioArg,
    image: Annotated[str, typer.Option(help="Container image with bench and the scenario.")],
    format: Annotated[str, typer.Option("--format", help="Manifest kind (tfjob).")] = "tfjob",
    variant: Annotated[Optional[list[str]], typer.Option(help="Variant id(s); default: every "
                                                         "cluster variant.")] = None,
    scenario_path: Annotated[Optional[str], typer.Option(help="Scenario path inside the image "
                                                         "(default: as given).")] = None,
    results_dir: Annotated[str, typer.Option(help="Results directory inside the pods.")
                           ] = "/results",
    namespace: Annotated[Optional[str], typer.Option(help="Kubernetes namespace.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here (refuses to "
                                                "overwrite) instead of stdout.")] = None,
) -> None:
    """Write Kubeflow TFJob YAML for a scenario's MultiWorkerMirrored / ParameterServer variants."""
    import yaml

    from bench.launch.tfjob import tfjob
    from bench.scenario.loading import load_variants

    if format != "tfjob":
        raise _fail(BenchError(f"--format: only 'tfjob' is supported, got {format!r}"))
    try:
        _, variants = load_variants(scenario)
    except BenchError as exc:
        raise _fail(exc) from None
    wanted = [v for v in variants if v.is_cluster and (not variant or v.id in variant)]
    missing = set(variant or []) - {v.id for v in wanted}
    if missing or not wanted:
        what = ", ".join(sorted(missing)) if missing else "no cluster variants"
        raise _fail(BenchError(f"{scenario}: --variant: {what} (cluster variants: "
                               f"{', '.join(v.id for v in variants if v.is_cluster) or 'none'})"))
    docs = [tfjob(v, image=image, scenario_path=scenario_path or str(scenario),
                  results_dir=results_dir, namespace=namespace) for v in wanted]
    text = yaml.safe_dump_all(docs, sort_keys=False)
    if out is None:
        sys.stdout.write(text)
        return
    if out.exists():
        raise _fail(BenchError(f"{out}: exists; not overwriting"))
    out.write_text(text)
    console.print(f"wrote {len(docs)} TFJob manifest(s) to {out}")


@app.command()
def trace(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (results/<scenario>-<time>).",
                                            show_default=False)],
    variant: Annotated[Optional[str], typer.Argument(help="Only this variant id (default: all).",
                                                     show_default=False)] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."
                                      )] = 0,
    export_only: Annotated[bool, typer.Option("--export-only", help="Write the Chrome traces, "
                                              "do not serve.")] = False,
) -> None:
    """Export a run's profiler traces as Chrome traces, then serve xprof's UI on 127.0.0.1.

    Each <host>.xplane.pb gets a <host>.trace.json.gz beside it (open in ui.perfetto.dev or
    chrome://tracing). The server runs until Ctrl-C / SIGTERM. Exit code: 0, 1 when a trace
    failed to convert (--export-only), 2 on bad input, 130 when interrupted before serving.
    """
    import logging
    import signal

    from bench.trace.serve import export_chrome_traces, serve, trace_logdirs

    def out(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)
        sys.stdout.flush()

    failed: list[str] = []

    def on_error(xplane: Path, message: str) -> None:
        failed.append(str(xplane))
        err_console.print(f"[yellow]warning:[/] {escape(str(xplane))}: not converted: "
                          f"{escape(message)}", soft_wrap=True, highlight=False)

    # SIGTERM ends the command like Ctrl-C does: through KeyboardInterrupt and the finally below.
    previous = {sig: signal.signal(sig, signal.default_int_handler)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    server = None
    try:
        try:
            logdirs = trace_logdirs(run_dir, variant)
            for path in export_chrome_traces(run_dir, variant, on_error=on_error):
                out(str(path))
            if export_only:
                raise typer.Exit(code=1 if failed else 0)
            logdir = run_dir / "traces" / variant if variant else run_dir / "traces"
            server = serve(logdir, port)
            # xprof sets its logger to INFO on import; keep per-request INFO lines out of the way.
            logging.getLogger("tensorboard.plugins.profile").setLevel(logging.WARNING)
        except BenchError as exc:
            raise _fail(exc) from None
        what = f"{run_dir.name}/{variant}" if variant else run_dir.name
        out(f"Serving traces of {what} at {server.url} (Ctrl-C to stop)")
        out(f"runs ({len(logdirs)} trace dir(s)):")
        for name in server.runs():
            out(f"  {name}")
        while server.alive:
            server.wait(0.5)
        raise typer.Exit(code=1)  # the server thread ended by itself
    except KeyboardInterrupt:
        if server is None:
            err_console.print("interrupted", highlight=False)
            raise typer.Exit(code=130) from None
        out("stopping")
    finally:
        if server is not None:
            for sig in previous:  # a second Ctrl-C must not interrupt the shutdown
                signal.signal(sig, signal.SIG_IGN)
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run directories, or folders of them "
                                                    "(e.g. results/).", show_default=False)],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Site folder (default: "
                                                "reports/<run name>, or reports/report-<time> "
                                                "for several).")] = None,
) -> None:
    """Render runs as a static HTML site: index, one page per scenario and per run.

    Offline: plotly.min.js is written once into the site's assets/, so the pages open from
    file:// with no network. Re-rendering into an earlier report folder updates it; any other
    non-empty folder is refused. Exit code: 0, or 2 on bad input.
    """
    from bench.report.site import default_out_dir, render_site

    target = out or default_out_dir(runs)
    try:
        index = render_site(runs, target)
    except BenchError as exc:
        raise _fail(exc) from None
    console.print(f"report: {escape(str(index))}", soft_wrap=True, highlight=False)
    console.print(f"open: {escape(index.resolve().as_uri())}", soft_wrap=True, highlight=False)


@app.command()
def nightly(
    scenarios: Annotated[Optional[list[Path]], typer.Argument(
        help="Scenario files (default: the nightly set, scenarios/mnist_mirrored.toml).",
        show_default=False)] = None,
    store: Annotated[Path, typer.Option(help="Baseline store: every nightly run is kept here.")
                     ] = Path("results/nightly"),
    reports_dir: Annotated[Path, typer.Option(help="The store's HTML site and each night's "
                                                   "comparison (Markdown, JSON).")
                           ] = Path("reports/nightly"),
    quick: Annotated[bool, typer.Option(help="Few steps (smoke test of the job itself).")] = False,
    confirm: Annotated[int, typer.Option(min=0, help="Re-runs of each suspected regression; it "
                                                     "counts only if every re-run regresses.")
                       ] = 2,
) -> None:
    """Run SCENARIOS into the store, gate each new run against the store, render the report.

    Exit code: 1 when a run regressed against the store (statistically real slowdown beyond the
    minimum effect and outside run-to-run variation, or a variant that vanished or now fails),
    0 otherwise (also on the first night, which starts the store), 2 on bad input, 130 when
    interrupted.
    """
    from bench.nightly import NIGHTLY_SCENARIOS
    from bench.nightly import nightly as run_nightly
    from bench.runner import RunOptions

    try:
        outcome = run_nightly(scenarios or list(NIGHTLY_SCENARIOS), store, reports_dir,
                              RunOptions(quick=quick), console, confirm_runs=confirm)
    except BenchError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code=outcome.exit_code)


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="Run directory.", show_default=False)],
    format: Annotated[str, typer.Option("--format", help="Output format (pytest-benchmark).")
                      ] = "pytest-benchmark",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here (refuses to "
                                                "overwrite) instead of stdout.")] = None,
) -> None:
    """Write a run in another tool's format.

    pytest-benchmark: one benchmark per ok variant, its rounds the timed steps (seconds per
    step), examples/s in extra_info; `pytest-benchmark compare` reads it. Exit code 0, or 2.
    """
    from bench.report.export import to_pytest_benchmark

    try:
        if format != "pytest-benchmark":
            raise BenchError(f"--format: only 'pytest-benchmark' is supported, got {format!r}")
        if out is not None and out.exists():
            raise BenchError(f"{out}: exists; not overwriting")
        document = to_pytest_benchmark(run_dir)
    except BenchError as exc:
        raise _fail(exc) from None
    text = json.dumps(document, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
        return
    out.write_text(text)
    console.print(f"wrote {len(document['benchmarks'])} benchmark(s) to {escape(str(out))}")


@app.command()
def compare(
    baseline: Annotated[Path, typer.Argument(help="Baseline run directory, or a folder of runs "
                                                  "(the newest run of the candidate's scenario "
                                                  "is used).", show_default=False)],
    candidate: Annotated[Path, typer.Argument(help="Candidate run directory.",
                                              show_default=False)],
    min_effect: Annotated[Optional[float], typer.Option(
        min=0, max=0.99, help="Smallest slowdown that counts (default: the scenario's "
                              "compare.min_effect, 0.05).")] = None,
    alpha: Annotated[float, typer.Option(min=1e-6, max=0.5, help="Significance level.")] = 0.01,
    force: Annotated[bool, typer.Option(help="Compare even across device kinds or data sources."
                                        )] = False,
    markdown: Annotated[Optional[Path], typer.Option(help="Write a Markdown report here.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write JSON here.")] = None,
) -> None:
    """Flag statistically real slowdowns of CANDIDATE against BASELINE.

    A variant regresses only when Mann-Whitney U rejects equality, the bootstrap CI of the
    median step-time ratio lies above 1, and the slowdown exceeds the minimum effect. Exit code:
    1 on regression (or a variant that vanished or now fails), 0 otherwise, 2 on unusable input.
    """
    from bench.compare.detector import compare_records
    from bench.compare.stores import candidate as candidate_run
    from bench.compare.stores import load_store, write_reports
    from bench.report.terminal import render_comparison

    try:
        cand_records, scenario = candidate_run(candidate)
        store = load_store(baseline, scenario, exclude=candidate)
        if store is None:
            raise BenchError(f"{baseline}: no run of scenario '{scenario}' to compare against")
    except (BenchError, FileNotFoundError, ValueError) as exc:
        raise _fail(BenchError(str(exc))) from None
    result = compare_records(store.history[-1], cand_records, min_effect=min_effect,
                             alpha=alpha, force=force, history=store.history)
    write_reports(result, store, candidate, markdown, json_out)
    if result.refused:
        raise _fail(BenchError(result.refused))
    render_comparison(console, result, store.label, candidate.name, alpha)
    raise typer.Exit(code=1 if result.regressed else 0)


@app.command()
def perf(
    scenario: Annotated[Path, typer.Argument(help="Scenario to time (default: the main job).")
                        ] = Path("scenarios/mnist_mirrored.toml"),
    runs: Annotated[int, typer.Option(min=1, help="bench run repeats per start method (the "
                                                  "command timings need two runs in all).")] = 3,
    start_method: Annotated[Optional[list[StartMethod]], typer.Option(
        help="Start method(s) to time (repeatable; default forkserver).")] = None,
    cli_repeats: Annotated[int, typer.Option(min=1, help="Repeats per quick command.")] = 5,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the figures "
                                                     "here as JSON.")] = None,
) -> None:
    """Bench timing itself: wall time per phase and variant, duty cycle, command start-up and
    memory, as medians over repeated real runs of SCENARIO."""
    from bench.perf.self_benchmark import render, self_benchmark
    from bench.scenario.loading import load_scenario

    try:
        load_scenario(scenario)
    except BenchError as exc:
        raise _fail(exc) from None
    methods = [m.value for m in start_method or [StartMethod.forkserver]]
    try:
        with console.status(f"timing {len(methods) * runs} run(s) of {scenario}..."):
            result = self_benchmark(scenario, runs, methods, cli_repeats)
    except BenchError as exc:
        raise _fail(exc) from None
    render(console, result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=1))
        console.print(f"figures: {json_out}")


data_app = typer.Typer(help="Prepare data sets for scenarios.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("write-tfrecord")
def write_tfrecord(
    source: Annotated[str, typer.Argument(help="A dataset (synthetic, mnist, fashion_mnist) or a "
                                               "scenario file whose [data] names one.",
                                          show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the shards.",
                                      show_default=False)],
    shards: Annotated[int, typer.Option(min=1, help="Number of files.")] = 4,
    split: Annotated[str, typer.Option(help="train or test.")] = "train",
    prefix: Annotated[Optional[str], typer.Option(help="File name prefix (default: "
                                                  "<dataset>-<split>).")] = None,
) -> None:
    """Write a built-in dataset as TFRecord shards in bench's schema, for data.name = "tfrecord".

    Imports TensorFlow (to write the records). Never overwrites. Exit code 0, or 2.
    """
    import os

    from bench.data.tfrecord import write_dataset
    from bench.scenario.loading import load_scenario
    from bench.scenario.schema import ARRAY_DATASETS, DataConfig

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter

    try:
        if source in ARRAY_DATASETS:
            cfg = DataConfig(name=source)
        elif Path(source).is_file():
            cfg = load_scenario(source).data
            if cfg.name not in ARRAY_DATASETS:
                raise BenchError(f"{source}: data.name: '{cfg.name}' is read from files already; "
                                 f"write-tfrecord converts {', '.join(ARRAY_DATASETS)}")
        else:
            raise BenchError(f"{source}: neither a scenario file nor one of "
                             f"{', '.join(ARRAY_DATASETS)}")
        if split not in ("train", "test"):
            raise BenchError(f"--split: expected train or test, got {split!r}")
        written = write_dataset(cfg, out, shards, split, prefix)
    except BenchError as exc:
        raise _fail(exc) from None
    if written.fallback_reason:
        console.print(f"[yellow]data fallback: {escape(written.fallback_reason)}[/]")
    console.print(f"wrote {len(written.paths)} file(s), {written.examples} examples of "
                  f"{list(written.shape)} {written.dtype}, from {escape(written.source)}")
    field = "files" if split == "train" else "eval_files"
    console.print(escape(f'in a scenario:\n  [data]\n  name = "tfrecord"\n  {field} = '
                         f'"{written.pattern}"\n  num_classes = {written.num_classes}'),
                  highlight=False, soft_wrap=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
