"""Every number of docs/isoflop.md: approach 2 (isoFLOP parabolas, ``analysis.isoflop.isoflop``) and
approach 3 (the Chinchilla-form fit, then its closed-form optimum) side by side, on Epoch's
digitised Chinchilla points and on synthetic isoFLOP sweeps with a known truth.

    .venv/bin/python scripts/isoflop_approaches.py [--boot 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl
from scipy.optimize import minimize_scalar

from analysis import Chinchilla, fit_isoflops, fit_law, load_epoch_chinchilla
from analysis.laws.allocation import compute_optimal
from analysis.synthetic.runs import synthetic_isoflop_runs
from analysis.tables.published import EPOCH, HOFFMANN, HOFFMANN_EXPONENTS

HOFFMANN_BUDGETS = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)
"""Hoffmann et al. 2022, sec. 3.2: "9 different training FLOP counts (ranging from 6e18 to
3e21)", read off their Fig. 3."""
KAPLAN = {"N_c": 8.8e13, "D_c": 5.4e13, "alpha_N": 0.076, "alpha_D": 0.095}
"""Kaplan et al. 2020 (arXiv 2001.08361), eq. 1.5 and Table 2: L = [(N_c/N)^(aN/aD) + D_c/D]^aD."""


def ci(v: np.ndarray, level: float) -> tuple[float, float]:
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    lo, hi = np.percentile(v, q)
    return float(lo), float(hi)


def approach3(data: pl.DataFrame, n_boot: int, workers: int, seed: int = 0):
    """a = beta/(alpha+beta) of the Chinchilla-form fit (Hoffmann et al. eq. 4), its
    bootstrap resamples, and the fit."""
    fit = fit_law(Chinchilla(), data, warn=False)
    al, be = fit.params["alpha"], fit.params["beta"]
    boot = fit.bootstrap(n_boot, seed=seed, workers=workers) if n_boot else None
    samples = boot.column("beta") / (boot.column("alpha") + boot.column("beta")) if boot else None
    return be / (al + be), samples, fit


def line(name: str, a: float, samples: np.ndarray | None, n: str = "") -> str:
    if samples is None:
        return f"{name:58s} a = {a:.4f}  b = {1 - a:.4f} {n}"
    lo95, hi95 = ci(samples, 0.95)
    lo80, hi80 = ci(samples, 0.80)
    return (
        f"{name:58s} a = {a:.4f} 95% ({lo95:.4f}, {hi95:.4f}) 80% ({lo80:.4f}, {hi80:.4f})"
        f"  b = {1 - a:.4f} 95% ({1 - hi95:.4f}, {1 - lo95:.4f}) {n}"
    )


def epoch(n_boot: int, workers: int) -> None:
    data = load_epoch_chinchilla()
    print(f"== Epoch's Chinchilla points ({data.height}), bootstrap {n_boot}, seed 0")
    for k, v in HOFFMANN_EXPONENTS.items():
        print(f"published Hoffmann et al. Table 2, {k}: a = {v['a']}, b = {v['b']} (10th, 90th)")
    ep = EPOCH["beta"] / (EPOCH["alpha"] + EPOCH["beta"])
    print(f"Epoch's published refit (Besiroglu et al. Table 1) implies a = {ep:.4f}")
    iso = fit_isoflops(data, n_boot=n_boot, seed=0)
    print(line("approach 2 (default: rtol 0.05, parabola of loss)", iso.a, iso.boot[:, 0],
               f"[{iso.kept.height} of {iso.optima.height} budgets kept]"))  # fmt: skip
    print("  kept budgets C:", ", ".join(f"{c:.3g}" for c in iso.kept["C"]))
    small = int((iso.optima["n_points"] < 3).sum())
    kinds = iso.optima.filter(~pl.col("kept") & (pl.col("n_points") >= 3))["reason"]
    kinds = kinds.str.split(":").list.first().value_counts(sort=True).rows()
    print(f"  groups: {iso.optima.height}, of 1-2 points: {small}; excluded of >= 3:", kinds)
    for note in iso.notes:
        print("  note:", note)
    for r in (0.02, 0.03, 0.04, 0.06, 0.08):
        f = fit_isoflops(data, rtol=r, n_boot=n_boot, seed=0)
        print(line(f"approach 2, rtol {r}", f.a, f.boot[:, 0], f"[{f.kept.height} kept]"))
    for name, kw in (
        ("approach 2, parabola of ln loss", {"log_loss": True}),
        ("approach 2, min_side 3", {"min_side": 3}),
        ("approach 2, Hoffmann's 9 budgets, rtol 0.2", {"budgets": HOFFMANN_BUDGETS, "rtol": 0.2}),
    ):
        f = fit_isoflops(data, n_boot=n_boot, seed=0, **kw)
        print(line(name, f.a, f.boot[:, 0], f"[{f.kept.height} kept]"))

    t0 = time.perf_counter()
    a3, s3, fit3 = approach3(data, n_boot, workers)
    print(line("approach 3 (Chinchilla form, all points)", a3, s3,
               f"[{time.perf_counter() - t0:.0f} s]"))  # fmt: skip
    print(f"  alpha = {fit3.params['alpha']:.4f}, beta = {fit3.params['beta']:.4f}; warnings:",
          "; ".join(w.split(":")[0] for w in fit3.warnings) or "none")  # fmt: skip
    in_kept = iso.points.filter(pl.col("budget").is_in(iso.kept["budget"].implode()))
    only = data.join(in_kept.select("N", "C"), on=["N", "C"], how="semi")
    a, s, _ = approach3(only, n_boot, workers)
    print(line(f"approach 3, only the {only.height} points of approach 2's kept budgets", a, s))
    for n_min in (1e8, 2e8, 4e8):
        sub = data.filter(pl.col("N") >= n_min)
        a, s, _ = approach3(sub, n_boot, workers)
        print(line(f"approach 3, N >= {n_min:.0e} ({sub.height} points)", a, s))
    n3, _ = compute_optimal(fit3.params, iso.kept["C"].to_numpy())
    ratio = n3 / iso.kept["N_opt"].to_numpy()
    print("per kept budget, approach-3 N_opt / approach-2 N_opt:",
          ", ".join(f"{r:.2f}" for r in ratio))  # fmt: skip


