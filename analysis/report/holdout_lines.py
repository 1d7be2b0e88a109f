"""The extrapolation check of every law the infinite-compute report prints: each law vs N
refitted without its largest size (and without its largest two when it has >= 6 sizes),
and the reference recipe's data law without its largest budget U, each held-out loss
predicted with a 95% prediction interval (``extrapolation.holdout_check``: delta method,
Student t; its coverage on synthetic studies with known truth is in docs/extrapolation.md).
A law that is not identified has no extrapolation to check and gets no line.
"""

from __future__ import annotations

from analysis.fit.power_law import SCALE
from analysis.recipes.extrapolation import MIN_POINTS_K2, holdout_check
from analysis.recipes.infinite_compute import RecipeAnalysis, unidentified

__all__ = ["holdout_lines"]


def holdout_lines(res: RecipeAnalysis) -> list[str]:
    """One line per law and held-out count: 'regularized vs N: held out N = 271k: ...'."""
    lines = []
    for name, fit in res.fits.items():
        if fit is None or fit.n_free != 3 or unidentified(fit) is not None:
            continue
        sizes = len(set(fit.x.tolist()))
        for k in (1, 2) if sizes >= MIN_POINTS_K2 else (1,):
            lines.append(f"{name} vs N: {holdout_check(fit.x, fit.y, k).line()}")
    law = res.data_law
    if law is not None:
        u = res.data_points["U"].to_numpy() / SCALE
        check = holdout_check(u, res.data_points["loss"].to_numpy(), 1, name="U", floor=law.floor)
        lines.append(f"{res.reference} recipe vs U ({'with' if law.floor else 'no'} floor): "
                     f"{check.line()}")
    return lines
