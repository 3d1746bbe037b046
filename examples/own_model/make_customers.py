"""Writes customers.csv, the example's data: 4,000 made-up customers (age, income, city id,
visits) and whether they bought, drawn so that every column carries some signal.

    python examples/own_model/make_customers.py
"""

from pathlib import Path

import numpy as np


def main() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    age = rng.integers(18, 80, n)
    income = np.round(rng.lognormal(10.5, 0.5, n), 2)
    city = rng.integers(0, 500, n)
    visits = rng.poisson(3, n)
    city_effect = np.random.default_rng(8).normal(0, 1, 500)
    logit = (0.04 * (age - 45) + 0.8 * (np.log(income) - 10.5) + city_effect[city]
             + 0.3 * (visits - 3))
    bought = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    lines = ["age,income,city,visits,bought"]
    lines += [",".join(str(v) for v in row) for row in zip(age, income, city, visits, bought, strict=True)]
    (Path(__file__).parent / "customers.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
