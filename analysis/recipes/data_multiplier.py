"""The data-efficiency multiplier of Kim et al. 2025 with a law the data support and a
bootstrap CI.

Kim, Kotha, Liang, Hashimoto 2025, "Pre-training under infinite compute", arXiv 2509.14786:
fit the standard recipe's best loss against unique tokens U, L(U) = A / U^B + C, and read the
data the standard recipe needs to reach a loss,

    D_eff(L) = (A / (L - C))^(1/B);   multiplier m = D_eff(L_new) / D_eff(L_ref),

L_ref the standard recipe's best loss at the base budget, L_new another recipe's asymptote.
A cancels: m = ((L_ref - C) / (L_new - C))^(1/B).

**Which law** (``choose_data_law``). Over a narrow range of U the floor C is often not
identified (the fit puts it at its bound 0). Both A / U^B + C (C >= 0) and the pure power law
A / U^B are fitted by least squares on the loss (``analysis.fit.power_law``; x = U / 1e6), and C is kept only
when the extra-sum-of-squares F test (Seber & Wild 1989, "Nonlinear Regression", §5.3)

    F = (SSE_pure - SSE_floor) / (SSE_floor / (n - 3)),   F ~ F(1, n - 3) under C = 0,

rejects C = 0 at ``alpha`` (5%). C at its bound gives SSE_floor = SSE_pure, F = 0: the pure law.
(With C = 0 on the boundary of C >= 0 the null distribution of F is a 50:50 mixture of 0 and
F(1, n - 3), so the p-value of F(1, n - 3) is twice the exact one: the test keeps the floor
less often than 5% of the time under C = 0, and the multiplier it then gives is the lower
bound below.)

**A lower bound under the pure law.** With C = 0, m = (L_ref / L_new)^(1/B). If the truth has
a floor C > 0, D_eff(L) grows faster as L approaches C than the pure law says, so the pure
law's multiplier understates the truth: it is (typically) a lower bound. ``Multiplier.line``
says so.

**CI** (``data_multiplier``): a residual bootstrap of the data fit (Davison & Hinkley 1997,
"Bootstrap Methods and their Application", §6.2.3, algorithm 6.1): the chosen form is refitted
to yhat + r*, r* drawn with replacement from the centred residuals scaled by sqrt(n / (n - p))
(p fitted parameters: least-squares residuals are smaller than the errors); in each replicate
L_new is drawn from N(L_new, se^2) (and L_ref from N(L_ref, L_ref_se^2)). Percentile CI. For
an asymptote fitted to a few sizes the callers pass its standard error widened for its
Student-t interval (``power_law.t_scaled_se``), so the drawn E spans the interval the report
prints for it; with the plain standard error the multiplier's interval covered a known
multiplier in 84% of synthetic studies instead of E's own 90% (tests/analysis/test_budgets.py). The
law's choice is not redone per replicate (the CI is conditional on it).

Refused (``why``, in numbers; value, lo, hi nan): L_new at or below the floor C; a CI that is
not finite (too many replicates with L_new at or below their floor); an upper end beyond
``MAX_MULTIPLIER`` (1e6x the reference's data: an extrapolation of the data law that far is
not a result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.errors import AnalysisInputError
from analysis.fit.power_law import PowerLawFit, fit_kim, profile_fit

__all__ = ["ALPHA", "MAX_MULTIPLIER", "DataLaw", "Multiplier", "choose_data_law",
           "data_efficiency", "data_multiplier", "effective_data"]

ALPHA = 0.05
"""Level of the F test that keeps the floor C."""
MAX_MULTIPLIER = 1e6
"""An upper CI end beyond this many times the reference's data is refused."""


@dataclass(frozen=True)
class DataLaw:
    """The standard recipe's loss against unique tokens, with the form the data support."""

    fit: PowerLawFit  # the chosen fit: ``floor`` or ``pure``
    floor_fit: PowerLawFit  # A / U^B + C, C >= 0
    pure_fit: PowerLawFit  # A / U^B
    F: float  # extra-sum-of-squares statistic for C (nan with 3 points: no test)
    p_value: float  # P(F(1, n - 3) >= F); 1.0 when C is at its bound
    alpha: float  # the test's level
    why: str  # one line: which law and why

    @property
    def floor(self) -> bool:
        """The floor C is kept."""
        return self.fit.floor

    @property
    def A(self) -> float:
        return self.fit.A

    @property
    def B(self) -> float:
        return self.fit.B

    @property
    def E(self) -> float:
        """The floor (the texts' C; 0.0 for the pure law)."""
        return self.fit.E

    def effective_data(self, loss) -> np.ndarray:
        """D_eff(L) in the law's units (U / 1e6) (``effective_data``)."""
        return effective_data(self.fit, loss)


