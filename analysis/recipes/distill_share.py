"""How much of the ensembling gain a distilled student keeps (Kim et al. 2025,
"Pre-training under infinite compute", arXiv 2509.14786: distilling an ensemble into one
model of the same size keeps most of the ensemble's gain).

    share = (L_single - L_student) / (L_single - L_ensemble)

L_single: the best single model of the student's size N at the base budget (the lowest loss
any recipe reached at N: the regularized recipe's, in Kim's layout); L_ensemble: the
largest-K logit-averaged ensemble of size N. 1 = the student matches the ensemble, 0 = no
better than one model, < 0 worse. Self-distilled students (one teacher) are measured
against the same ensemble gain. Pure polars.
"""

from __future__ import annotations

import math

import polars as pl

from analysis.recipes.infinite_compute import RecipeAnalysis

__all__ = ["student_shares"]


def student_shares(res: RecipeAnalysis) -> pl.DataFrame:
    """block, N, loss, single, ensemble, K, share, why (share null: the reason)."""
    single = (res.best_per_n.filter(~pl.col("recipe").str.starts_with("ensemble"))
              .group_by("N").agg(pl.col("loss").min().alias("single")))
    rows = []
    for row in res.students.iter_rows(named=True):
        n, loss = float(row["N"]), float(row["loss"])
        s = single.filter(pl.col("N") == n)["single"]
        ens = res.ensemble.filter(pl.col("N") == n)
        L1 = float(s[0]) if s.len() else math.nan
        K = int(ens["K"].max()) if ens.height else None
        LK = float(ens.filter(pl.col("K") == K)["loss"][0]) if ens.height else math.nan
        why = None
        if math.isnan(L1):
            why = f"no single model of N={int(n):,} at the base budget"
        elif K is None or K < 2:
            why = f"no ensemble of N={int(n):,} (run `scalelab ensemble SWEEP`)"
        elif not L1 - LK > 0:
            why = f"the ensemble of N={int(n):,} is no better than its best single model"
        share = None if why else (L1 - loss) / (L1 - LK)
        rows.append((row.get("block"), n, loss, L1, LK, K, share, why))
    schema = {"block": pl.String, "N": pl.Float64, "loss": pl.Float64, "single": pl.Float64,
              "ensemble": pl.Float64, "K": pl.Int64, "share": pl.Float64, "why": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def share_lines(res: RecipeAnalysis) -> list[str]:
    """One sentence per student: its loss against one model and the ensemble, and its share."""
    out = []
    for r in student_shares(res).iter_rows(named=True):
        head = f"{r['block']} student (N={int(r['N']):,}): loss {r['loss']:.4f}"
        if r["why"]:
            out.append(f"{head}; no share: {r['why']}")
            continue
        out.append(f"{head}, best single model {r['single']:.4f}, K={r['K']} ensemble {r['ensemble']:.4f}: "
                   f"keeps {100 * r['share']:.0f}% of the ensembling gain")
    return out
