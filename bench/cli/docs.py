"""The docs' reference pages, generated from the code, and a local server for the built site.

    python -m bench.cli.docs write        regenerate docs/reference/ from the code
    python -m bench.cli.docs check        exit 1 naming every generated page that is stale
    python -m bench.cli.docs serve DIR    serve a built site on 127.0.0.1 (a free port) until Ctrl-C

The pages are committed, so a change to a command, a scenario field or an environment variable
shows its documentation change in the same diff; tests/test_docs_reference.py fails while a page
differs from what this module writes. Only the descriptions of environment variables and of the
record's sections are written here by hand, and the tests check that they name exactly what the
code uses.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer.main

from bench.cli import app, docs_scenario
from bench.cli.docs_scenario import GENERATED_NOTE, cell
from bench.scenario.schema import Variant

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("docs/reference")

# Every BENCH_* environment variable the package reads or sets (tests/test_docs_reference.py
# checks this against the source): who sets it, and what it holds.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "BENCH_CACHE_DIR": ("you", "bench's cache folder (default `~/.cache/bench`): the measured peak "
                        "FLOP/s (`peak.json`) and, under `envs/`, the virtualenvs of `[environment]` "
                        "tables."),
    "BENCH_ENV_CACHE": ("you", "the cache of `[environment]` virtualenvs, before "
                        "`$BENCH_CACHE_DIR/envs` (`--env-cache` wins over both)."),
    "BENCH_RUN_DIR": ("bench, for every process of a run", "the run directory: how a run's "
                      "processes are found (the tests look for leftovers by it)."),
    "BENCH_TRACE_DIR": ("bench, per variant and per cluster task", "where its profile and "
                        "TensorBoard event files go."),
    "BENCH_DATA_CACHE": ("bench, per run", "the run's cache folder: the first variant saves "
                         "synthetic arrays there and the others load the same bytes."),
    "BENCH_CHECKPOINT_DIR": ("bench, per variant", "the variant's checkpoint folder "
                             "(`measure.checkpoint`)."),
    "BENCH_GATE": ("bench, interleaved runs", "the FIFO the parent writes `go` into, one line per "
                   "release of a waiting worker."),
    "BENCH_GATE_TIMEOUT": ("bench, interleaved runs", "how long a worker waits at its gate before "
                           "it decides the parent is gone."),
    "BENCH_SPAWN_TIME": ("bench, per process", "the parent's clock when it started the process "
                         "(`timing.phases.start`)."),
    "BENCH_HOST_GPUS": ("bench, per process", "the GPUs nvidia-smi listed for the launcher, as "
                        "JSON, so a worker does not ask again."),
    "BENCH_LOGICAL_GPU_MEMORY_MB": ("bench (`bench plan` shows it)", "the memory limit of each "
                                    "logical GPU where one GPU is split."),
    "BENCH_GPU_SHARED": ("bench (`bench plan` shows it)", "`1`: other processes of the variant use "
                         "the same GPUs."),
    "BENCH_CLUSTER_COMPUTES_ON": ("bench, cluster tasks", "what a cluster's computing tasks run on "
                                  "(`gpu` or `cpu`), so the coordinator's record states the "
                                  "variant's device kind."),
    "BENCH_FAULT_EVENTS": ("bench, `[fault]` variants", "the events file each task appends what it "
                           "does to (JSON lines with wall-clock times)."),
    "BENCH_BACKUP_DIR": ("bench, `[fault]` variants", "the MultiWorkerMirrored backup folder that "
                         "every attempt shares."),
}
# The test suite's and the benchmarks' own (tests/, tests/benchmarks/).
TEST_ENVIRONMENT: dict[str, str] = {
    "BENCH_TEST_CHROMIUM": "the Chromium the browser tests drive (default `/usr/bin/chromium`).",
    "BENCH_TEST_CHROMEDRIVER": "its ChromeDriver (default `/usr/bin/chromedriver`).",
    "BENCH_TEST_PID_FILE": "where a test fixture's hanging builder writes its pid.",
    "BENCH_BENCHMARK_ROUNDS": "rounds of `tests/benchmarks/test_nightly_variants.py` (default 1).",
    "BENCH_NOISE_RUNS": "runs of each kind in `tests/benchmarks/test_noise_floor.py` (default 10).",
    "BENCH_STORE_SOURCE": "a run directory `tests/benchmarks/test_store_scale.py` builds its stores "
                          "from (default: a fresh run).",
}
# Variables of other tools that bench sets for its processes or reads.
OTHER_ENVIRONMENT: dict[str, str] = {
    "TF_CONFIG": "set for every task of a local cluster (and by Kubeflow for `bench worker`): the "
                 "cluster spec and the task's own role.",
    "CUDA_VISIBLE_DEVICES": "set for every process that computes: its GPUs (`\"\"` hides them).",
    "TF_GPU_THREAD_MODE": "set from `train.gpu_thread_mode` for processes that compute on GPUs.",
    "TF_USE_LEGACY_KERAS": "`1` in the processes of a `tf_keras` variant, before TensorFlow is "
                           "imported.",
    "CI": "`true` makes every test that cannot check its feature here fail instead of skip.",
}

# The record's top-level fields, described by hand until the record is a typed model with its own
# JSON Schema (issue 29). THE ONE PLACE TO SWITCH: once that schema file exists, `record_page`
# renders it (docs_scenario's renderers take a JSON Schema) and this table and the example go.
RECORD_EXAMPLE = REFERENCE / "record-example.json"
RECORD_FIELDS: dict[str, str] = {
    "schema": "the record format's version.",
    "variant_id": "the variant's id (`variant.id`).",
    "index": "its place in the run's matrix.",
    "status": "`ok`, `skipped` or `failed`.",
    "reason": "why it was skipped or failed, in one line (null when ok).",
    "error": "the error's type, its one-line message and the traceback's end (null when ok).",
    "variant": "the variant as it ran: every field below, from the scenario and its matrix point.",
    "finished_at": "when the record was written (UTC, ISO 8601).",
    "task": "the cluster task that wrote it (null for a single process).",
    "effective": "the replicas and batches that really ran (e.g. one device per "
                 "MultiWorkerMirrored worker on CPU), beside the planned ones in `variant`.",
    "data_source": "the data actually used, e.g. `tfrecord:<glob> (train, 8 files, ...)`.",
    "data_fallback_reason": "why synthetic data replaced the dataset asked for (null: it did not).",
    "devices": "the device kind, physical and logical devices, and whether they are simulated.",
    "gpu": "the GPU model, count, memory, driver and compute capability; CUDA and cuDNN builds.",
    "environment": "what the worker really ran: TensorFlow, Keras, tf-keras, NumPy, protobuf and "
                   "ml-dtypes versions, the interpreter and a digest of every distribution.",
    "strategy_info": "the strategy class, replicas in sync, all-reduce and partitioner.",
    "precision_policy": "the Keras mixed-precision policy.",
    "start_state": "what the process found at start: its pid, whether a TensorFlow context "
                   "existed, the precision policy (a forked worker must find none).",
    "keras": "the Keras flavour and version.",
    "model_params": "trainable and total parameters.",
    "workload": "what trained: the model class, the loss and where it came from, the optimizer "
                "class and learning rate, the metrics.",
    "variables": "the bytes each device or ps task holds, and each table of 1 MB or more.",
    "env": "TensorFlow and Keras versions and the pid, as the worker saw them.",
    "timing": "import, build, startup, first step and warmup times, `phases` (seconds per phase), "
              "`harness_s` and `harness_share` (bench's own per-step code), `worker_s`, `parent`.",
    "step_time": "statistics of the timed steps in seconds: n, mean, median, stdev, stderr, MAD, "
                 "p5, p95, min, max.",
    "throughput": "`headline` (examples of the timed windows ÷ their wall clock), `median` "
                  "(global batch ÷ median step), `mean_rate`, `spread_pct` (robust CV) and "
                  "`per_repeat`.",
    "measurement": "how it was timed: interleaved or not, settling steps and their cost, time "
                   "waiting at the gate, each window's length and start.",
    "observer": "the observer effect: the unobserved block against the timed windows (`ratio`, "
                "`flagged`).",
    "checkpoint": "with `measure.checkpoint`: each save's blocking time and size, the restore, "
                  "`throughput_ratio` and `blocked_share`.",
    "steady_state_start": "the timed step where the series settles.",
    "samples": "every step time in seconds: `warmup`, `timed` (one list per window), `traced`.",
    "trace": "the profiler trace's files, `overhead_ratio` and xprof's `analysis`.",
    "loss": "the loss on a fixed batch before and after training.",
    "metric_results": "the metrics' values after training.",
    "utilization": "FLOPs per step and their source, achieved and peak FLOP/s, `mfu`.",
    "checks": "the verdicts of `[check]`: `loss_parity`, `accuracy`.",
    "notes": "anything else worth knowing about the measurement, one line each.",
    "peak_rss_mb": "the worker's own peak resident memory (VmHWM).",
    "wall_s": "the variant's whole time as the runner saw it.",
    "launch": "how the process started (`start_method`, `fork_problem`; Slurm: job id, partition, "
              "queue time).",
    "interleave": "the batch of variants it shared rounds with, the rounds, its place in each.",
}
# Sections only some variants write (clusters, faults, Slurm), described from the code's docs.
RECORD_SOMETIMES: dict[str, str] = {
    "cluster": "cluster variants: the cluster spec, per-task figures, `restarts` and "
               "`native_crashes`.",
    "recovery": "`[fault]` variants: the timeline of the recovery, `steps_redone`, "
                "`time_to_recover_s`, `continuity`.",
}


def command_tree() -> list[tuple[str, Any]]:
    """(full name, click command) of every command, in `bench --help` order, groups first."""
    root = typer.main.get_command(app)
    out: list[tuple[str, Any]] = []

    def visit(name: str, command: Any, parent_ctx: Any) -> None:
        ctx = command.make_context(name.rsplit(" ", 1)[-1], [], parent=parent_ctx,
                                   resilient_parsing=True)
        out.append((name, command))
        for sub in getattr(command, "list_commands", lambda _: [])(ctx):
            visit(f"{name} {sub}", command.get_command(ctx, sub), ctx)

    visit("bench", root, None)
    return out


def _help_records(command: Any) -> list[tuple[str, str]]:
    ctx = command.make_context("bench", [], resilient_parsing=True)
    return [record for param in command.params if (record := param.get_help_record(ctx))]


def _paragraphs(text: str | None) -> list[str]:
    return [" ".join(p.split()) for p in (text or "").split("\n\n") if p.strip()]


def _slug(name: str) -> str:
    return name.replace(" ", "-")


def commands_page() -> str:
    out = ["# Commands", "", GENERATED_NOTE, "",
           "Every command and option, as `bench COMMAND --help` prints them. The parent `bench` "
           "process never imports TensorFlow; device probing and training happen in child "
           "processes. Exit codes are listed on [their own page](exit-codes.md).", ""]
    for name, command in command_tree():
        out += [f"## `{name}` {{ #{_slug(name)} }}", ""]
        out += [cell(p) + "\n" for p in _paragraphs(command.help)]
        subs = getattr(command, "commands", None)
        if subs:
            out += ["| command | what it does |", "| --- | --- |"]
            out += [f"| [`{name} {sub}`](#{_slug(f'{name} {sub}')}) | "
                    f"{cell(_paragraphs(cmd.help)[0] if cmd.help else '')} |"
                    for sub, cmd in subs.items()]
            out.append("")
        records = _help_records(command)
        if records:
            out += ["| argument or option | what it does |", "| --- | --- |"]
            out += [f"| `{cell(names)}` | {cell(text)} |" for names, text in records]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def exit_codes_page() -> str:
    out = ["# Exit codes", "", GENERATED_NOTE, "",
           "| code | meaning |", "| --- | --- |",
           "| 0 | success: every variant ok or skipped, no regression |",
           "| 1 | something failed (a variant, a conversion, a build), or a regression was found |",
           "| 2 | bad input, reported as one line `error: FILE: FIELD: ...` on stderr, nothing "
           "written |",
           "| 130 | interrupted (Ctrl-C); finished records are kept |", "",
           "Each command's own words (from its `--help`); a command that says nothing exits 0, "
           "or 2 on bad input:", "",
           "| command | exit codes |", "| --- | --- |"]
    for name, command in command_tree():
        if getattr(command, "commands", None) and not getattr(command, "invoke_without_command", 0):
            continue
        said = [p for p in _paragraphs(command.help) if re.search(r"\bexit code", p, re.I)]
        sentence = next((m.group(0) for p in said
                         for m in [re.search(r"Exit code[^.]*(\.|$)", p)] if m), "")
        out.append(f"| [`{name}`](commands.md#{_slug(name)}) | "
                   f"{cell(sentence or '0; 2 on bad input.')} |")
    return "\n".join(out) + "\n"


def environment_page() -> str:
    out = ["# Environment variables", "", GENERATED_NOTE, "",
           "## Read or set by bench { #bench }", "",
           "| variable | set by | what it holds |", "| --- | --- | --- |"]
    out += [f"| `{name}` | {who} | {cell(what)} |" for name, (who, what) in ENVIRONMENT.items()]
    out += ["", "## Of the test suite and benchmarks { #tests }", "",
            "| variable | what it holds |", "| --- | --- |"]
    out += [f"| `{name}` | {cell(what)} |" for name, what in TEST_ENVIRONMENT.items()]
    out += ["", "## Of other tools { #other }", "", "| variable | how bench uses it |", "| --- | --- |"]
    out += [f"| `{name}` | {cell(what)} |" for name, what in OTHER_ENVIRONMENT.items()]
    return "\n".join(out) + "\n"


def record_page(root: Path) -> str:
    example = json.loads((root / RECORD_EXAMPLE).read_text(encoding="utf-8"))
    out = ["# Record", "", GENERATED_NOTE, "",
           "One JSON object per variant, one line each in a run's `records.jsonl`, appended as each "
           "variant finishes (see [the run directory](run-directory.md)). A worker that dies is "
           "recorded by its parent with the same fields. The fields below are those of a real "
           "record (`docs/reference/record-example.json`, a single-process `fit` variant of "
           "`bench run scenarios/mnist_mirrored.toml --quick`).", "",
           "| field | type | what it holds |", "| --- | --- | --- |"]
    for key, value in example.items():
        out.append(f"| `{key}` | {_json_type(value)} | {cell(RECORD_FIELDS[key])} |")
    out += ["", "Only some variants write these:", "", "| field | what it holds |", "| --- | --- |"]
    out += [f"| `{key}` | {cell(what)} |" for key, what in RECORD_SOMETIMES.items()]
    out += ["", "## `variant` { #variant }", "",
            "The variant a matrix point becomes (`bench.scenario.schema.Variant`); its `model`, "
            "`data`, `train`, `measure`, `check` and `fault` are the scenario's tables with the "
            "point's values (see [the scenario file](scenario.md)).", "",
            "| field | type | default |", "| --- | --- | --- |"]
    schema = Variant.model_json_schema()
    for name, info in Variant.model_fields.items():
        prop = schema["properties"][name]
        kind = docs_scenario.type_text(prop).replace("](#", "](scenario.md#")  # its tables' page
        out.append(f"| `{name}` | {cell(kind)} | "
                   f"{cell(docs_scenario.default_text(info, prop))} |")
    out += ["", "## Example { #example }", "", "```json", json.dumps(example, indent=1), "```"]
    return "\n".join(out) + "\n"


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}[type(value)]


PAGES: dict[str, Callable[[Path], str]] = {
    "scenario.md": lambda root: docs_scenario.scenario_page(),
    "shipped-scenarios.md": docs_scenario.shipped_scenarios_page,
    "commands.md": lambda root: commands_page(),
    "exit-codes.md": lambda root: exit_codes_page(),
    "environment-variables.md": lambda root: environment_page(),
    "record.md": record_page,
}


def stale(root: Path = ROOT) -> list[Path]:
    """The generated pages whose committed text differs from what the code generates now."""
    return [root / REFERENCE / name for name, make in PAGES.items()
            if not (root / REFERENCE / name).is_file()
            or (root / REFERENCE / name).read_text(encoding="utf-8") != make(root)]


def write(root: Path = ROOT) -> list[Path]:
    written = []
    for name, make in PAGES.items():
        path = root / REFERENCE / name
        text = make(root)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def serve(site: Path, say: Callable[[str], None] = print) -> None:
    """Serve a built site on 127.0.0.1, on a port the kernel picks free, until Ctrl-C."""
    if not (site / "index.html").is_file():
        raise SystemExit(f"error: {site}: no built site here (run `mkdocs build` first)")
    handler = functools.partial(_QuietHandler, directory=str(site))
    # Ctrl-C and SIGTERM stop it even where the shell started it with SIGINT ignored (a
    # background job), as `bench trace` and `bench tensorboard` stop
    previous = {sig: signal.signal(sig, signal.default_int_handler)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
            say(f"Serving the docs at http://127.0.0.1:{server.server_address[1]}/ "
                "(Ctrl-C to stop)")
            sys.stdout.flush()
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                say("stopping")
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["write"]:
        for path in write():
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if args[:1] == ["check"]:
        old = stale()
        for path in old:
            print(f"stale: {path.relative_to(ROOT)} (run `python -m bench.cli.docs write`)")
        return 1 if old else 0
    if args[:1] == ["serve"] and len(args) == 2:
        serve(Path(args[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
