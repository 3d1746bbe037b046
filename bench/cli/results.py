"""Commands that read finished runs: `bench report`, `bench compare` and `bench export`."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from bench.cli.common import console
from bench.errors import BenchError


class ExportFormat(enum.StrEnum):
    pytest_benchmark = "pytest-benchmark"


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
    non-empty folder is refused. A damaged run among several is named in a warning and left
    out; a damaged records.jsonl line too, and the run's page says so. Exit code: 0, or 2 on
    bad input.
    """
    from bench.interrupts import interrupted_note
    from bench.report.site import default_out_dir, render_site
    from bench.results import find_run_dirs

    target = out or default_out_dir(runs)
    index = render_site(runs, target)
    for run_dir in find_run_dirs(runs):
        if note := interrupted_note(run_dir):
            console.print(f"{escape(str(run_dir))}: {note}", soft_wrap=True, highlight=False)
    console.print(f"report: {escape(str(index))}", soft_wrap=True, highlight=False)
    console.print(f"open: {escape(index.resolve().as_uri())}", soft_wrap=True, highlight=False)


def export(
    run_dir: Annotated[Path, typer.Argument(help="Run directory.", show_default=False)],
    format: Annotated[ExportFormat, typer.Option("--format", help="Output format.")
                      ] = ExportFormat.pytest_benchmark,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here (refuses to "
                                                "overwrite) instead of stdout.")] = None,
) -> None:
    """Write a run in another tool's format.

    pytest-benchmark: one benchmark per ok variant, its rounds the timed steps (seconds per
    step), examples/s in extra_info; `pytest-benchmark compare` reads it. Exit code 0, or 2.
    """
    from bench.report.export import to_pytest_benchmark
    from bench.results import write_text_atomic

    if out is not None and out.exists():
        raise BenchError(f"{out}: exists; not overwriting")
    # ExportFormat has one member, and typer has refused any other value.
    document = to_pytest_benchmark(run_dir)
    text = json.dumps(document, indent=2)
    if out is None:
        sys.stdout.write(text + "\n")
        return
    write_text_atomic(out, text)
    console.print(f"wrote {len(document['benchmarks'])} benchmark(s) to {escape(str(out))}")


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
    force: Annotated[bool, typer.Option(help="Compare even across device kinds, data sources or "
                                                  "machines (CPU model, flags, count; GPUs).")] = False,
    markdown: Annotated[Optional[Path], typer.Option(help="Write a Markdown report here.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write JSON here.")] = None,
    html: Annotated[Optional[Path], typer.Option(help="Write an HTML page here (default: beside "
                                                      "--markdown or --json, same name, .html)."
                                                 )] = None,
    baseline_env: Annotated[Optional[str], typer.Option(
        help="The upgrade gate: judge the variants of --candidate-env in CANDIDATE against the "
             "same variants of this environment (its label, e.g. tf2.20; 'none': variants "
             "without one) in BASELINE, which may be the same run.")] = None,
    candidate_env: Annotated[Optional[str], typer.Option(
        help="The environment under test, with --baseline-env.")] = None,
) -> None:
    """Flag statistically real slowdowns of CANDIDATE against BASELINE.

    A variant regresses only when Mann-Whitney U rejects equality, the bootstrap CI of the
    median step-time ratio lies above 1, and the slowdown exceeds the minimum effect. Exit code:
    1 on regression (or a variant that vanished or now fails), 0 otherwise, 2 on unusable input
    (a file that cannot be read or written, or a damaged candidate: its verdicts are shown).
    --markdown, --json and --html write the verdicts as files; the HTML page (one offline file)
    goes beside the Markdown or JSON unless --html names it. With --baseline-env and
    --candidate-env it is the upgrade gate between two environments (e.g. TF 2.20 and 2.21),
    in one interleaved run or across runs.
    """
    from bench.compare.detector import compare_records
    from bench.compare.stores import (
        Store,
        load_store,
        no_baseline_here,
        refuse_damaged,
        run_machine,
        write_reports,
    )
    from bench.compare.stores import candidate as candidate_run
    from bench.report.terminal import render_comparison

    if (baseline_env is None) != (candidate_env is None):
        raise BenchError("--baseline-env and --candidate-env go together (the upgrade gate)")
    same_run = baseline_env is not None and baseline.resolve() == candidate.resolve()
    cand_records, scenario = candidate_run(candidate)
    store = (Store([candidate], [cand_records]) if same_run
             else load_store(baseline, scenario, exclude=candidate,
                             machine=None if force else run_machine(candidate)))
    if store is None:
        raise BenchError(f"{baseline}: no run of scenario '{scenario}' to compare against")
    if not store.dirs:
        raise BenchError(f"{no_baseline_here(baseline, scenario, candidate, store)} "
                         "(--force compares across machines)")
    if store.elsewhere:
        console.print(f"{len(store.elsewhere)} run(s) of the baseline ran on another machine: "
                      "set aside (--force keeps them)")
    if baseline_env is not None and candidate_env is not None:
        from bench.compare.environments import gate

        result = gate(store.history, cand_records, baseline_env, candidate_env,
                      (str(baseline), str(candidate)), same_run, min_effect=min_effect,
                      alpha=alpha, force=force)
    else:
        result = compare_records(store.history[-1], cand_records, min_effect=min_effect,
                                 alpha=alpha, force=force, history=store.history)
    write_reports(result, store, candidate, markdown, json_out)
    base_label, cand_label = store.label, candidate.name
    if baseline_env is not None:  # the environments are what is compared
        base_label, cand_label = f"{base_label} ({baseline_env})", f"{cand_label} ({candidate_env})"
    if (page := html or html_path_beside(markdown, json_out)) is not None:
        from bench.report.compare_page import write_compare_html  # its templates, only for it

        write_compare_html(page, result, base_label, str(candidate), alpha)
    if result.refused:
        raise BenchError(result.refused)
    render_comparison(console, result, base_label, cand_label, alpha)
    refuse_damaged(candidate, cand_records)
    raise typer.Exit(code=1 if result.regressed else 0)


def html_path_beside(markdown: Path | None, json_path: Path | None) -> Path | None:
    """Where the page goes when only --markdown / --json were given: beside them, same stem;
    none beside a device (--json /dev/null, /dev/stdout)."""
    beside = markdown or json_path
    if beside is None or (beside.exists() and not beside.is_file()):
        return None
    return beside.with_suffix(".html")


def prune(
    store: Annotated[Path, typer.Argument(help="A store of runs (e.g. results/nightly), or one "
                                               "run directory.", show_default=False)],
    keep_traces: Annotated[int, typer.Option(min=0, help="Keep the profiler traces of the newest "
                                                         "N runs of each scenario.")],
) -> None:
    """Drop old runs' profiler traces from a store, keeping every run's records.

    The gate, `bench compare` and the report's trend read only the records, so they see the
    whole history still; `bench trace` works on the runs that kept their traces. Exit code 0,
    or 2 on bad input.
    """
    from bench.compare.stores import prune_traces

    pruned = prune_traces(store, keep_traces)
    console.print(f"pruned the traces of {len(pruned)} run(s) in {escape(str(store))}; the "
                  f"newest {keep_traces} of each scenario keep theirs", soft_wrap=True,
                  highlight=False)