def kaplan_loss(N, D):
    k = KAPLAN
    return ((k["N_c"] / N) ** (k["alpha_N"] / k["alpha_D"]) + k["D_c"] / D) ** k["alpha_D"]


def kaplan_runs(budgets, offsets, per_budget=9, span=1.0, noise=0.002, seed=0) -> pl.DataFrame:
    """An isoFLOP sweep from Kaplan et al.'s L(N, D) (C = 6ND); returns it and the true
    N_opt per budget (numerical minimum along the budget)."""
    rng = np.random.default_rng(seed)
    rows, truth = [], []
    for C, off in zip(budgets, offsets):
        res = minimize_scalar(lambda x, C=C: kaplan_loss(np.exp(x), C / (6 * np.exp(x))),
                              bounds=(np.log(1e3), np.log(C / 6)), method="bounded",
                              options={"xatol": 1e-10})  # fmt: skip
        truth.append(np.exp(res.x))
        for N in np.exp(res.x) * 10.0 ** (off + np.linspace(-span, span, per_budget)):
            D = C / (6 * N)
            rows.append((N, D, C, kaplan_loss(N, D) * np.exp(rng.normal(0, noise))))
    N, D, C, L = (np.array(c) for c in zip(*rows))
    return pl.DataFrame({"N": N, "D": D, "U": D, "C": C, "loss": L}), np.array(truth)


def synthetic(n_boot: int, workers: int) -> None:
    offsets = (-0.3, 0.2, 0.0, 0.3, -0.15)
    budgets = (1e18, 1e19, 1e20, 1e21, 1e22)
    truth = HOFFMANN["beta"] / (HOFFMANN["alpha"] + HOFFMANN["beta"])
    print(f"\n== synthetic, Chinchilla law at Hoffmann's constants: true a = {truth:.4f}")
    runs = synthetic_isoflop_runs(budgets=budgets, offset=offsets, seed=1).select(
        "N", pl.col("D_total").alias("D"), pl.col("D_total").alias("U"),
        pl.col("flops").alias("C"), pl.col("final_loss").alias("loss"),
    )  # fmt: skip
    iso = fit_isoflops(runs, n_boot=n_boot, seed=0)
    print(line("approach 2", iso.a, iso.boot[:, 0]))
    a3, s3, _ = approach3(runs, n_boot, workers)
    print(line("approach 3", a3, s3))

    runs, n_true = kaplan_runs(budgets, offsets)
    true_a = np.polyfit(np.log(budgets), np.log(n_true), 1)[0]
    print(f"\n== synthetic, Kaplan et al. eq. 1.5 (no irreducible loss): true a = {true_a:.4f}")
    iso = fit_isoflops(runs, n_boot=n_boot, seed=0)
    print(line("approach 2", iso.a, iso.boot[:, 0]))
    a3, s3, fit3 = approach3(runs, n_boot, workers)
    print(line("approach 3 (Chinchilla form imposed)", a3, s3))
    print(f"  its fit: E = {fit3.params['E']:.3g}, alpha = {fit3.params['alpha']:.4f}, "
          f"beta = {fit3.params['beta']:.4f}, R^2 = {fit3.r2:.5f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    epoch(args.boot, args.workers)
    synthetic(args.boot, args.workers)


if __name__ == "__main__":
    main()
