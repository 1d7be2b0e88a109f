"""Synthetic studies with a known law of (N, D[, U]), and how often the extrapolation check
of ``analysis.fit.prediction.holdout_largest_2d`` covers them (bench/extrapolation_coverage.py
--2d; docs/extrapolation.md has the table; tests/analysis/test_extrapolation_2d.py holds it).

The laws: ``chinchilla``, L = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, arXiv
2203.15556); ``data_constrained``, the same law at Muennighoff et al.'s effective N', D'
(arXiv 2305.16264). The truths are drawn around those papers' fits (``_draw_truth``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError
from analysis.fit.prediction import holdout_largest_2d, law_2d

__all__ = ["DC_EPOCHS", "DC_U_FACTORS", "DESIGNS", "GRID_TPP", "Coverage2D", "Truth2D", "coverage_2d",
           "simulate_2d"]

DESIGNS = ("grid", "isoflop")
GRID_TPP = (5.0, 10.0, 20.0, 40.0, 80.0)
"""Tokens per parameter of each size in the "grid" design."""
DC_U_FACTORS = (0.05, 0.15, 0.4, 2.5, 6.0, 15.0)
"""Unique tokens of a data-constrained study's runs at size N, in units of U_opt(N) (the U
whose N_opt(U) is N): 0.05-0.4 have excess parameters (N > N_opt(U): R_N* acts), the
others do not (their one-epoch runs fit stage 1)."""
DC_EPOCHS = (1.0, 4.0, 16.0, 40.0)


@dataclass(frozen=True)
class Truth2D:
    """A synthetic study's law: natural parameters, and the law's name."""

    law: str
    params: dict[str, float]


def _draw_truth(rng: np.random.Generator, law: str) -> Truth2D:
    """chinchilla: A log-uniform in [200, 1000], B log-uniform in [200, 2000], E uniform in
    [1.6, 2.0], alpha in [0.28, 0.45], beta in [0.25, 0.40] (around Hoffmann et al.'s and
    Besiroglu et al.'s estimates, arXiv 2203.15556, 2404.10102). data_constrained (around
    Muennighoff et al.'s C4 fit, arXiv 2305.16264: A = 521, B = 1488 = 2.86 A, alpha = beta =
    0.353, R_D* = 15.4, R_N* = 5.3): A log-uniform in [300, 700], B = A x log-uniform [2, 4]
    (7 to 50 tokens per parameter at the compute optimum), E in [1.6, 2.0], alpha in [0.30,
    0.40], beta = alpha x [0.85, 1.0] (N_opt(U) grows no faster than U, as fitted), R_D*
    log-uniform in [5, 30], R_N* in [2, 15]."""
    def lu(a: float, b: float) -> float:
        return float(np.exp(rng.uniform(math.log(a), math.log(b))))

    if law == "chinchilla":
        p = {"A": lu(200, 1000), "B": lu(200, 2000), "E": float(rng.uniform(1.6, 2.0)),
             "alpha": float(rng.uniform(0.28, 0.45)), "beta": float(rng.uniform(0.25, 0.40))}
        return Truth2D(law, p)
    alpha = float(rng.uniform(0.30, 0.40))
    A = lu(300, 700)
    p = {"A": A, "B": A * lu(2.0, 4.0), "E": float(rng.uniform(1.6, 2.0)),
         "alpha": alpha, "beta": alpha * float(rng.uniform(0.85, 1.0)),
         "R_D": lu(5, 30), "R_N": lu(2, 15)}
    return Truth2D(law, p)


def simulate_2d(rng: np.random.Generator, law: str, n_sizes: int, sigma: float, *,
                design: str = "grid", span: float = 100.0, n_max: float = 1e9,
                truth: Truth2D | None = None) -> tuple[pl.DataFrame, Truth2D]:
    """One synthetic study: ``n_sizes`` sizes N log-spaced over ``span`` up to ``n_max``, the
    law's truth drawn (``_draw_truth``) unless given, Gaussian noise of SD ``sigma`` nats per
    run. Returns (runs: N, D[, U], loss, truth), the truth.

    chinchilla, ``design`` "grid": each size at ``GRID_TPP`` tokens per parameter;
    "isoflop": each size at D = 20 N r^m for every integer m with 2 <= D / N <= 200, r the
    ratio of neighbouring sizes, so the runs lie on shared budgets C = 6 N D = 120 N_1^2
    r^(2i + m) (isoFLOP curves through every size). data_constrained: each size at U =
    ``DC_U_FACTORS`` x U_opt(N) and ``DC_EPOCHS`` epochs (D = epochs x U)."""
    lw = law_2d(law)
    if design not in DESIGNS:
        raise AnalysisInputError(f"design must be one of {list(DESIGNS)}, got '{design}'")
    truth = truth or _draw_truth(rng, law)
    sizes = np.geomspace(n_max / span, n_max, n_sizes)
    cols: dict[str, list[float]] = {"N": [], "D": [], "U": []}
    if law == "chinchilla":
        if design == "grid":
            tpp = [np.array(GRID_TPP)] * n_sizes
        else:
            r = span ** (1.0 / (n_sizes - 1))
            m = np.arange(math.ceil(-math.log(10) / math.log(r) - 1e-9),
                          math.floor(math.log(10) / math.log(r) + 1e-9) + 1)
            tpp = [20.0 * r ** m] * n_sizes
        for N, t in zip(sizes, tpp):
            cols["N"] += [float(N)] * t.size
            cols["D"] += list(N * t)
    else:
        p = truth.params
        a, b = p["alpha"], p["beta"]
        G = (a * p["A"] / (b * p["B"])) ** (1.0 / (a + b))
        kk = b / a
        for N in sizes:
            u_opt = (N / G ** (1 + kk)) ** (1 / kk)  # N_opt(u_opt) = N
            for f in DC_U_FACTORS:
                for ep in DC_EPOCHS:
                    cols["N"].append(float(N))
                    cols["U"].append(float(f * u_opt))
                    cols["D"].append(float(f * u_opt * ep))
    X = {c: np.array(v) for c, v in cols.items() if c in lw.columns}
    clean = lw.predict(truth.params, X)
    loss = clean + sigma * rng.standard_normal(clean.size)
    return pl.DataFrame({**X, "loss": loss, "truth": clean}), truth


@dataclass(frozen=True)
class Coverage2D:
    """How often ``holdout_largest_2d``'s intervals cover, over simulated studies."""

    law: str
    design: str
    n_sizes: int
    k: int
    sigma: float
    studies: int
    checked: int  # studies whose refit gave intervals (the others: ``why``)
    runs: float  # share of held-out observations inside their interval
    studies_covered: float  # share of checked studies with every held-out run covered
    truth: float  # share of held-out noise-free losses inside their interval
    median_abs_error: float  # nats
    median_width: float  # median hi - lo, nats

    HEADER = ("| law | design | sizes | k | sigma | checked | runs covered | studies all covered "
              "| truth covered | median abs error | median PI width |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")

    def row(self) -> str:
        """A markdown table row under ``HEADER``."""
        return (f"| {self.law} | {self.design} | {self.n_sizes} | {self.k} | {self.sigma:g} | "
                f"{self.checked}/{self.studies} | {100 * self.runs:.1f}% | "
                f"{100 * self.studies_covered:.1f}% | {100 * self.truth:.1f}% | "
                f"{self.median_abs_error:.4f} | {self.median_width:.4f} |")


