"""One-sided Student-t quantiles from scipy, at every degree of freedom.

scipy.special's `stdtrit` (what scipy.stats' `t.ppf` computes with) is imported on first use, not
with the module: `bench compare --help` and the other commands that import the detector start
without it. scipy.special, not scipy.stats: a run's noise floor needs a quantile, and
scipy.stats takes several times as long to import.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)
def t_quantile(df: int, level: float) -> float:
    """The one-sided `level` quantile of Student's t with `df` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, level))
