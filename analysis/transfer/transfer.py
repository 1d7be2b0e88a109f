"""``fit_transfer``: a hyperparameter-transfer law fitted to a sweep's own runs.

From a runs table (``runs.parquet``: ``analysis.tables.runs.prepare_runs`` picks the fit-ready
runs) or any frame with the x columns, the hp column and a loss column:

1. cells: the runs grouped by (x..., hp), loss averaged over each cell's runs (seeds);
   with ``best_over`` (a second swept column, e.g. ``optim.lr`` for a batch-size law),
   each (x..., hp) cell's loss is profiled over that column first
   (``analysis.transfer.profile``: the optimal batch exists only with the lr tuned);
2. per group (one x value), the optimum from a local quadratic in ln hp
   (``analysis.transfer.optimum``), refused at the grid's edge with one line;
3. the law ln hp* = ln c + Σ a_i ln x_i, weighted by the optima's SEs
   (``analysis.transfer.law``).

Nothing is specific to the learning rate: ``hp`` is any swept numeric column
(``optim.lr``, ``optim.weight_decay``, ``train.batch_size``, ...). ``x`` is ("N",),
("N", "D"), ("D",) (Step Law's batch law in D alone), any non-empty subset of N, D, U and C;
their runs-table sources are ``analysis.fit.xvars.X_SOURCES``.
Refit the law of DeepSeek-AI 2024 (arXiv 2401.02954) or Step Law (Li et al. 2025, arXiv
2503.04715) to your own grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import polars as pl

from analysis.errors import AnalysisInputError, did_you_mean
from analysis.fit.xvars import X_SOURCES
from analysis.tables.cells import differing_settings, setting_columns
from analysis.tables.external import CONFIG_PREFIX
from analysis.tables.runs import LOSS_COLUMNS, prepare_runs
from analysis.transfer.law import TransferLaw, fit_law_wls
from analysis.transfer.optimum import Noise, locate_optima
from analysis.transfer.profile import profile_cells

__all__ = ["X_CHOICES", "X_NAMES", "TransferFit", "check_x", "fit_transfer", "group_label",
           "setting_columns", "transfer_cells"]

X_NAMES = ("N", "D", "U", "C")
"""The variables a law may use: parameters, tokens, unique tokens, FLOPs (their runs-table
columns: ``analysis.fit.xvars.X_SOURCES``)."""
X_CHOICES: tuple[tuple[str, ...], ...] = tuple(
    c for r in range(1, len(X_NAMES) + 1) for c in combinations(X_NAMES, r))
"""The variable sets a law may use: any non-empty subset of ``X_NAMES`` (listed in their
order; ``fit_transfer`` takes them in any order). A set whose values are collinear over the
groups (C = 6ND with N and D, or D proportional to N) is refused by the fit."""
SEED_COLUMN = "seed"


@dataclass(frozen=True)
class TransferFit:
    """A transfer law and what it was fitted to.

    ``hp``: the hyperparameter column; ``x``: the law's variables; ``table``: one row per
    group (``analysis.transfer.optimum.locate_optima``'s columns; ``why`` set on refused
    groups); ``cells``: one row per (group, hp value): x..., hp, u = ln hp, loss (mean),
    n, ss (within-cell sum of squares), run_ids (and over, over_tried, over_edge with
    ``best_over``: ``transfer_cells``); ``law``: the fit; ``noise``: the pooled
    loss noise; ``notes``: runs left out and cells worth a look."""

    hp: str
    x: tuple[str, ...]
    table: pl.DataFrame
    cells: pl.DataFrame
    law: TransferLaw
    noise: Noise
    notes: tuple[str, ...] = ()
    best_over: str | None = None
    """The column the loss was profiled over (None: plain cells)."""

    @property
    def accepted(self) -> pl.DataFrame:
        """The groups the law was fitted to."""
        return self.table.filter(pl.col("why").is_null())

    def predict(self, **x: float) -> tuple[float, float, float]:
        """(hp*, lo, hi) at ``x`` (e.g. ``N=1e8``): the law and its prediction interval."""
        return self.law.predict(**x)


def group_label(row: dict, x: Sequence[str]) -> str:
    """``N=26,232`` or ``N=26,232, D=1.05e+06``: a group named by its x values."""
    return ", ".join(f"{v}={row[v]:,.0f}" if row[v] < 1e7 else f"{v}={row[v]:.3g}" for v in x)


def _x_columns(frame: pl.DataFrame, x: tuple[str, ...]) -> pl.DataFrame:
    """``frame`` with a Float64 column per x variable (C from ``flops`` when absent)."""
    out = {}
    for v in x:
        src = v if v in frame.columns else X_SOURCES.get(v, v)
        if src not in frame.columns:
            raise AnalysisInputError(f"runs table has no '{v}' column (nor '{src}')")
        out[v] = pl.col(src).cast(pl.Float64)
    return frame.with_columns(**out)


def check_x(x: Sequence[str]) -> tuple[str, ...]:
    """``x`` as a tuple: a non-empty set of ``X_NAMES``, each once; else one line naming the
    bad name (with a did-you-mean)."""
    if isinstance(x, str):
        x = tuple(v.strip() for v in x.split(","))
    x = tuple(x)
    if not x:
        raise AnalysisInputError(f"x must name at least one of {', '.join(X_NAMES)}")
    for v in x:
        if v not in X_NAMES:
            near = [n for n in X_NAMES if n.lower() == str(v).lower()]
            hint = f" (did you mean '{near[0]}'?)" if near else did_you_mean(str(v), X_NAMES)
            raise AnalysisInputError(f"x must be a subset of {', '.join(X_NAMES)}; '{v}' is "
                                     f"not one{hint}")
    if len(set(x)) < len(x):
        raise AnalysisInputError(f"x names a variable twice: {','.join(x)}")
    return x


def _check_column(df: pl.DataFrame, column: str, what: str) -> None:
    """``column`` is a numeric column of ``df``, or one line naming what is wrong."""
    if not isinstance(df, pl.DataFrame):
        raise AnalysisInputError(f"expected a polars DataFrame, got {type(df).__name__}")
    numeric = [c for c, t in df.schema.items() if t.is_numeric()]
    if column not in df.columns:
        raise AnalysisInputError(f"no {what} column '{column}'{did_you_mean(column, numeric)}")
    if not df.schema[column].is_numeric():
        raise AnalysisInputError(f"'{column}' holds {df.schema[column]} values, not numbers")


def _edge_notes(cells: pl.DataFrame, x: tuple[str, ...], hp: str, over: str) -> list[str]:
    """One note listing the cells whose loss could not be profiled over ``over``."""
    edge = cells.filter(pl.col("over_edge").is_not_null())
    if edge.height == 0:
        return []
    shown = "; ".join(f"{group_label(r, x)}, {hp} {r[hp]:.4g}: best {over} {r['over']:.4g} "
                      f"({_EDGE_WORDS[r['over_edge']]} of {r['over_tried']})"
                      for r in edge.head(8).iter_rows(named=True))
    more = f"; and {edge.height - 8} more" if edge.height > 8 else ""
    return [f"{edge.height} of {cells.height} cells have no valley in {over} (their best run's "
            f"loss is used, and may be overstated): {shown}{more}"]


def _mixed_note(frame: pl.DataFrame, x: tuple[str, ...], hp: str, over: str | None) -> str | None:
    """A note when the runs of one cell (one x..., hp[, over]) differ in another setting
    (``setting_columns``, from the table itself: a sweep's runs table or any external one),
    e.g. runs from two token budgets under a law in N alone: their losses would be
    averaged."""
    keys = [*x, hp, *([over] if over else [])]
    skip = {*keys, *(X_SOURCES.get(v, v) for v in x), "block",
            *(f"{CONFIG_PREFIX}{k}" for k in keys)}  # an external table's dotted copies
    if "D" in x:  # D is D_total; U = D_unique
        skip |= {"D_total"}
    if "U" in x:
        skip |= {"D_unique"}
    other = setting_columns(frame, skip)
    if {"U", "D"} <= set(other) and (frame["U"] == frame["D"]).all():
        other.remove("U")  # prepare_runs' copy of D for a plain table without U
    if not other:
        return None
    differ, n, _ = differing_settings(frame, keys, other)  # per cell
    where = "cell(s) average runs"
    if not differ:  # no cell mixes, but a group's cells may come from different settings
        differ, n, _ = differing_settings(frame, list(x), other)
        where = "group(s) mix cells of runs"
    if not differ:
        return None
    names = {"D_total": "D", "D_unique": "U", "D": "D", "U": "U", "C": "C"}
    add = sorted({names[c] for c in differ if c in names} - set(x), key="NDUC".index)
    hint = f", add {','.join(add)} to the law's x" if add else ""
    return (f"{n} {where} that differ in {', '.join(differ)} (several settings in one "
            f"{'cell' if where.startswith('cell') else 'group'}): select one with --where{hint}"
            + ("" if over else ", or profile one out with --best-over"))


_EDGE_WORDS = {"lowest": "the lowest", "highest": "the highest", "no valley": "no valley",
               "too few": "too few values", "too deep": "a quadratic bottom far below every loss"}


def _fit_ready(df: pl.DataFrame, x: tuple[str, ...], hp: str, loss: str,
               extra: tuple[str, ...] = ()) -> tuple[pl.DataFrame, list[str]]:
    """The runs a fit may use, with columns x..., hp, ``extra``, loss, and notes on those
    left out."""
    check_x(x)
    _check_column(df, hp, "hyperparameter")
    notes: list[str] = []
    if "D" in df.columns or "D_total" in df.columns:  # a runs table: prepare_runs' rules
        ready = prepare_runs(df, loss=loss)
        frame, notes = ready.data, list(ready.notes)
    else:  # a plain table of x, hp and loss
        if loss not in df.columns:
            pick = "loss" if "loss" in df.columns and loss in LOSS_COLUMNS else None
            if pick is None:
                raise AnalysisInputError(f"no loss column '{loss}'{did_you_mean(loss, df.columns)}")
            loss = pick
        frame = df.with_columns(pl.col(loss).cast(pl.Float64).alias("loss"))
    frame = _x_columns(frame, x)
    good = pl.all_horizontal([pl.col(c).cast(pl.Float64).is_finite() & (pl.col(c) > 0)
                              for c in (*x, hp, *extra)] + [pl.col("loss").is_finite()]).fill_null(False)
    if bad := frame.filter(~good).height:
        notes.append(f"excluded {bad} run(s) with a missing or non-positive {', '.join((*x, hp, *extra))}, "
                     "or a missing loss")
    return frame.filter(good), notes


def transfer_cells(frame: pl.DataFrame, x: tuple[str, ...], hp: str,
                   best_over: str | None = None) -> pl.DataFrame:
    """One row per (x..., hp): u = ln hp, loss (mean over runs), n, ss (Σ (loss - mean)²),
    run_ids (empty lists without a run_id column), seeds (distinct seeds; n without a seed
    column). With ``best_over``: the cells are first made per (x..., hp, best_over) and
    each (x..., hp) gets its loss profiled over best_over (``analysis.transfer.profile``),
    with three more columns: ``over``, ``over_tried``, ``over_edge``."""
    ids = pl.col("run_id").cast(pl.String) if "run_id" in frame.columns else pl.lit(None, pl.String)
    seeds = (pl.col(SEED_COLUMN).n_unique() if SEED_COLUMN in frame.columns else pl.len())
    keys = [*x, hp] if best_over is None else [*x, hp, best_over]
    cells = (frame.with_columns(pl.col(c).cast(pl.Float64) for c in keys[len(x):])
             .group_by(keys)
             .agg(pl.col("loss").mean().alias("mean"), pl.len().alias("n"),
                  ((pl.col("loss") - pl.col("loss").mean()) ** 2).sum().alias("ss"),
                  ids.drop_nulls().alias("run_ids"), seeds.cast(pl.Int64).alias("seeds"))
             .rename({"mean": "loss"}))
    if best_over is not None:
        cells = profile_cells(cells, [*x, hp], best_over)
    return cells.with_columns(pl.col(hp).log().alias("u")).sort([*x, "u"])


def fit_transfer(df: pl.DataFrame, x: Sequence[str] = ("N",), hp: str = "optim.lr", *,
                 loss: str = "final_loss", level: float = 0.95,
                 best_over: str | None = None) -> TransferFit:
    """Fit hp* = c · Π x_i^a_i to the per-group optima of ``hp`` in ``df``.

    ``x``: any non-empty subset of N, D, U, C (e.g. ("N",), ("N", "D"), ("D",)); ``hp``: any
    swept numeric column; ``loss``: the
    runs table's loss column (``final_loss`` or ``best_loss``; ``loss`` in a plain table).
    ``best_over``: another swept numeric column to profile the loss over (its best value
    per (group, hp) cell; see ``transfer_cells``), e.g. ``optim.lr`` for a batch-size law.
    Groups refused (optimum at the grid's edge, no valley) stay in ``.table`` with ``why``;
    fewer usable groups than the law's coefficients + 1 raise ``AnalysisInputError``,
    naming the refusals."""
    x = check_x(x)
    if not 0 < level < 1:
        raise AnalysisInputError(f"level must be in (0, 1), got {level}")
    if best_over is not None:
        _check_column(df, best_over, "best-over")
        if best_over in (hp, *x):
            raise AnalysisInputError(f"best_over '{best_over}' is the law's own hp or x")
    frame, notes = _fit_ready(df, x, hp, loss, extra=() if best_over is None else (best_over,))
    if frame.height == 0:
        raise AnalysisInputError(f"no usable runs for {hp} against {', '.join(x)}")
    cells = transfer_cells(frame, x, hp, best_over)
    if best_over is not None:
        if cells["over_tried"].max() < 2:
            raise AnalysisInputError(f"best-over {best_over}: every cell ran one value of it, "
                                     "so there is nothing to profile over; drop --best-over")
        notes.extend(_edge_notes(cells, x, hp, best_over))
    if note := _mixed_note(frame, x, hp, best_over):
        notes.append(note)
    elif (mixed := cells.filter(pl.col("n") > pl.col("seeds")).height) and SEED_COLUMN in frame.columns:
        notes.append(f"{mixed} cell(s) average runs with the same seed (runs differing in "
                     "another column?): select one setting with --where")
    table, noise = locate_optima(cells, x, hp, level)
    flagged = table.filter(pl.col("flag").is_not_null())
    if flagged.height:
        shown = "; ".join(f"{group_label(r, x)}: {r['flag']}" for r in flagged.head(6).iter_rows(named=True))
        more = f"; and {flagged.height - 6} more" if flagged.height > 6 else ""
        notes.append(f"{flagged.height} group(s) with a wider SE than their quadratic's: {shown}{more}")
    ok = table.filter(pl.col("why").is_null())
    k = len(x) + 1
    if ok.height < k + 1:
        refused = "; ".join(f"{group_label(r, x)}: {r['why']}"
                            for r in table.filter(pl.col("why").is_not_null()).iter_rows(named=True))
        raise AnalysisInputError(
            f"{ok.height} usable group(s) of {table.height} for the {k} coefficients of the "
            f"law of {hp} in {', '.join(x)}: need >= {k + 1}" + (f"; refused: {refused}" if refused else ""))
    law = fit_law_wls(ok["u_opt"].to_numpy(), ok["se_u"].to_numpy(),
                      ok.select(x).to_numpy(), x, level, se_dof=noise.dof)
    if law.interval_note:
        notes.append(law.interval_note)
    if law.tau2 > 0:
        notes.append(f"the optima scatter about the law more than their SEs explain (chi2/dof "
                     f"{law.chi2_red:.3g}): an extra sd {law.tau2 ** 0.5:.3g} in ln {hp} was added "
                     f"to every group's (Paule-Mandel), so no group outweighs the scatter; largest "
                     f"weight share {law.max_weight:.2f} of {law.n} groups")
    return TransferFit(hp=hp, x=x, table=table, cells=cells, law=law, noise=noise,
                       notes=tuple(notes), best_over=best_over)
