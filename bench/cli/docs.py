"""The docs' reference pages, generated from the code, and a local server for the built site.

    python -m bench.cli.docs write        regenerate docs/reference/ from the code
    python -m bench.cli.docs check        exit 1 naming every generated page that is stale
    python -m bench.cli.docs serve DIR    serve a built site on 127.0.0.1 (a free port) until Ctrl-C

The pages are committed, so a change to a command, a scenario field, an environment variable or
the record shows its documentation change in the same diff; tests/test_docs_reference.py fails
while a page differs from what this module writes. The scenario's and the record's pages come
from their pydantic models (bench.cli.docs_scenario, bench.cli.docs_record), the environment
variables from the object that reads and writes them (bench.child_env).
"""

from __future__ import annotations

import functools
import http.server
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer.main

from bench import child_env
from bench.cli import app, docs_record, docs_scenario
from bench.cli.docs_scenario import GENERATED_NOTE, cell

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("docs/reference")

# Every BENCH_* environment variable the package reads or sets, from the one object that holds
# them (tests/test_docs_reference.py checks it against the source): who sets it, what it holds.
ENVIRONMENT: dict[str, tuple[str, str]] = child_env.documented()
# The test suite's and the benchmarks' own (tests/, tests/benchmarks/).
TEST_ENVIRONMENT: dict[str, str] = {
    "BENCH_TEST_CHROMIUM": "the Chromium the browser tests drive (default `/usr/bin/chromium`).",
    "BENCH_TEST_CHROMEDRIVER": "its ChromeDriver (default `/usr/bin/chromedriver`).",
    "BENCH_TEST_PID_FILE": "where a test fixture's hanging builder writes its pid.",
    "BENCH_BENCHMARK_ROUNDS": "rounds of `tests/benchmarks/test_nightly_variants.py` (default 1).",
    "BENCH_NOISE_RUNS": "runs of each kind in `tests/benchmarks/test_noise_floor.py` (default 10).",
    "BENCH_NOISE_MODES": "the kinds of run of `tests/benchmarks/test_noise_floor.py`: "
                         "`interleaved`, `sequential`, comma-separated (default both).",
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

# The record's top-level fields, from its JSON Schema (bench.cli.docs_record).
RECORD_EXAMPLE = docs_record.RECORD_EXAMPLE
RECORD_FIELDS: dict[str, str] = docs_record.fields(sometimes=False)
# Sections only some variants write (clusters, faults).
RECORD_SOMETIMES: dict[str, str] = docs_record.fields(sometimes=True)


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
           "| 2 | bad input, or a file that cannot be read or written (permission, a path "
           "under a file, a full disk, not UTF-8, not JSON), reported as one line "
           "`error: FILE: FIELD: ...` on stderr, nothing written; `bench compare` and "
           "`bench nightly` exit 2, never 1, when they cannot read or write |",
           "| 130 | interrupted (Ctrl-C); finished records are kept |", "",
           "A damaged run does not change the exit code of a command that reads it: each line "
           "of its `records.jsonl` that holds no record (the last one cut short by a crash, or "
           "one that fails the record's model) and each run of a store whose files cannot be "
           "read is named in one `warning: ...` line and left out, and the rest is read "
           "([Run directory](run-directory.md#damaged)). `bench compare` and `bench nightly` "
           "still judge the rest, then exit 2: a damaged candidate cannot pass a gate.", "",
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


PAGES: dict[str, Callable[[Path], str]] = {
    "scenario.md": lambda root: docs_scenario.scenario_page(),
    "shipped-scenarios.md": docs_scenario.shipped_scenarios_page,
    "commands.md": lambda root: commands_page(),
    "exit-codes.md": lambda root: exit_codes_page(),
    "environment-variables.md": lambda root: environment_page(),
    "record.md": docs_record.record_page,
    docs_record.RECORD_SCHEMA: docs_record.schema_file,
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
