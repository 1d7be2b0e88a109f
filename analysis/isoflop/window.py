"""Which of a budget's points enter its optimum: a window in N around the lowest-loss run.

Far from its minimum an isoFLOP curve is not a parabola in ln N. Along C = 6 N D the
Chinchilla loss L = E + A/N^α + B/D^β (Hoffmann et al. 2022, arXiv 2203.15556, eq. 2) is a
sum of two exponentials in x = ln N, exp(-α x) and exp(+β x), steep on one side and shallow
on the other; a parabola fitted over 2-3 decades of N puts its vertex where the two sides
balance in least squares, not at the minimum. Porian et al. 2024 (arXiv 2406.19146, sec. 2)
and Hoffmann et al. fit each curve near its minimum; here the window is:

    keep the runs with N in [N_best / w, N_best * w],  N_best = the N of the lowest loss

(w = ``window``; ``None`` keeps every run). When that leaves fewer than ``min_side``
distinct N on a side of N_best, the nearest distinct N on that side are added (when the
budget has them), so a coarse grid still gets a vertex bracketed by points. A budget whose
lowest loss sits at the edge of its grid keeps a one-sided window; its vertex then falls
outside the window and the guards exclude it (off-centre), as before.

The default w and how it was chosen: ``DEFAULT_WINDOW`` (docs/isoflop.md, synthetic study).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_WINDOW", "window_mask"]

DEFAULT_WINDOW = 8.0
"""w: keep N within a factor 8 (0.9 decades) of the lowest-loss N. Chosen on the
realistic synthetic study of ``bench/isoflop_study.py`` (``analysis.synthetic.isoflop_realistic``:
240 sweeps, loss noise 0.005-0.02 nats, off-centre lopsided ladders of 3-12 sizes, 4-8
budgets; docs/isoflop.md), parabola: median |a error| 1.03%, the lowest (w = 4: 1.14%,
6: 1.09%, 12: 1.06%, 16: 1.10%, 32: 1.20%, all points: 1.32%; the interpolated argmin
2.6-2.7% at any window); sweeps beyond 4% off 20 of 235 (12: 16, 16: 23, 4: 24, 32: 27,
all: 38); the truth in the widened 95% CI in 234 of 235. At this noise a narrower
window leaves too few points to pin the vertex and a wider one lets the asymmetric
valley (α != β) pull it; 6 to 16 are within the study's own noise of each other. The
old default, 16, was chosen on near-noiseless hand-written sweeps
(``analysis.synthetic.isoflop``, noise 0.1-1% relative); on Porian et al. 2024's 15
configurations (arXiv 2406.19146) 8 also beat it (median 1.9% against 2.3%, worst 5.3%
against 6.5%, as measured on the realistic study)."""

_EPS = 1e-9  # relative slack on the window's edges (an N at exactly N_best * w is kept)


def window_mask(
    N: np.ndarray, loss: np.ndarray, window: float | None, *, min_side: int = 2
) -> np.ndarray:
    """(n,) bool: the budget's points (N, loss: (n,)) inside the window around the
    lowest-loss N, widened to ``min_side`` distinct N each side when available."""
    if window is None or N.size == 0:
        return np.ones(N.size, dtype=bool)
    x = np.log(N)
    best = x[int(np.argmin(loss))]
    half = float(np.log(window)) * (1 + _EPS)
    keep = np.abs(x - best) <= half
    distinct = np.unique(x)
    for side in (distinct[distinct < best][::-1], distinct[distinct > best]):
        inside = int(np.sum(np.abs(side - best) <= half))
        if inside < min_side and side.size > inside:
            reach = abs(side[min(min_side, side.size) - 1] - best)
            keep |= (np.abs(x - best) <= reach * (1 + _EPS)) & np.isin(x, side)
    return keep
