"""The `Chart` every page section draws, and the plotly plumbing the chart builders share.

Each builder returns a `Chart`: the figure when the runs have the data for it, and otherwise a note
saying what is missing and how to get it, so a page degrades instead of showing an empty frame.

Figures are plain plotly JSON dicts: plotly's graph objects validate every property on every
assignment, which made a 100-run site take 20 s; the tests validate each builder's output with
`plotly.graph_objects.Figure` instead. The page loads the shared `assets/plotly.min.js` and the
template once (`assets/plotly-template.js`) and draws them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.io as pio
from plotly.io.json import to_json_plotly

from bench.record.model import VariantRecord

Figure = dict[str, Any]

# One colour per strategy on every chart of the site, so a strategy is recognisable across pages.
STRATEGY_COLOURS = {
    "default": "#4c566a", "one_device": "#7b8494", "mirrored": "#1f77b4",
    "central_storage": "#2ca02c", "multi_worker_mirrored": "#9467bd",
    "parameter_server": "#d62728", "tpu": "#ff7f0e",
}
TEMPLATE = "plotly_white"  # shipped once per site, not copied into every figure


@dataclass
class Chart:
    id: str
    title: str
    how_to_read: str
    figure: Figure | None = None
    note: str = ""  # what is missing or partial, in words
    # Arrays that several traces (or the layout) hold alike, written once in the page: a trace
    # or axis whose array equals shared[name] carries "@name" instead (report.js puts it back).
    shared: dict[str, list[Any]] | None = None

    @property
    def rendered(self) -> bool:
        return self.figure is not None

    @property
    def figure_json(self) -> str:
        figure = rounded(self.figure)
        if self.shared:
            shared = {name: rounded(values) for name, values in self.shared.items()}
            targets = [*figure["data"], *(v for k, v in figure["layout"].items()
                                          if k.startswith(("xaxis", "yaxis")))]
            for target in targets:
                for key in SHARED_KEYS:
                    for name, values in shared.items():
                        if target.get(key) == values:
                            target[key] = f"@{name}"
            figure["shared"] = shared
        return html_safe_json(to_json_plotly(figure))


SHARED_KEYS = ("x", "y", "customdata", "text", "categoryarray", "tickvals", "ticktext")


SIGNIFICANT = 4  # digits a chart is read at: its data is written with no more


def rounded(value: Any) -> Any:
    """`value` with every float at `SIGNIFICANT` significant digits (most of a page's bytes are
    chart numbers: 16 digits where 4 are read made a run page 2.5 times as large)."""
    kind = type(value)
    if kind is float:
        if value != value or value in (math.inf, -math.inf):
            return value
        short = float(f"{value:.{SIGNIFICANT}g}")
        return int(short) if short.is_integer() and abs(short) < 1e15 else short
    if kind is dict:
        return {k: rounded(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        if len(value) > 16 and all(type(v) is float for v in value):  # a data array
            return _short(value)
        return [rounded(v) for v in value]
    return value


def _short(values: list[float]) -> list[Any]:
    """The floats at `SIGNIFICANT` significant digits, as the nearest doubles (so JSON writes
    them short); whole numbers as ints when all are whole."""
    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x) & (x != 0)
    digits = np.zeros(len(x))
    digits[finite] = SIGNIFICANT - 1 - np.floor(np.log10(np.abs(x[finite])))
    up, down = digits >= 0, digits < 0  # scale by exact powers of ten only
    out = x.copy()
    out[up & finite] = np.round(x[up & finite] * 10.0 ** digits[up & finite]) \
        / 10.0 ** digits[up & finite]
    out[down & finite] = np.round(x[down & finite] / 10.0 ** -digits[down & finite]) \
        * 10.0 ** -digits[down & finite]
    if np.isfinite(out).all() and (out == np.round(out)).all() and (np.abs(out) < 1e15).all():
        return out.astype(np.int64).tolist()
    return out.tolist()


def html_safe_json(text: str) -> str:
    """JSON that cannot close a <script> element or open a comment: user text (variant ids,
    error messages) stays data whatever it contains."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def template_script() -> str:
    """JavaScript that defines the shared plotly template every figure on the site uses."""
    template = to_json_plotly(pio.templates[TEMPLATE].to_plotly_json())
    return f"window.BENCH_PLOTLY_TEMPLATE = {html_safe_json(template)};\n"


def layout(height: int, **extra: Any) -> dict[str, Any]:
    """The margins, font and hover labels every figure shares; `extra` holds the chart's own axes."""
    return {"height": height, "margin": {"l": 10, "r": 10, "t": 40, "b": 40},
            "font": {"family": "system-ui, sans-serif", "size": 12},
            "hoverlabel": {"namelength": -1}, **extra}


def categories_axis() -> dict[str, Any]:
    """A y axis of variant ids, first at the top, as wide as the longest id needs."""
    return {"autorange": "reversed", "automargin": True, "type": "category"}


def line_shape(xref: str, yref: str, x0: float, x1: float, y0: float, y1: float,
               dash: str = "dash", colour_: str = "#555555") -> dict[str, Any]:
    """A thin reference line (ideal, 1.0, a window edge) drawn under the data."""
    return {"type": "line", "xref": xref, "yref": yref, "x0": x0, "x1": x1, "y0": y0, "y1": y1,
            "line": {"color": colour_, "dash": dash, "width": 1}}


def colour(rec: VariantRecord) -> str:
    return STRATEGY_COLOURS.get(str(rec.strategy), "#888888")
