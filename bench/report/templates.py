"""The Jinja environment of every page bench writes (the report's and `bench compare`'s).

Its own module, light on imports, so that `bench compare`, which writes one page, does not load
the report's charts and plotly.
"""

from __future__ import annotations

import jinja2

from bench.report import tables


def template_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bench.report", "templates"),
        autoescape=True,  # every {{ }} is escaped unless a value is explicitly marked safe
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["cells"] = tables.cells_html
    return env
