"""The HTML report: run directories in, a static offline site out (see `site.py`)."""

from bench.report.site import default_out_dir, render_site

__all__ = ["default_out_dir", "render_site"]
