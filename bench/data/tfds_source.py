"""A tensorflow_datasets split that is already prepared on this machine, read offline.

bench never downloads: `tfds.load(..., download=False)` reads what `tfds build` (or a copy of a
prepared data_dir) left under `data.data_dir`. What is missing is said in one line: the package
(`pip install 'bench[tfds]'`), the dataset's name, its preparation under data_dir, or the split.
Examples are (image, label) pairs: the dataset's supervised keys, or its "image" and "label"
features. tfds shards the files over input pipelines itself (`ReadConfig(input_context=...)`);
its own cache and prefetch are turned off, since the shared pipeline tail decides those.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data import pipeline
from bench.errors import DataUnavailable
from bench.scenario.schema import DataConfig

if TYPE_CHECKING:
    import tensorflow as tf

INSTALL_HINT = "pip install 'bench[tfds]'"


@dataclass(frozen=True)
class TfdsData:
    name: str
    split: str
    data_dir: str | None
    keys: tuple[str, str]  # (image, label) features
    supervised: bool  # the dataset declares keys: tfds can yield (image, label) pairs itself
    files: int  # shards of the split
    shape: tuple[int, ...]
    num_classes: int
    source: str
    fallback_reason: str | None = None
    label_kind: str = "sparse"  # class ids, or one-hot rows the pipeline makes of them

    @property
    def outputs(self) -> int:
        return self.num_classes

    def examples(self, cfg: DataConfig,
                 input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        import tensorflow_datasets as tfds

        # "file", or "auto" with a file for every pipeline (as tf.distribute's AUTO does)
        by_file = input_context is not None and (cfg.auto_shard == "file" or (
            cfg.auto_shard == "auto" and self.files >= input_context.num_input_pipelines))
        read_config = tfds.ReadConfig(
            shuffle_seed=cfg.seed, try_autocache=False, skip_prefetch=True,
            input_context=input_context if by_file else None)
        ds = tfds.load(self.name, split=self.split, data_dir=self.data_dir, download=False,
                       shuffle_files=True, as_supervised=self.supervised, read_config=read_config)
        if not self.supervised:
            image, label = self.keys
            ds = ds.map(lambda features: (features[image], features[label]),
                        num_parallel_calls=pipeline.count(cfg.map_parallelism))
        return ds if by_file else pipeline.shard_examples(ds, input_context)


def load_split(cfg: DataConfig, split: str = "train") -> TfdsData:
    """Find the prepared dataset and describe `split`; DataUnavailable says what is missing."""
    try:
        import tensorflow_datasets as tfds
    except ImportError as exc:
        raise DataUnavailable(f"tfds dataset '{cfg.tfds_name}': the tensorflow_datasets package "
                              f"is not installed ({exc}; {INSTALL_HINT})") from None
    name = str(cfg.tfds_name)
    data_dir = str(Path(cfg.data_dir).expanduser()) if cfg.data_dir else None
    where = data_dir or "tfds's default data_dir (~/tensorflow_datasets or $TFDS_DATA_DIR)"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        raise DataUnavailable(f"tfds dataset '{name}': not a registered tfds dataset and "
                              f"nothing prepared under {where}") from None
    if not builder.is_prepared():
        raise DataUnavailable(f"tfds dataset '{name}' is not prepared under {where} (bench never "
                              f"downloads: run `tfds build {name} --data_dir DIR` where there is "
                              "internet and set data.data_dir to DIR)")
    info = builder.info
    if split not in info.splits:
        raise DataUnavailable(f"tfds dataset '{name}' has no split '{split}' (it has "
                              f"{', '.join(sorted(info.splits))})")
    keys = tuple(info.supervised_keys or ("image", "label"))
    missing = [k for k in keys if k not in info.features]
    if len(keys) != 2 or missing:
        raise DataUnavailable(f"tfds dataset '{name}': no (image, label) features to train on "
                              f"(it has {', '.join(info.features)})")
    image, label = (info.features[k] for k in keys)
    shape = tuple(image.shape)
    num_classes = _num_classes(label, name)
    examples, files = info.splits[split].num_examples, info.splits[split].num_shards
    source = f"tfds:{name} ({split}, {examples} examples, {files} file(s), under {builder.data_dir})"
    return TfdsData(name=name, split=split, data_dir=data_dir, keys=keys,
                    supervised=bool(info.supervised_keys), files=files, shape=shape,
                    num_classes=num_classes, source=source)


def _num_classes(label: Any, name: str) -> int:
    classes = getattr(label, "num_classes", None)
    if not classes:
        raise DataUnavailable(f"tfds dataset '{name}': its label feature is not a ClassLabel, "
                              "so the number of classes is unknown")
    return int(classes)
