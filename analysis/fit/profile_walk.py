"""One side of a profile: walk out from the estimate, bracket the threshold, locate and
verify the interval's end (Venzon & Moolgavkar 1988, Appl. Stat. 37:87).

The walk refits at grid points ``distances`` from the estimate t_hat (each from the previous
point's solution and from the estimate: profile_refit.py). At the first point whose rise
F_p(t) - F(theta_hat) reaches the threshold, the crossing between it and the point before
is located by Brent's method (to 1e-5 of the far end's distance from t_hat), every refit
started from the solutions at both ends of the bracket (the estimate's side and the far
point's) and from the estimate, the lowest kept.

Verification: the located end c is refitted once more (the same starts, plus the solution
Brent found there) and its rise divided by the threshold. An end counts only when that
ratio lies in [0.5, 2] (``RISE_OK``). Outside it the refit disagrees with the bracket - the
profile jumps between valleys - and the bracket is narrowed (c becomes its inner end when
the rise is below half the threshold, its outer end when above twice it) and Brent runs
again, at most ``_REFINE`` times; an end that still fails is reported "not found", never as
an end. A rise below half the threshold also refits the bracket's far point from the
verified one: when that falls below the threshold, the far point's first refit had left
the valley (L-BFGS-B's first step can jump to another one, e.g. a = -sqrt(b) in a
Rosenbrock valley b = a^2) and the walk goes on from it. A side whose walk reaches the box bound below the threshold
ends at the bound: "box".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import brentq

from analysis.fit.profile_refit import Refitter

__all__ = ["EndKind", "End", "RISE_OK", "walk_side"]

EndKind = Literal["profile", "box", "not found"]

RISE_OK = (0.5, 2.0)  # accepted refitted rise at an end, in units of the threshold
_BRENT_XTOL = 1e-5  # in units of the far bracket end's distance from the estimate
_REFINE = 4  # Brent runs per end before it is "not found"
_LOWER_RTOL = 1e-9  # a profile point this far below the optimum counts as lower


@dataclass(frozen=True)
class End:
    """One end of a profile interval, in internal coordinates."""

    t: float  # the end (the box bound for "box"; nan for "not found")
    kind: EndKind
    rise_ratio: float  # refitted rise at t / threshold (nan when there is no end)


@dataclass
class _Point:
    t: float
    rise: float
    u: np.ndarray


class _Side:
    def __init__(self, ref: Refitter, t_hat: float, f_hat: float, thr: float):
        self.ref, self.t_hat, self.f_hat, self.thr = ref, t_hat, f_hat, thr
        self.pts: list[tuple[float, float]] = []
        self.lower = False

    def point(self, t: float, starts: list[np.ndarray]) -> _Point:
        f, u = self.ref.refit(t, starts)
        rise = f - self.f_hat
        self.lower |= rise < -_LOWER_RTOL * abs(self.f_hat) - 1e-15
        self.pts.append((t, rise))
        return _Point(t, rise, u)

    def brent(self, inner: _Point, outer: _Point) -> _Point:
        """The crossing of the threshold between ``inner`` (below) and ``outer`` (above)."""
        known = {inner.t: inner, outer.t: outer}
        starts = [inner.u, outer.u]

        def excess(s: float) -> float:
            if s not in known:
                known[s] = self.point(s, starts)
            return known[s].rise - self.thr

        lo_t, hi_t = sorted((inner.t, outer.t))
        c = float(brentq(excess, lo_t, hi_t, xtol=_BRENT_XTOL * abs(outer.t - self.t_hat)))
        excess(c)
        return known[c]

    def locate(self, inner: _Point, outer: _Point) -> tuple[End, _Point | None]:
        """(the end between ``inner`` and ``outer``, None) or, when the outer point's rise
        came from a refit that left the valley (refitted from a verified point, it falls
        below the threshold), (a "not found" end the caller discards, that point: the walk
        resumes from it)."""
        ratio = float("nan")
        for _ in range(_REFINE):
            c = self.brent(inner, outer)
            check = self.point(c.t, [inner.u, outer.u, c.u])
            ratio = check.rise / self.thr
            if RISE_OK[0] <= ratio <= RISE_OK[1]:
                return End(c.t, "profile", ratio), None
            if ratio < RISE_OK[0]:
                inner = check
                again = self.point(outer.t, [check.u, outer.u])
                if again.rise < self.thr:
                    return End(float("nan"), "not found", ratio), again
                outer = again
            else:
                outer = check
        return End(float("nan"), "not found", ratio), None


def walk_side(
    ref: Refitter, t_hat: float, sign: int, distances: np.ndarray, f_hat: float, thr: float
) -> tuple[list[tuple[float, float]], End, bool]:
    """Walk one side (``sign`` +1 up, -1 down) over ``distances`` (ascending, the last one
    the box bound). Returns (profile points [(t, rise)], the side's end, whether a point
    beat the fit's own objective)."""
    side = _Side(ref, t_hat, f_hat, thr)
    if distances.size == 0:  # the estimate sits at its bound: no room on this side
        return [], End(t_hat, "box", 0.0), False
    prev = _Point(t_hat, 0.0, ref.u_hat)
    for d in distances:
        cur = side.point(t_hat + sign * float(d), [prev.u])
        if cur.rise >= thr:
            end, resume = side.locate(prev, cur)
            if resume is None:
                return side.pts, end, side.lower
            cur = resume  # that point's first refit had left the valley: walk on from it
        prev = cur
    return side.pts, End(prev.t, "box", prev.rise / thr), side.lower
