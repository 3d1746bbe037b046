"""Commands that look without running: `bench validate`, `bench list` and `bench env`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from bench.cli.common import console, err_console


def validate(scenarios: Annotated[list[Path], typer.Argument(help="Scenario TOML file(s).")]
             ) -> None:
    """Check scenario files and print the variants each expands to."""
    from bench.scenario.loading import load_variants

    for path in scenarios:
        scenario, variants = load_variants(path)
        table = Table(title=f"{escape(str(path))}: {escape(scenario.name)} → "
                            f"{len(variants)} variant(s)")
        table.add_column("variant id", no_wrap=True)
        for column in ("per-replica batch", "global batch", "learning rate"):
            table.add_column(column, justify="right")
        for v in variants:
            rate = f"{v.learning_rate:g}" + ("" if v.learning_rate_given else
                                             ", or a compiled model's own")
            table.add_row(v.id, str(v.per_replica_batch), str(v.global_batch), rate)
        console.print(table)


def list_(devices: Annotated[bool, typer.Option(help="Probe devices (starts TensorFlow in a "
                                                     "child process).")] = True) -> None:
    """List strategies, models, datasets and the devices available on this machine."""
    from typing import get_args

    from bench.scenario import keras_names
    from bench.scenario.catalogue import MODELS, STRATEGY_DESCRIPTIONS
    from bench.scenario.schema import BUILTIN_DATASETS, ApiName, PrecisionName

    def section(title: str, rows: dict[str, str]) -> None:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        for key, text in rows.items():
            table.add_row(escape(key), escape(text))
        console.print(table)

    section("strategies", STRATEGY_DESCRIPTIONS)
    section("models", {**{n: m.description for n, m in MODELS.items()},
                       "package.module:function": "your builder, called with whichever of "
                       "input_shape, num_classes, vocabularies it names; it may compile"})
    section("datasets", {**{name: "" for name in BUILTIN_DATASETS},
                         "package.module:function": "your function: a tf.data.Dataset of "
                         "unbatched (features, labels); may take input_context, seed, split"})
    section("losses, optimizers, metrics ([train]; or package.module:function)", {
        "loss": ", ".join([*keras_names.LOSSES, *keras_names.LOSS_ALIASES]),
        "optimizer": ", ".join(keras_names.OPTIMIZERS),
        "metrics": ", ".join([*keras_names.SHAPE_DEPENDENT_METRICS, *keras_names.METRICS,
                              *keras_names.METRIC_ALIASES])})
    section("apis", {a: "" for a in get_args(ApiName)})
    section("precisions", {p: "" for p in get_args(PrecisionName)})
    if devices:
        from bench.fingerprint import probe_in_subprocess

        found = probe_in_subprocess()
        if "error" in found:
            section("devices", {"error": found["error"]})
        else:
            rows = {d: "" for d in found["physical"]}
            if not found["gpus"] and not found["tpus"]:
                rows["note"] = ("no GPU/TPU: replicas run on simulated logical CPU devices, "
                                "which share the same cores")
            section("devices", rows)


def env(devices: Annotated[bool, typer.Option(help="Probe devices in a child process.")] = True
        ) -> None:
    """Print the environment fingerprint that every run records."""
    from bench.fingerprint import environment

    info = environment()
    if devices:
        from bench.fingerprint import probe_in_subprocess

        info["devices"] = probe_in_subprocess()
    console.print_json(json.dumps(info, default=str))
    for line in _gpu_lines(info):  # on stderr: stdout stays the JSON that scripts read
        err_console.print(escape(line))


def _gpu_lines(info: dict[str, Any]) -> list[str]:
    """The GPU facts of `bench env` as a reader wants them: model, count, driver, CUDA."""
    by_model = Counter((g["name"], g["memory_mb"], g["compute_capability"]) for g in info["gpus"])
    lines = [f"GPU: {count} x {name}, {memory} MB" + (f", compute capability {cap}" if cap else "")
             for (name, memory, cap), count in by_model.items()] or ["no GPU (nvidia-smi lists none)"]
    drivers = sorted({g["driver"] for g in info["gpus"] if g["driver"]})
    if drivers:
        lines.append(f"driver: {', '.join(drivers)}")
    gpu = info.get("devices", {}).get("gpu")
    if gpu:
        build = gpu["cuda_build"]
        lines.append(f"TensorFlow sees {gpu['count']} GPU(s); " + (
            f"built with CUDA {build['cuda_version']}, cuDNN {build['cudnn_version']}"
            if gpu["built_with_cuda"] else "built without CUDA"))
    return lines
