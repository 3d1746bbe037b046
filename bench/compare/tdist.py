"""One-sided Student-t quantiles for the few degrees of freedom the regression tests meet (no
scipy dependency for 60 numbers)."""

from __future__ import annotations

# One-sided Student-t quantiles by degrees of freedom 1..30 (then the normal's).
_T90 = [3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372, 1.363, 1.356, 1.350,
        1.345, 1.341, 1.337, 1.333, 1.330, 1.328, 1.325, 1.323, 1.321, 1.319, 1.318, 1.316, 1.315,
        1.314, 1.313, 1.311, 1.310]
_T99 = [31.82, 6.965, 4.541, 3.747, 3.365, 3.143, 2.998, 2.896, 2.821, 2.764, 2.718, 2.681, 2.650,
        2.624, 2.602, 2.583, 2.567, 2.552, 2.539, 2.528, 2.518, 2.508, 2.500, 2.492, 2.485,
        2.479, 2.473, 2.467, 2.462, 2.457]
_TABLES = {0.90: (_T90, 1.282), 0.99: (_T99, 2.326)}


def t_quantile(df: int, level: float) -> float:
    """The one-sided `level` quantile (0.90 or 0.99) of Student's t with `df` degrees of freedom."""
    table, normal = _TABLES[level]
    return table[df - 1] if df <= len(table) else normal
