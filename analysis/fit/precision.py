"""The precision law fitted to a runs table with a ``train.precision`` column: per format the
effective-parameter multiplier against the reference precision with a profile CI, Kumar et
al.'s gamma form, and whether the gap changes with N or with epochs.

Kumar et al. 2024 ("Scaling Laws for Precision", arXiv 2411.04330) model low-precision
training as fewer effective parameters; the data term is Muennighoff et al.'s effective
data (arXiv 2305.16264). The law and its modes: laws/precision.py; P per format:
laws/precision_bits.py. Every fit is ``fit_law`` (multi-start, Huber in log space) and every
interval a profile likelihood (fit/profile.py), as for the other laws:

1. "multiplier": one free m_f per format, m_ref = 1, sharing A, alpha, B, beta, E, R_D*;
   the profile of each m_f is its CI. An m_f whose profile runs to its box, is not found,
   or sits at a bound is *not identified*: the reason is kept, the number is not shown.
2. "gamma": N_eff = N (1 - exp(-P/gamma)), started from step 1's optimum; gamma's profile
   CI and, through it, the implied m_f = (1 - e^{-P_f/gamma}) / (1 - e^{-P_ref/gamma})
   (monotone in gamma, so its CI is the image of gamma's).
3. "kappa_N" and "kappa_epochs": m_f (x / x0)^k_f, x = N or epochs, x0 their geometric
   mean, started from step 1's optimum with k = 0; k_f's profile CI gives the verdict: the
   gap (|log m_f|) "grows" when the CI excludes 0 on the side where k_f log m_f < 0 ...
   i.e. k_f has the sign of log m_f; "shrinks" on the other side; else "no detectable trend".

Runs that share a (precision, N, D, U) point (a sweep that also varies lr or seeds) are
reduced to the point's best cell first, by its mean loss over seeds with every seed kept
(the recipe laws' rule), with a note when other cells were dropped (``best_per_cell``). A study needs
>= 2 formats, and the multiplier fit >= its free parameters + ``MARGIN`` runs
(two residual degrees of freedom, the least a profile threshold is calibrated on with one
to spare), each format >= 2 sizes: fewer and the study is returned with ``why_not`` and no
numbers.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError, IdentifiabilityWarning
from analysis.fit.fit import FitResult, fit_law
from analysis.fit.profile import Profile, profile_fit
from analysis.laws.precision import PrecisionLaw, k_name, m_name
from analysis.laws.precision_bits import bits_of, reference_format
from analysis.tables.cells import LABELS, best_cell_runs, cell_columns

__all__ = ["COLUMN", "MARGIN", "Multiplier", "PrecisionStudy", "Trend", "best_per_cell",
           "fit_precision", "precision_table"]

COLUMN = "train.precision"
MARGIN = 2
_NEAR_BOUND = 1e-6  # internal distance from a box bound that counts as "at the bound"


@dataclass(frozen=True)
class Multiplier:
    """m_f = N_eff(f) / N_eff(ref) at the study's sizes, with its profile CI; ``why_not``:
    the reason it is not identified (then the numbers are not to be shown), else None."""

    fmt: str
    bits: float
    estimate: float
    ci: tuple[float, float]
    why_not: str | None
    implied: float | None = None  # from the gamma form
    implied_ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class Trend:
    """The gap's change with ``axis`` ("N" or "epochs") for one format: m_f ~ (x / x0)^k."""

    fmt: str
    axis: str
    k: float
    ci: tuple[float, float]
    verdict: str  # "grows with N", "shrinks with N", "no detectable trend", "not identified"
    why_not: str | None = None
    span: tuple[float, float] = (math.nan, math.nan)  # the study's smallest and largest x

    def describe(self) -> str:
        if self.why_not:
            return f"{self.fmt} vs {self.axis}: not identified ({self.why_not})"
        ci = f"k = {self.k:+.3f}, 95% CI [{self.ci[0]:+.3f}, {self.ci[1]:+.3f}]"
        lo, hi = self.span
        if self.verdict != "no detectable trend" and hi > lo > 0:  # the size of the change
            ci += f"; m x{(hi / lo) ** self.k:.3f} from {self.axis} = {lo:.3g} to {hi:.3g}"
        return f"{self.fmt}: {self.verdict} ({ci})"


@dataclass(frozen=True)
class PrecisionStudy:
    """Everything the report and the figure need (module docstring)."""

    reference: str
    formats: tuple[str, ...]  # the study's, reference first
    data: pl.DataFrame  # N, D, U, P, fmt, loss, precision, epochs
    why_not: str | None = None
    fit: FitResult | None = None  # multiplier mode
    gamma_fit: FitResult | None = None
    gamma: Profile | None = None
    gamma_why_not: str | None = None
    multipliers: tuple[Multiplier, ...] = ()
    trends: tuple[Trend, ...] = ()
    warnings: tuple[str, ...] = ()


