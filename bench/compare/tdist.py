"""One-sided Student-t quantiles from scipy, at every degree of freedom.

scipy.special's `stdtrit` (what scipy.stats' `t.ppf` computes with) is imported on first use, not
with the module: `bench compare --help` and the other commands that import the detector start
without it, and a run's noise floor pays about 0.45 s for it where scipy.stats would take about
2 s more (2026-11-29, the 2-core AMD EPYC).
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)
def t_quantile(df: int, level: float) -> float:
    """The one-sided `level` quantile of Student's t with `df` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, level))