def effective_data(fit: PowerLawFit, loss) -> np.ndarray:
    """D_eff(L) = (A / (L - E))^(1/B): data the fitted recipe needs to reach L (nan if L <= E)."""
    L = np.asarray(loss, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(L > fit.E, (fit.A / (L - fit.E)) ** (1.0 / fit.B), np.nan)


def data_efficiency(fit: PowerLawFit, loss_new, loss_ref) -> np.ndarray:
    """How many times more data the fitted (reference) recipe needs to match ``loss_new``
    than to reach ``loss_ref``: D_eff(L_new) / D_eff(L_ref). A does not enter."""
    return effective_data(fit, loss_new) / effective_data(fit, loss_ref)


def choose_data_law(u, y, *, alpha: float = ALPHA) -> DataLaw:
    """Fit A / U^B + C and A / U^B to (u, y) and keep C only when the F test rejects C = 0.

    u (n,) unique tokens in millions (U / 1e6), y (n,) the standard recipe's best loss at
    each budget; n >= 3 (>= 4 to test the floor)."""
    u = np.asarray(u, dtype=float)
    y = np.asarray(y, dtype=float)
    if u.ndim != 1 or u.shape != y.shape:
        raise AnalysisInputError(f"u and y must be 1-D of one length, got {u.shape}, {y.shape}")
    n = u.size
    if n < 3:
        raise AnalysisInputError(f"{n} budgets for the data law A/U^B: need >= 3")
    if np.unique(u).size < 3:
        raise AnalysisInputError(f"the data law needs >= 3 distinct budgets, got "
                                 f"{np.unique(u).size}")
    pure = fit_kim(u, y, floor=False)
    if n < 4:
        return DataLaw(fit=pure, floor_fit=pure, pure_fit=pure, F=float("nan"), p_value=1.0,
                       alpha=alpha,
                       why=(f"A/U^B (no floor C): {n} budgets are too few to test a floor "
                            f"(the F test needs >= 4)"))
    full = fit_kim(u, y, floor=True)
    dof = n - 3
    gain = max(pure.sse - full.sse, 0.0)
    if full.E <= 0 or gain == 0:
        F, p = 0.0, 1.0
    elif full.sse <= 0:
        F, p = float("inf"), 0.0
    else:
        F = gain / (full.sse / dof)
        p = float(stats.f.sf(F, 1, dof))
    keep = p < alpha
    if keep:
        why = (f"A/U^B + C: the floor C = {full.E:.4g} is supported (F = {F:.3g} on (1, {dof}) "
               f"dof, p = {p:.2g} < {alpha:g})")
    elif full.E <= 0 or gain == 0:
        why = ("A/U^B (no floor C): the 3-parameter fit puts C at its bound 0 (F = 0, "
               "p = 1)")
    else:
        why = (f"A/U^B (no floor C): a floor C = {full.E:.4g} is not supported (F = {F:.3g} on "
               f"(1, {dof}) dof, p = {p:.2g} >= {alpha:g})")
    return DataLaw(fit=full if keep else pure, floor_fit=full, pure_fit=pure, F=F, p_value=p,
                   alpha=alpha, why=why)


@dataclass(frozen=True)
class Multiplier:
    """D_eff(L_new) / D_eff(L_ref) with its bootstrap CI, or why there is no number."""

    value: float  # the multiplier; nan when refused
    lo: float  # percentile CI, lower end; nan when refused
    hi: float  # upper end
    level: float  # the CI's level
    L_new: float  # the other recipe's asymptote
    L_new_se: float  # its standard error
    L_ref: float  # the standard recipe's best loss at the base budget
    B: float  # the data law's exponent
    C: float  # its floor (0.0 for the pure law)
    floor: bool  # the data law has a floor C
    n_boot: int  # bootstrap replicates
    beyond_floor: float  # share of replicates with L_new at or below their floor C* (m* = inf)
    estimate: float  # the point value before any refusal (inf when L_new <= C)
    law_why: str  # DataLaw.why
    why: str = ""  # "" when there is a number, else why not (in numbers)

    @property
    def identified(self) -> bool:
        return not self.why

    @property
    def lower_bound(self) -> bool:
        """The pure law: a floor in the truth would make the multiplier larger."""
        return not self.floor

    def line(self) -> str:
        """e.g. 'data-efficiency multiplier 2.31x (95% CI 1.71-3.10): ... (a lower bound ...)'."""
        if not self.identified:
            return f"data-efficiency multiplier: none ({self.why}); data law {self.law_why}"
        pct = f"{100 * self.level:g}%"
        bound = ("; a lower bound if the loss has a floor (a floor C > 0 makes D_eff grow "
                 "faster)" if self.lower_bound else "")
        return (f"data-efficiency multiplier {self.value:.3g}x ({pct} CI {self.lo:.3g}-"
                f"{self.hi:.3g}): L_new = {self.L_new:.4f} vs L_ref = {self.L_ref:.4f}, data law "
                f"{self.law_why}{bound}")


def _multiplier(L_ref, L_new, B, C) -> np.ndarray:
    """((L_ref - C) / (L_new - C))^(1/B), inf where L_new <= C, L_ref <= C or B <= 0."""
    L_ref, L_new, B, C = np.broadcast_arrays(*(np.asarray(v, dtype=float)
                                               for v in (L_ref, L_new, B, C)))
    ok = (L_new > C) & (L_ref > C) & (B > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        m = np.exp((np.log(L_ref - C) - np.log(L_new - C)) / B)
    return np.where(ok & np.isfinite(m), m, np.inf)


def data_multiplier(law: DataLaw, L_new: float, L_new_se: float, L_ref: float, *,
                    L_ref_se: float = 0.0, n_boot: int = 2000, seed: int = 0,
                    level: float = 0.95, max_multiplier: float = MAX_MULTIPLIER) -> Multiplier:
    """Kim et al.'s multiplier D_eff(L_new) / D_eff(L_ref) under ``law`` with a residual
    bootstrap percentile CI (module docstring). ``L_ref_se``: the reference's own noise
    (0: held fixed, as Kim et al. read it off the curve)."""
    for name, v in (("L_new", L_new), ("L_ref", L_ref)):
        if not np.isfinite(v):
            raise AnalysisInputError(f"{name} must be finite, got {v}")
    for name, v in (("L_new_se", L_new_se), ("L_ref_se", L_ref_se)):
        if not (np.isfinite(v) and v >= 0):
            raise AnalysisInputError(f"{name} must be finite and >= 0, got {v}")
    if n_boot < 100:
        raise AnalysisInputError(f"n_boot must be >= 100 for a {100 * level:g}% percentile CI, "
                                 f"got {n_boot}")
    fit = law.fit
    C = fit.E
    estimate = float(_multiplier(L_ref, L_new, fit.B, C))
    nan = float("nan")
    base = dict(level=level, L_new=float(L_new), L_new_se=float(L_new_se), L_ref=float(L_ref),
                B=fit.B, C=C, floor=fit.floor, n_boot=n_boot, law_why=law.why)
    if L_new <= C or L_ref <= C:
        which, v = ("L_new", L_new) if L_new <= C else ("L_ref", L_ref)
        return Multiplier(value=nan, lo=nan, hi=nan, beyond_floor=nan, estimate=estimate,
                          why=(f"{which} = {v:.4f} lies at or below the data law's floor "
                               f"C = {C:.4f}: no amount of data reaches it under this law"),
                          **base)
    rng = np.random.default_rng(seed)
    n, p = fit.n, fit.n_free
    yhat = fit.predict(fit.x)  # (n,)
    r = fit.residuals()
    r = (r - r.mean()) * np.sqrt(n / (n - p))  # (n,)
    Ystar = yhat + r[rng.integers(0, n, size=(n_boot, n))]  # (n_boot, n)
    As, Bs, Cs, _ = profile_fit(fit.x, Ystar, floor=fit.floor)  # (n_boot,) each
    new = L_new + L_new_se * rng.standard_normal(n_boot)
    ref = L_ref + L_ref_se * rng.standard_normal(n_boot)
    m = _multiplier(ref, new, Bs, Cs)  # (n_boot,), inf where out of reach
    m = np.where(As > 0, m, np.inf)  # a flat refit (A* = 0) reaches no loss below C*
    beyond = float(np.mean(~np.isfinite(m)))
    lo = float(np.quantile(m, 0.5 - level / 2, method="lower"))
    hi = float(np.quantile(m, 0.5 + level / 2, method="higher"))  # no interpolation towards inf
    out = dict(beyond_floor=beyond, estimate=estimate, **base)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return Multiplier(value=nan, lo=nan, hi=nan, **out, why=(
            f"the {100 * level:g}% CI is not finite: in {100 * beyond:.1f}% of {n_boot} "
            f"bootstrap replicates L_new (drawn with se {L_new_se:.3g}) lies at or below the "
            f"refitted floor, more than the {50 * (1 - level):g}% an upper end may hold "
            f"(point value {estimate:.3g}x)"))
    if hi > max_multiplier:
        return Multiplier(value=nan, lo=nan, hi=nan, **out, why=(
            f"the {100 * level:g}% CI reaches {hi:.3g}x (point value {estimate:.3g}x, lower end "
            f"{lo:.3g}x): that is {hi:.3g} times the reference's unique tokens, an extrapolation "
            f"of the data law beyond {max_multiplier:.0e}x, not a result"))
    return Multiplier(value=estimate, lo=lo, hi=hi, **out)
