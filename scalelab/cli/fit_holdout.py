"""``scalelab fit --holdout-largest K``: the report's extrapolation check for each fitted group.

For each group of ``scalelab fit`` the law is refitted on the points without the K largest
distinct x values and each held-out loss is predicted with a 95% prediction interval for a
new observation: ``analysis.recipes.extrapolation.holdout_largest``, the engine of the
report's holdout lines (``holdout_check``; delta method with Student t, Seber & Wild 1989,
"Nonlinear Regression", §5.1; coverage on synthetic studies in docs/extrapolation.md). One
line per group, in the report's format; with the plot, the held-out predictions are drawn
on it and written to ``<stem>-holdout.json``.

What is refitted: for ``powerlaw`` (any --x: N, D, U, C, K) the law A / x^B + E of Kim et
al. 2025 (arXiv 2509.14786) by least squares on the loss (``power_law.fit_kim``), the estimator
the interval is built for; the table's fit is ``fit_law``'s Huber fit in log space. For
``chinchilla`` (Hoffmann et al. 2022, arXiv 2203.15556) and ``data_constrained`` (Muennighoff
et al. 2023, arXiv 2305.16264, its two stages) every run at the K largest distinct N is held
out and the law refitted by least squares on the loss: ``analysis.fit.prediction.
holdout_largest_2d`` (the delta method through both stages; coverage in
docs/extrapolation.md). One line per group either way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.fit.power_law import SCALE
from analysis.fit.prediction import LAWS_2D, Holdout2D, holdout_largest_2d, min_sizes_2d
from analysis.recipes.extrapolation import MIN_REFIT, HoldoutCheck, holdout_largest
from scalelab.errors import UserError

__all__ = ["HOLDOUT_LAWS", "GroupHoldout", "check_holdout_option", "draw_holdout",
           "group_holdouts", "holdout_scale", "write_holdout_json"]

HOLDOUT_LAWS = ("powerlaw", *LAWS_2D)
"""Laws ``--holdout-largest`` is offered for: those with a validated prediction interval."""
KEY = "--holdout-largest"


def check_holdout_option(k: int, law: str, *, isoflop: bool) -> None:
    """Refuse (UserError, one line, exit 2) K < 0, K with --isoflop, K with a law that has
    no prediction interval (none now: ``HOLDOUT_LAWS`` holds every law). K = 0 (off) is
    always accepted."""
    if k < 0:
        raise UserError(f"expected an integer >= 0 (0: off; K >= 1 holds out the K largest x "
                        f"values), got {k}", key=KEY)
    if k == 0:
        return
    if isoflop:
        raise UserError("--isoflop fits no law to extrapolate; --holdout-largest checks a law "
                        "(--law powerlaw)", key=KEY)
    from analysis.laws.laws import LAW_NAMES

    if law in LAW_NAMES and law not in HOLDOUT_LAWS:  # an unknown law: fit's own refusal
        raise UserError(f"not offered for --law {law}: the held-out prediction interval "
                        f"exists for {', '.join(HOLDOUT_LAWS)}", key=KEY)


def holdout_scale(x: str, values: np.ndarray) -> float:
    """The unit x is refitted in (``x / scale``; the fit and the interval do not depend on it,
    only A's value and the numerics): millions for N, D, U (``power_law.SCALE``, the report's
    unit), K as is, C in the power of ten of its smallest value."""
    if x in ("N", "D", "U"):
        return SCALE
    if x == "K":
        return 1.0
    return float(10.0 ** math.floor(math.log10(float(np.min(values)))))


@dataclass(frozen=True)
class GroupHoldout:
    """One group's check: its label (the law's name when not grouped), key and result."""

    label: str
    key: dict
    x: str
    check: HoldoutCheck | Holdout2D

    def line(self) -> str:
        """'powerlaw vs N: held out N = 271k: predicted 1.992 (95% PI 1.91-2.08), ...'."""
        return f"{self.label} vs {self.x}: {self.check.line()}"


def group_holdouts(sel, k: int) -> list[GroupHoldout]:
    """The check of every group of ``sel`` (an ``analysis.fit.grouped.Selection``), after
    refusing (UserError) a K that leaves some group fewer than ``MIN_REFIT`` distinct x
    values (the law's 3 parameters + 1 residual degree of freedom; for a law of N and D
    fewer than 2 distinct N, ``min_sizes_2d``: too few runs for its parameters is said in
    the group's line)."""
    if sel.law in LAWS_2D:
        return _group_holdouts_2d(sel, k)
    parts = []
    for g in sel.groups:
        x = g.data[sel.x].to_numpy().astype(float)
        n = int(np.unique(x).size)
        if n - k < MIN_REFIT:
            where = f" in group {g.label}" if g.key else ""
            raise UserError(
                f"{k} leaves {max(n - k, 0)} of {n} distinct {sel.x} values{where}; the refit "
                f"of {sel.law}'s 3 parameters needs >= {MIN_REFIT} (parameters + 1)", key=KEY)
        parts.append((g, x))
    out = []
    for g, x in parts:
        scale = holdout_scale(sel.x, x)
        chk = holdout_largest(x / scale, g.data["loss"].to_numpy().astype(float), k,
                              name=sel.x, scale=scale)
        out.append(GroupHoldout(g.label if g.key else sel.law, dict(g.key), sel.x, chk))
    return out


def _group_holdouts_2d(sel, k: int) -> list[GroupHoldout]:
    """``group_holdouts`` for chinchilla and data_constrained: held out by N."""
    least = min_sizes_2d(sel.law)
    for g in sel.groups:
        n = int(np.unique(g.data["N"].to_numpy()).size)
        if n - k < least:
            where = f" in group {g.label}" if g.key else ""
            raise UserError(
                f"{k} leaves {max(n - k, 0)} of {n} distinct N values{where}; the refit of "
                f"{sel.law} needs >= {least} (a law of N and D)", key=KEY)
    out = []
    for g in sel.groups:
        chk = holdout_largest_2d(g.data, sel.law, k)
        out.append(GroupHoldout(g.label if g.key else sel.law, dict(g.key), "N", chk))
    return out


def draw_holdout(fig, h: GroupHoldout) -> None:
    """On a ``plot_loss_vs_x`` figure: the refit (dashed) over the data's range and each
    held-out prediction with its 95% interval."""
    from analysis.plots.style import legend_outside

    chk = h.check
    if not chk.checked:
        return
    if isinstance(chk, Holdout2D):
        _draw_2d(fig, chk)
        return
    ax = fig.axes[0]
    A, B, E = chk.refit
    lo_x, hi_x = ax.get_xlim()
    grid = np.geomspace(lo_x, hi_x, 200)
    ylim = ax.get_ylim()
    ax.plot(grid, A * (grid / chk.scale) ** -B + E, color="C3", ls=":", lw=1.2,
            label=f"refit without the largest {chk.k}")
    xs = np.array([p.x * chk.scale for p in chk.points])
    pred = np.array([p.predicted for p in chk.points])
    err = np.array([[p.predicted - p.lo for p in chk.points],
                    [p.hi - p.predicted for p in chk.points]])
    ax.errorbar(xs, pred, yerr=err, fmt="s", ms=4, color="C3", capsize=3, zorder=4,
                label=f"held-out prediction, {100 * chk.level:g}% PI")
    ax.set_ylim(min(ylim[0], float(np.min(pred - err[0]))),
                max(ylim[1], float(np.max(pred + err[1]))))
    legend_outside(ax, fontsize=7)


def _draw_2d(fig, chk: Holdout2D) -> None:
    """Each held-out run's prediction with its interval, at its N (no refit curve: the law
    is a surface over N and D)."""
    from analysis.plots.style import legend_outside

    ax = fig.axes[0]
    ylim = ax.get_ylim()
    xs = np.array([p.N for p in chk.points])
    pred = np.array([p.predicted for p in chk.points])
    err = np.array([[p.predicted - p.lo for p in chk.points],
                    [p.hi - p.predicted for p in chk.points]])
    # black hollow squares: the data's curves use the colour cycle
    ax.errorbar(xs, pred, yerr=err, fmt="s", ms=6, mfc="none", color="k", capsize=3,
                zorder=4, label=f"held-out prediction, {100 * chk.level:g}% PI")
    ax.set_ylim(min(ylim[0], float(np.min(pred - err[0]))),
                max(ylim[1], float(np.max(pred + err[1]))))
    legend_outside(ax, fontsize=7)


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _record_2d(h: GroupHoldout) -> dict:
    chk = h.check
    return {
        "group": {k: v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
                  for k, v in h.key.items()},
        "label": h.label, "line": h.line(), "k": chk.k, "level": chk.level,
        "distinct_x": chk.sizes, "runs": chk.runs, "dof": chk.dof, "checked": chk.checked,
        "why": chk.why, "covered": chk.covered,
        "refit": {k: _finite(v) for k, v in chk.refit.items()},
        "points": [{"N": p.N, "D": p.D, "U": _finite(p.U), "observed": p.observed,
                    "predicted": p.predicted, "lo": p.lo, "hi": p.hi, "error": p.error,
                    "covered": p.covered} for p in chk.points],
    }


def _record(h: GroupHoldout) -> dict:
    if isinstance(h.check, Holdout2D):
        return _record_2d(h)
    chk = h.check
    return {
        "group": {k: v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
                  for k, v in h.key.items()},
        "label": h.label, "line": h.line(), "k": chk.k, "level": chk.level,
        "distinct_x": chk.n, "dof": chk.dof, "checked": chk.checked, "why": chk.why,
        "covered": chk.covered, "scale": chk.scale,
        "refit": dict(zip(("A", "B", "E"), (v if math.isfinite(v) else None for v in chk.refit))),
        "points": [{h.x: p.x * chk.scale, "observed": p.observed, "predicted": p.predicted,
                    "lo": p.lo, "hi": p.hi, "error": p.error, "covered": p.covered}
                   for p in chk.points],
    }


def write_holdout_json(path: Path, law: str, x: str, k: int, holdouts: list[GroupHoldout]) -> Path:
    """The checks as JSON (``refit`` A is in x / ``scale`` units: L = A (x/scale)^-B + E)."""
    from analysis.atomic import write_text_atomic

    engine = ("fit.prediction.holdout_largest_2d" if law in LAWS_2D
              else "extrapolation.holdout_largest")
    doc = {"law": law, "x": x, "holdout_largest": k,
           "method": f"docs/extrapolation.md ({engine})",
           "groups": [_record(h) for h in holdouts]}
    return write_text_atomic(path, json.dumps(doc, indent=2) + "\n")
