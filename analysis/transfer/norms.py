"""The norm check: does each size's optimal run end at the same output-layer norm?

Filatov et al. 2025, "Optimal scaling needs optimal norm" (arXiv 2510.03871), report that
for Scion and Adam the optimal (lr, batch) pairs of every size end training at one value of
the output layer's operator norm ("norm transfer"). A sweep's ``norms.parquet`` records
(``scalelab.train.records.norms``; schema in ``analysis.tables.records_scan``: run_id,
step, layer, param, kind, norm, value) hold what it takes to check it:

- the output layer is the Llama head ``lm_head`` (``scalelab.model.llama``; a name in
  ``optim._roles.HEAD_NAMES``); with a tied embedding the shared tensor is recorded once,
  under its first name ``tok_emb``, so a run with no ``lm_head`` rows falls back to it;
- the norm is ``kind == 'weight'``, ``param == 'weight'`` at the run's last recorded step,
  by default ``rms_to_inf`` (sqrt(fan_in) · the largest row norm: the RMS→ℓ∞ operator norm,
  the output-layer geometry of Scion that the paper tracks, as we read it); any recorded
  norm may be asked for, e.g. ``rms_to_rms`` (the spectral norm in RMS units, from power
  iteration).

Per group: each cell's log norm (the mean over its runs of ln norm), interpolated linearly
in u = ln hp at the group's optimum u*: the norm at the optimum (the nearest run is kept in
the table too). Constancy test: least squares of ln norm* on (1, ln x); the norm is called
constant when every slope's ``level`` interval (t, n - k dof) contains 0. Then the common
value is the mean ν̄ of ln norm* with scatter s, and a new size's ν lies in ν̄ ± t(n - 1) ·
s · sqrt(1 + 1/n). Predicting hp* from the norm alone: across the new size's cells, ln norm
against u, the u where it crosses ν̄ (linear interpolation; refused when it never does or
crosses more than once), and the interval's ends mapped the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from analysis.errors import AnalysisInputError, did_you_mean
from analysis.transfer.law import MIN_DOF_INTERVAL
from analysis.transfer.transfer import TransferFit

__all__ = ["DEFAULT_NORM", "OUTPUT_LAYERS", "NormCheck", "cell_log_norms", "crossing",
           "norm_check", "output_norms"]

OUTPUT_LAYERS = ("lm_head", "tok_emb")
"""The output layer's recorded name, then its name when tied to the embedding."""
DEFAULT_NORM = "rms_to_inf"


def output_norms(norms: pl.DataFrame, norm: str = DEFAULT_NORM,
                 layer: str | None = None) -> tuple[pl.DataFrame, str]:
    """(run_id, value: each run's output-layer weight norm at its last recorded step; the
    layer(s) used). ``norms``: norm records of one or many runs."""
    weights = norms.filter((pl.col("kind") == "weight") & (pl.col("param") == "weight"))
    if weights.height == 0:
        raise AnalysisInputError("no weight norms recorded (kind 'weight'): train with "
                                 "train.norms_every > 0")
    kinds = sorted(set(weights["norm"].to_list()))
    if norm not in kinds:
        raise AnalysisInputError(f"no '{norm}' norms recorded{did_you_mean(norm, kinds)}; "
                                 f"recorded: {', '.join(kinds)}")
    rows = weights.filter(pl.col("norm") == norm)
    if layer is not None:
        layers = sorted(set(rows["layer"].to_list()))
        if layer not in layers:
            raise AnalysisInputError(f"no layer '{layer}' in the norm records"
                                     f"{did_you_mean(layer, layers)}")
        picked, used = rows.filter(pl.col("layer") == layer), layer
    else:
        rank = pl.col("layer").replace_strict(list(OUTPUT_LAYERS), list(range(len(OUTPUT_LAYERS))),
                                              default=None)
        rows = rows.with_columns(rank.alias("_rank")).filter(pl.col("_rank").is_not_null())
        if rows.height == 0:
            raise AnalysisInputError(f"no output layer ({' or '.join(OUTPUT_LAYERS)}) in the "
                                     "norm records: name it with --layer")
        picked = rows.filter(pl.col("_rank") == pl.col("_rank").min().over("run_id"))
        used = " / ".join(sorted(set(picked["layer"].to_list()), key=OUTPUT_LAYERS.index))
    last = picked.filter(pl.col("step") == pl.col("step").max().over("run_id"))
    return last.group_by("run_id").agg(pl.col("value").last()).sort("run_id"), used


def cell_log_norms(cells: pl.DataFrame, run_norms: pl.DataFrame) -> pl.DataFrame:
    """``cells`` (``TransferFit.cells``) with ``log_norm``: the mean of ln norm over each
    cell's runs that have one (null when none has)."""
    lookup = dict(zip(run_norms["run_id"].to_list(), run_norms["value"].to_list()))
    vals = []
    for ids in cells["run_ids"].to_list():
        got = [lookup[i] for i in ids if i in lookup and lookup[i] is not None and lookup[i] > 0]
        vals.append(float(np.mean(np.log(got))) if got else None)
    return cells.with_columns(pl.Series("log_norm", vals, dtype=pl.Float64))