def _prepare(data: pl.DataFrame, column: str) -> tuple[pl.DataFrame, str, tuple[str, ...]]:
    if column not in data.columns:
        raise AnalysisInputError(f"precision law needs column '{column}'; the data has {data.columns}")
    for c in ("N", "D", "U", "loss"):
        if c not in data.columns:
            raise AnalysisInputError(f"precision law needs column '{c}'; the data has {data.columns}")
    values = data[column].cast(pl.Utf8)
    if values.null_count():
        raise AnalysisInputError(f"{column}: {values.null_count()} run(s) have no precision")
    present = sorted(set(values.to_list()))
    bits = {f: bits_of(f, column=column) for f in present}  # an unknown format: one line
    ref = reference_format(present) if present else ""
    formats = (ref, *sorted((f for f in present if f != ref), key=lambda f: -bits[f]))
    idx = {f: i + 1 for i, f in enumerate(formats)}
    base = ("N", "D", "U", "loss", "precision", "P", "fmt", "epochs")
    cells = [c for c in dict.fromkeys((*cell_columns(data), *LABELS)) if c in data.columns and c not in base]
    out = data.select("N", "D", "U", "loss", *cells).with_columns(  # cells: for best_per_cell
        pl.Series("precision", values.to_list()),
        pl.Series("P", [bits[v] for v in values.to_list()], dtype=pl.Float64),
        pl.Series("fmt", [float(idx[v]) for v in values.to_list()], dtype=pl.Float64),
    ).with_columns((pl.col("D") / pl.min_horizontal("U", "D")).alias("epochs"))
    return out, ref, formats