def coverage_2d(law: str, n_sizes: int, sigma: float, *, k: int = 1, design: str = "grid",
                studies: int = 200, seed: int = 0, level: float = 0.95,
                **study) -> Coverage2D:
    """``holdout_largest_2d`` on ``studies`` synthetic studies (``simulate_2d``, seeds ``seed``
    .. ``seed + studies - 1``); ``study``: simulate_2d's other keywords (span, n_max)."""
    hit = tot = all_hit = truth_hit = checked = 0
    errors, widths = [], []
    for s in range(seed, seed + studies):
        runs, _ = simulate_2d(np.random.default_rng(s), law, n_sizes, sigma, design=design,
                              **study)
        chk = holdout_largest_2d(runs, law, k, level)
        if not chk.checked:
            continue
        checked += 1
        all_hit += chk.covered
        cols = ["N", "D"] + (["U"] if law == "data_constrained" else [])
        truth = {tuple(r[:-1]): r[-1] for r in runs.select(*cols, "truth").iter_rows()}
        for p in chk.points:
            tot += 1
            hit += p.covered
            key = (p.N, p.D) + ((p.U,) if law == "data_constrained" else ())
            truth_hit += p.lo <= truth[key] <= p.hi
            errors.append(abs(p.error))
            widths.append(p.hi - p.lo)
    nan = float("nan")
    return Coverage2D(law=law, design=design, n_sizes=n_sizes, k=k, sigma=sigma,
                      studies=studies, checked=checked, runs=hit / tot if tot else nan,
                      studies_covered=all_hit / checked if checked else nan,
                      truth=truth_hit / tot if tot else nan,
                      median_abs_error=float(np.median(errors)) if errors else nan,
                      median_width=float(np.median(widths)) if widths else nan)
