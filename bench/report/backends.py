"""The same Keras model on JAX beside TensorFlow in one run: each JAX variant against its
TensorFlow counterpart (`backend_pairs`: the one-device default with the
default, DataParallel with Mirrored over as many replicas), as the terminal's table, the
report's chart and its summary sentence say it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.compare.noise import within_noise
from bench.record.model import VariantRecord
from bench.report.chart import Chart, layout
from bench.report.derived import Pair
from bench.report.runs import RunView

# The tf.distribute strategy a JAX variant is weighed against: the same replicas in sync, each
# holding the whole model (one device; DataParallel with MirroredStrategy).
BACKEND_COUNTERPART = {"default": "default", "data_parallel": "mirrored"}
_BACKEND_AXES = ("backend", "strategy", "distribute_dataset")


def backend_pairs(records: Sequence[VariantRecord]) -> list[Pair]:
    """(TensorFlow record, JAX record) pairs of the same model, API, precision, batch and
    replicas: the one-device default with the default, DataParallel with Mirrored (the first
    of its dataset distributions). Twins and the yardstick are left out."""
    ok = [r for r in records if r.ok and r.counts_as_variant]
    refs: dict[tuple[Any, ...], VariantRecord] = {}
    for r in ok:
        if r.variant.axis("backend") == "tensorflow":
            refs.setdefault((r.variant.axis("strategy"), *r.variant.key(without=_BACKEND_AXES)), r)
    pairs = []
    for r in ok:
        counterpart = BACKEND_COUNTERPART.get(str(r.variant.axis("strategy")))
        if r.variant.axis("backend") != "tensorflow" and counterpart is not None:
            ref = refs.get((counterpart, *r.variant.key(without=_BACKEND_AXES)))
            if ref is not None:
                pairs.append((ref, r))
    return pairs


TITLE = ("JAX vs TensorFlow (examples/s of the same model, API, precision and batch; one device "
         "with one device, DataParallel with Mirrored over as many replicas)")
BACKEND_COLOURS = {"tensorflow": "#f58518", "jax": "#4c78a8"}


def pair_label(rec: VariantRecord, with_model: bool = False) -> str:
    """What a pair has in common: its replicas and API ("1 device · fit", "2 replicas · ctl"),
    led by the model's name where a run's pairs have several ("cnn · 1 device · fit")."""
    replicas = int(rec.variant.axis("replicas") or 1)
    where = "1 device" if replicas == 1 else f"{replicas} replicas"
    api = str(rec.variant.api)
    return (f"{rec.variant.axis('model')} · " if with_model else "") + f"{where} · {api}" + (
        "" if rec.variant.precision == "float32" else f" · {rec.variant.precision}")


def _several_models(pairs: list[Pair]) -> bool:
    return len({str(jax.variant.axis("model")) for _, jax in pairs}) > 1


def ratio_text(tf: VariantRecord, jax: VariantRecord, floor: dict[str, Any] | None) -> str:
    """JAX ÷ TensorFlow headline, "~" where the run's noise floor could explain it."""
    ratio = jax.headline_ratio(tf)
    return f"{'~' if within_noise(ratio, floor) else ''}×{ratio:.2f}"


def render_backend_pairs(console: Console, records: list[VariantRecord],
                         floor: dict[str, Any] | None) -> None:
    """The terminal's table of the pairs; nothing without a JAX variant that has one."""
    pairs = backend_pairs(records)
    if not pairs:
        return
    table = Table(title=TITLE)
    for column in ("variant (JAX)", "against (TensorFlow)", "TensorFlow", "JAX",
                   "JAX / TensorFlow"):
        table.add_column(column, justify="left" if column.startswith(("variant", "against"))
                         else "right")
    for tf, jax in pairs:
        table.add_row(escape(str(jax.variant_id)), escape(str(tf.variant_id)),
                      f"{tf.headline:,.0f}", f"{jax.headline:,.0f}", ratio_text(tf, jax, floor))
    console.print(table)


def summary_line(run: RunView) -> str | None:
    """The report's sentence on the pairs; None without them."""
    pairs: list[Pair] = backend_pairs(run.records)
    if not pairs:
        return None
    models = _several_models(pairs)
    return ("JAX vs TensorFlow (the same model, API and precision; DataParallel against "
            "Mirrored): " + "; ".join(f"{pair_label(jax, models)} {ratio_text(tf, jax, run.noise_floor)}"
                                      f" ({tf.headline:,.0f} → {jax.headline:,.0f} examples/s)"
                                      for tf, jax in pairs) + ".")


def backend_charts(run: RunView) -> list[Chart]:
    """Each pair's examples/s on both backends, side by side; none without pairs."""
    pairs = backend_pairs(run.records)
    if not pairs:
        return []
    chart = Chart("backends", "JAX beside TensorFlow",
                  "The same Keras model, data, API, precision and batch on each backend: the "
                  "one-device default on both, DataParallel (JAX) beside MirroredStrategy "
                  "(TensorFlow) over as many replicas. Bars: the headline examples/s; hover "
                  "for the variants and the ratio.")
    models = _several_models(pairs)
    labels = [pair_label(jax, models) for _, jax in pairs]
    data = []
    for backend, index in (("tensorflow", 0), ("jax", 1)):
        recs = [pair[index] for pair in pairs]
        data.append({
            "type": "bar", "name": "TensorFlow" if backend == "tensorflow" else "JAX",
            "x": labels, "y": [r.headline for r in recs],
            "marker": {"color": BACKEND_COLOURS[backend]},
            "customdata": [[str(r.variant_id), ratio_text(tf, jax, run.noise_floor)]
                           for r, (tf, jax) in zip(recs, pairs, strict=True)],
            "hovertemplate": "%{customdata[0]}<br>%{y:,.0f} examples/s<br>JAX / TensorFlow "
                             "%{customdata[1]}<extra></extra>"})
    chart.figure = {"data": data, "layout": layout(
        380, barmode="group", bargap=0.35, yaxis={"title": {"text": "examples/s"}},
        xaxis={"automargin": True, "type": "category"}, legend={"orientation": "h", "y": 1.12})}
    return [chart]
