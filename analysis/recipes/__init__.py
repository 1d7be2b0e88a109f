"""Recipes compared (Kim et al. 2025, "Pre-training under infinite compute", arXiv
2509.14786): the asymptote fits, compute-optimal allocation and data-efficiency
multiplier (``asymptotes``), the recipe law L = A/x^B + E and its fit (``kim_law``), a
recipe's E with its CI and identifiability (``recipe_asymptote``), the recipe rows of a
runs table (``rows``) and each recipe's points per size (``cells``), the whole
infinite-compute analysis of a sweep (``infinite_compute``), recipes compared by a common
law fit (``compare``) and the verdict in words (``verdict``, ``verdicts``), the data
multiplier with a bootstrap CI (``data_multiplier``), the holdout extrapolation check
(``extrapolation``), the share of the ensembling gain a distilled student keeps
(``distill_share``), and synthetic runs tables for notebooks and tests (``synthetic``).

Imports only the folders before it (``isoflop``, ``fit``, ``solvers``, ``laws``,
``tables``) and the base modules.

``analysis.recipes.fit_asymptote`` and the other public names of ``asymptotes`` resolve
here too (loaded on first access, so importing ``analysis.recipes.rows`` costs no scipy).
"""

_ASYMPTOTES = frozenset({
    "AsymptoteFit",
    "compare_asymptotes",
    "compute_optimal",
    "compute_optimal_constrained",
    "data_efficiency",
    "effective_data",
    "ensemble_asymptote",
    "fit_asymptote",
    "joint_asymptote",
})


def __getattr__(name: str):
    if name in _ASYMPTOTES:
        from analysis.recipes import asymptotes

        value = getattr(asymptotes, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analysis.recipes' has no attribute {name!r}")


__all__ = sorted(_ASYMPTOTES)