def best_per_cell(data: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """Per (precision, N, D, U) point the runs of its best cell, every seed, and a note when
    other cells' runs were dropped: a sweep that also varies lr would otherwise mix tuned and
    untuned runs in one law. The rule of the recipe laws (``cells.best_cell_runs``: the
    lowest mean loss over seeds), so a point's seeds are all fitted, never their minimum."""
    keys = ("precision", "N", "D", "U")
    best = best_cell_runs(data, cell_columns(data), keys).sort(list(keys))
    if (dropped := data.height - best.height) == 0:
        return data, None
    cells = best.select(*keys).n_unique()
    return best, (f"{dropped} run(s) of other cells (other axes) shared a (precision, N, D, U) point "
                  f"with a better one; each point keeps its best cell by the mean loss over seeds, "
                  f"every seed ({best.height} runs at {cells} points)")


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        return fn(*args, **kwargs)


def _at_bound(fit: FitResult, p: str) -> bool:
    k = fit.free.index(p)
    return bool(min(fit.z[k] - fit.lo[k], fit.hi[k] - fit.z[k]) < _NEAR_BOUND)


def _profile_why(fit: FitResult, prof: Profile) -> str | None:
    """Why a profiled parameter is not identified, or None (module docstring)."""
    if _at_bound(fit, prof.param):
        return "at its bound"
    if prof.lower_found:
        return "the profile found a lower objective than the fit: the fit missed its optimum"
    for side, kind in zip(("lower", "upper"), prof.ends):
        if kind == "box":
            return f"its {prof.level:.0%} profile interval runs to the box on the {side} side"
        if kind == "not found":
            return f"its {prof.level:.0%} profile interval's {side} end was not found"
    return None


def _starts(fit: FitResult, law: PrecisionLaw, extra: dict[str, list[float]]) -> list[dict[str, float]]:
    """Natural-value starts from ``fit``'s optimum with ``extra``'s values crossed in."""
    base = {p: v for p, v in fit.params.items() if p in law.param_names}
    rows = [dict(base)]
    for p, values in extra.items():
        rows = [{**r, p: v} for r in rows for v in values]
    return [{p: r.get(p, 0.0 if p.startswith("k_") else 1.0) for p in law.param_names} for r in rows]


def _gamma_step(fit: FitResult, data: pl.DataFrame, ref: str, formats: tuple[str, ...],
                level: float) -> tuple[FitResult | None, Profile | None, str | None]:
    law = PrecisionLaw(formats=formats, mode="gamma")
    starts = []
    for g in (1.0, 2.0, 3.0, 5.0, 8.0, 15.0):
        r = -math.expm1(-bits_of(ref) / g)
        s = {p: fit.params[p] for p in ("B", "E", "alpha", "beta", "R_D")}
        starts.append({**s, "A": fit.params["A"] * r ** fit.params["alpha"], "gamma": g})
    try:
        gfit = _quiet(fit_law, law, data, starts=starts)
        prof = profile_fit(gfit, "gamma", level=level)
    except AnalysisInputError as err:
        return None, None, str(err)
    return gfit, prof, _profile_why(gfit, prof)


def _implied(gamma: float, f: str, ref: str) -> float:
    return float(math.expm1(-bits_of(f) / gamma) / math.expm1(-bits_of(ref) / gamma))


def _trend(fit: FitResult, data: pl.DataFrame, ref: str, formats: tuple[str, ...], axis: str,
           level: float) -> list[Trend]:
    x = data["N"] if axis == "N" else data["epochs"]
    values = np.unique(x.to_numpy())
    centre, span = float(np.exp(np.mean(np.log(values)))), (float(values[0]), float(values[-1]))
    mode = "kappa_N" if axis == "N" else "kappa_epochs"
    law = PrecisionLaw(formats=formats, mode=mode, centre=centre)
    out: list[Trend] = []
    need_x = data.group_by("fmt").agg(pl.col("N" if axis == "N" else "epochs").n_unique().alias("k"))
    if int(need_x["k"].min()) < 3:
        return [Trend(f, axis, math.nan, (math.nan, math.nan), "not identified",
                      f"fewer than 3 values of {axis} per format") for f in formats[1:]]
    fixed = {m_name(ref): 1.0, k_name(ref): 0.0}
    try:
        tfit = _quiet(fit_law, law, data, fixed=fixed, starts=_starts(fit, law, {}))
    except AnalysisInputError as err:
        return [Trend(f, axis, math.nan, (math.nan, math.nan), "not identified", str(err))
                for f in formats[1:]]
    for f in formats[1:]:
        prof = profile_fit(tfit, k_name(f), level=level)
        why = _profile_why(tfit, prof)
        k, (lo, hi) = prof.estimate, prof.ci
        logm = math.log(tfit.params[m_name(f)])
        if why:
            verdict = "not identified"
        elif lo > 0 or hi < 0:
            grows = (k > 0) == (logm > 0)
            verdict = f"{'grows' if grows else 'shrinks'} with {axis}"
        else:
            verdict = "no detectable trend"
        out.append(Trend(f, axis, k, (lo, hi), verdict, why, span))
    return out


def fit_precision(data: pl.DataFrame, *, column: str = COLUMN, level: float = 0.95,
                  trends: bool = True, gamma: bool = True) -> PrecisionStudy:
    """The precision study of ``data`` (columns N, D, U, loss and ``column``): module
    docstring. Unknown precisions and missing columns raise a one-line AnalysisInputError;
    too few runs or formats return a study with ``why_not`` and no numbers."""
    data, ref, formats = _prepare(data, column)
    data, note = best_per_cell(data)
    study = PrecisionStudy(reference=ref, formats=formats, data=data, warnings=(note,) if note else ())
    if len(formats) < 2:
        return replace(study, why_not=f"{len(formats)} value(s) of {column}, need >= 2")
    law = PrecisionLaw(formats=formats, mode="multiplier")
    n_free = len(law.param_names) - 1
    if data.height < n_free + MARGIN:
        return replace(study, why_not=(f"{data.height} runs for {n_free} free parameters; the "
                                       f"multiplier fit needs >= {n_free + MARGIN}"))
    sizes = data.group_by("precision").agg(pl.col("N").n_unique().alias("k")).sort("precision")
    if (few := sizes.filter(pl.col("k") < 2)).height:
        return replace(study, why_not=(f"format(s) {few['precision'].to_list()} ran at fewer "
                                       "than 2 sizes: their multiplier is not separable from A"))
    fit = _quiet(fit_law, law, data, fixed={m_name(ref): 1.0})
    gfit, gprof, gwhy = _gamma_step(fit, data, ref, formats, level) if gamma else (None, None, None)
    mults = []
    for f in formats[1:]:
        prof = profile_fit(fit, m_name(f), level=level)
        why = _profile_why(fit, prof)
        imp = imp_ci = None
        if gprof is not None and gwhy is None:
            imp = _implied(gprof.estimate, f, ref)
            a, b = _implied(gprof.ci[1], f, ref), _implied(gprof.ci[0], f, ref)
            imp_ci = (min(a, b), max(a, b))
        mults.append(Multiplier(f, bits_of(f), prof.estimate, prof.ci, why, imp, imp_ci))
    tr: list[Trend] = []
    if trends:
        for axis in ("N", "epochs"):
            tr += _trend(fit, data, ref, formats, axis, level)
    gmsgs = () if gfit is None else tuple(f"gamma form: {w}" for w in gfit.warnings)
    msgs = study.warnings + tuple(fit.warnings) + gmsgs
    return replace(study, fit=fit, gamma_fit=gfit, gamma=gprof, gamma_why_not=gwhy,
                   multipliers=tuple(mults), trends=tuple(tr), warnings=msgs)


def precision_table(study: PrecisionStudy) -> pl.DataFrame:
    """One row per format: bits, multiplier and CI (null where not identified), implied m."""
    rows = [{"format": study.reference, "bits": bits_of(study.reference), "m": 1.0,
             "m_lo": 1.0, "m_hi": 1.0, "implied_m": 1.0, "note": "reference"}]
    for m in study.multipliers:
        ok = m.why_not is None
        rows.append({"format": m.fmt, "bits": m.bits, "m": m.estimate if ok else None,
                     "m_lo": m.ci[0] if ok else None, "m_hi": m.ci[1] if ok else None,
                     "implied_m": m.implied, "note": m.why_not or ""})
    return pl.DataFrame(rows, schema={"format": pl.Utf8, "bits": pl.Float64, "m": pl.Float64,
                                      "m_lo": pl.Float64, "m_hi": pl.Float64,
                                      "implied_m": pl.Float64, "note": pl.Utf8})