def crossing(u: np.ndarray, log_norm: np.ndarray, target: float) -> tuple[float, str | None]:
    """The u where the piecewise-linear ln norm(u) equals ``target`` ([m] each, u sorted):
    (u, None), or (NaN, why) when it never or more than once crosses it."""
    f = log_norm - target
    hits = [i for i in range(len(u) - 1) if f[i] == 0 or f[i] * f[i + 1] < 0]
    if len(u) and f[-1] == 0:
        hits.append(len(u) - 1)
    if not hits:
        return float("nan"), (f"the common norm {np.exp(target):.4g} lies outside this size's "
                              f"norms [{np.exp(log_norm.min()):.4g}, {np.exp(log_norm.max()):.4g}]")
    if len(hits) > 1:
        return float("nan"), f"the norm crosses {np.exp(target):.4g} {len(hits)} times (not monotone in hp)"
    i = hits[0]
    if f[i] == 0:
        return float(u[i]), None
    return float(u[i] + (u[i + 1] - u[i]) * f[i] / (f[i] - f[i + 1])), None


@dataclass(frozen=True)
class NormCheck:
    """The norm check of a fit. ``norm``, ``layer``: what was read; ``table``: one row per
    accepted group (x..., norm_opt at u*, nearest_hp, nearest_norm, nearest_run);
    ``slopes``: (name, estimate, lo, hi) of ln norm* on ln x; ``constant``: every interval
    holds 0 (None: too few groups to test); ``log_mean``, ``log_sd``: ν̄ and s; ``n``."""

    x: tuple[str, ...]
    norm: str
    layer: str
    table: pl.DataFrame
    slopes: list[tuple[str, float, float, float]]
    constant: bool | None
    log_mean: float
    log_sd: float
    n: int
    level: float = 0.95

    def half_width(self) -> float:
        """t(n - 1) · s · sqrt(1 + 1/n): a new size's ln norm* about ν̄."""
        if self.n < 2:
            return float("nan")
        t = float(stats.t.ppf(0.5 + self.level / 2, self.n - 1))
        return t * self.log_sd * float(np.sqrt(1 + 1 / self.n))

    def predict_hp(self, group_cells: pl.DataFrame, hp: str) -> tuple[float, float, float, str | None]:
        """(hp*, lo, hi, why) of one group from its cells' norms alone (``cell_log_norms``'s
        rows of that group): where ln norm crosses ν̄, and ν̄ ± ``half_width``. lo and hi
        are NaN when the band's ends do not each cross once on both sides of hp* (the band
        leaves the grid, or the norm is not monotone in hp there)."""
        g = group_cells.filter(pl.col("log_norm").is_not_null()).sort("u")
        if g.height < 2:
            return (float("nan"),) * 3 + (f"{g.height} {hp} value(s) with a norm at this size",)
        u, ln = g["u"].to_numpy(), g["log_norm"].to_numpy()
        mid, why = crossing(u, ln, self.log_mean)
        if why:
            return float("nan"), float("nan"), float("nan"), why
        h = self.half_width()
        ends = [crossing(u, ln, self.log_mean + s * h) for s in (-1, 1)]
        lo, hi = sorted(e for e, _ in ends)
        if any(w for _, w in ends) or not lo <= mid <= hi:  # the band leaves the grid, or the
            return float(np.exp(mid)), float("nan"), float("nan"), None  # norm is not monotone
        return float(np.exp(mid)), float(np.exp(lo)), float(np.exp(hi)), None


def norm_check(fit: TransferFit, run_norms: pl.DataFrame, *, norm: str = DEFAULT_NORM,
               layer: str = "lm_head", level: float = 0.95) -> NormCheck:
    """The check on ``fit``'s accepted groups; ``run_norms``: ``output_norms``' table."""
    cells = cell_log_norms(fit.cells, run_norms)
    x, rows = fit.x, []
    for r in fit.accepted.iter_rows(named=True):
        g = cells.filter(pl.all_horizontal([pl.col(v) == r[v] for v in x]))
        g = g.filter(pl.col("log_norm").is_not_null()).sort("u")
        if g.height < 2:
            continue
        u, ln = g["u"].to_numpy(), g["log_norm"].to_numpy()
        near = int(np.argmin(np.abs(u - r["u_opt"])))
        ids = g["run_ids"][near].to_list()
        rows.append({**{v: r[v] for v in x}, "norm_opt": float(np.exp(np.interp(r["u_opt"], u, ln))),
                     "nearest_hp": float(np.exp(u[near])), "nearest_norm": float(np.exp(ln[near])),
                     "nearest_run": ids[0] if ids else None})
    schema = {**{v: pl.Float64 for v in x}, "norm_opt": pl.Float64, "nearest_hp": pl.Float64,
              "nearest_norm": pl.Float64, "nearest_run": pl.String}
    table = pl.DataFrame(rows, schema=schema)
    n, k = table.height, len(x) + 1
    if n == 0:
        raise AnalysisInputError("no accepted group has output-layer norms for two or more of "
                                 f"its {fit.hp} values")
    y = np.log(table["norm_opt"].to_numpy())
    slopes, constant = [], None
    if n - k >= MIN_DOF_INTERVAL:
        Z = np.column_stack([np.ones(n), np.log(table.select(x).to_numpy())])
        beta, *_ = np.linalg.lstsq(Z, y, rcond=None)
        r = y - Z @ beta
        cov = np.linalg.inv(Z.T @ Z) * float(r @ r) / (n - k)
        t = float(stats.t.ppf(0.5 + level / 2, n - k))
        se = np.sqrt(np.diag(cov))
        slopes = [(v, float(beta[i]), float(beta[i] - t * se[i]), float(beta[i] + t * se[i]))
                  for i, v in enumerate(x, start=1)]
        constant = all(lo <= 0 <= hi for _, _, lo, hi in slopes)
    sd = float(np.std(y, ddof=1)) if n > 1 else float("nan")
    return NormCheck(x=x, norm=norm, layer=layer, table=table, slopes=slopes, constant=constant,
                     log_mean=float(np.mean(y)), log_sd=sd, n=n, level=level)
