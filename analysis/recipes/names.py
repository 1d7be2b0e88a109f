"""The recipes' names and the two conventions every recipe analysis shares (Kim et al. 2025,
"Pre-training under infinite compute", arXiv 2509.14786): the reference weight decay of the
standard recipe (``REF_WD``) and the base unique-token budget of a sweep (``base_budget``).

A name is spelled here once; the analysis, the report, the plots, ``compare``, ``next`` and
the adaptive loop import it (tests/test_architecture.py checks that the ensembles' names
appear nowhere else in ``analysis`` and ``scalelab``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["ENSEMBLE_K", "JOINT", "NOT_RECIPES", "REF_WD", "REGULARIZED", "SEED_MEAN",
           "SEED_MEAN_OF", "STANDARD", "base_budget"]

STANDARD = "standard"
"""Kim's standard recipe: the tuned grid at the reference weight decay ``REF_WD``."""
REGULARIZED = "regularized"
"""Kim's regularized recipe: the best over the whole tuned grid (weight decay and epochs)."""
REF_WD = 0.1
"""The standard recipe's weight decay (AdamW's usual 0.1; Kim et al.'s standard recipe)."""
SEED_MEAN_OF = REGULARIZED
"""The recipe whose best run per size is re-estimated as the mean over that cell's seeds."""
SEED_MEAN = "regularized, mean of seeds"
"""The name of that re-estimate (a recipe of ``best_per_n`` and a key of ``fits``)."""
ENSEMBLE_K = "ensemble (K->inf)"
"""Each size's ensemble taken to K -> inf members (A/K + E per size): ``best_per_n``'s points."""
JOINT = "ensemble (N,K->inf)"
"""Those K -> inf limits fitted against N (A/N^B + E): the joint (N, K -> inf) asymptote, a key
of ``fits``."""
NOT_RECIPES = (SEED_MEAN, JOINT, ENSEMBLE_K)
"""Fits that are no recipe of their own: a re-estimate of the regularized points, and the
ensembles' fitted K -> inf limits (not runs; the verdict judges those apart)."""


def base_budget(unique_tokens: pl.Series) -> float:
    """The base unique-token budget U0 of a sweep: the budget most of the recipes' runs
    share, the largest of those on a tie."""
    return float(unique_tokens.mode().sort()[-1])
