"""`bench data write-tfrecord`: a built-in dataset as TFRecord shards."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from bench.cli.common import console
from bench.errors import BenchError


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
    if written.fallback_reason:
        console.print(f"[yellow]data fallback: {escape(written.fallback_reason)}[/]")
    console.print(f"wrote {len(written.paths)} file(s), {written.examples} examples of "
                  f"{list(written.shape)} {written.dtype}, from {escape(written.source)}")
    field = "files" if split == "train" else "eval_files"
    console.print(escape(f'in a scenario:\n  [data]\n  name = "tfrecord"\n  {field} = '
                         f'"{written.pattern}"\n  num_classes = {written.num_classes}'),
                  highlight=False, soft_wrap=True)
