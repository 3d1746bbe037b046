"""One-sided Student-t quantiles from scipy.stats, at every degree of freedom.

scipy.stats is imported on first use, not with the module: `bench compare --help` and the other
commands that import the detector start without paying for it.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)
def t_quantile(df: int, level: float) -> float:
    """The one-sided `level` quantile of Student's t with `df` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(level, df))
