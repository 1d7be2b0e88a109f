"""The candidate space of a scaling study: model sizes x tuned axes x seed replicates.

A run is (N, one value per tuned axis, replicate): N parameters, e.g. epochs and weight
decay on their ordered grids (``Axis``), and the replicate index r = 0, 1, ... (r > 0 is a
new seed of the same cell). Its ``key`` is one string, ``run_key``; everything that
decides whether a run was done compares keys, so a run is never proposed twice.

Frames (polars), one row per run:

    key        run_key(...)
    N          parameters (float)
    <axis>     one column per tuned axis (float), in ``CandidateSpace.axes`` order
    replicate  int
    flops      the run's compute (from the caller's ``flops`` function, e.g. 6 N D)

The coordinate-search neighbours of a cell are its cells one grid step away on one axis
(Kim et al. 2025, arXiv 2509.14786; ``scalelab.tune.coordinate`` walks the same grid).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import AnalysisInputError

__all__ = ["Axis", "CandidateSpace", "Cell", "run_key"]

Cell = tuple[int, ...]
"""A tuned cell as grid indices, one per axis."""


@dataclass(frozen=True)
class Axis:
    """A tuned hyperparameter: its ordered grid and the index a search starts from."""

    name: str
    values: tuple[float, ...]
    start: int | None = None
    """Grid index of the start cell at a size nothing informs (None: the middle)."""

    def __post_init__(self) -> None:
        v = tuple(float(x) for x in self.values)
        if not v or list(v) != sorted(set(v)):
            raise AnalysisInputError(f"axis {self.name}: values must be strictly increasing")
        object.__setattr__(self, "values", v)
        if self.start is not None and not 0 <= self.start < len(v):
            raise AnalysisInputError(f"axis {self.name}: start index {self.start} out of range")

    @property
    def start_index(self) -> int:
        return (len(self.values) - 1) // 2 if self.start is None else int(self.start)


def run_key(N: float, values: Sequence[float], names: Sequence[str], replicate: int) -> str:
    """The run's identity, e.g. 'N=4.1e+04|epochs=64|wd=3|rep=0' (6 significant digits)."""
    parts = [f"N={float(N):.6g}"] + [f"{n}={float(v):.6g}" for n, v in zip(names, values)]
    return "|".join(parts + [f"rep={int(replicate)}"])


@dataclass(frozen=True)
class CandidateSpace:
    """sizes x axes x ``replicates`` seeds per cell (replicate 0 is the cell's first run)."""

    sizes: tuple[float, ...]
    axes: tuple[Axis, ...]
    replicates: int = 1
    ridge: bool = False
    """Also count as neighbours the two cells one step on *every* axis at once, all up or
    all down (with epochs and weight decay: more epochs with more decay, the ridge the
    CPU twin's optimum moves along, docs/calibration.md). One-axis steps alone stop at a
    point of that ridge that is no optimum (docs/adaptive.md, "CPU twin comparison")."""

    def __post_init__(self) -> None:
        s = tuple(float(x) for x in self.sizes)
        if not s or list(s) != sorted(set(s)) or s[0] <= 0:
            raise AnalysisInputError("sizes must be positive and strictly increasing")
        object.__setattr__(self, "sizes", s)
        object.__setattr__(self, "axes", tuple(self.axes))
        if self.replicates < 1:
            raise AnalysisInputError("replicates must be >= 1")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a.values) for a in self.axes)

    def cells(self) -> list[Cell]:
        """Every cell, in ``itertools.product`` order of the axes."""
        return list(itertools.product(*(range(n) for n in self.shape)))

    def values(self, cell: Cell) -> tuple[float, ...]:
        return tuple(a.values[i] for a, i in zip(self.axes, cell))

    def cell_of(self, row: dict) -> Cell:
        """Grid indices of a frame row's axis values."""
        return tuple(a.values.index(float(row[a.name])) for a in self.axes)

    def neighbours(self, cell: Cell) -> list[Cell]:
        """In-grid cells one step from ``cell`` on one axis (-1 before +1, axis by axis);
        with ``ridge``, then the cells one step down and one step up on every axis."""
        out = []
        for k, n in enumerate(self.shape):
            for step in (-1, 1):
                j = cell[k] + step
                if 0 <= j < n:
                    out.append(cell[:k] + (j,) + cell[k + 1 :])
        if self.ridge and len(self.shape) > 1:
            for step in (-1, 1):
                c = tuple(i + step for i in cell)
                if all(0 <= i < n for i, n in zip(c, self.shape)):
                    out.append(c)
        return out

    def restrict(self, allowed: Mapping[str, Sequence[float]]) -> CandidateSpace:
        """The slice of this space whose axes take only the ``allowed`` values (a recipe,
        e.g. {"optim.weight_decay": [0.1]}: Kim et al.'s standard recipe in a tuning grid).
        Keys are unchanged, so a run of the slice is the same run in the whole space; an
        axis' start moves to the nearest allowed value."""
        if unknown := set(allowed) - set(self.names):
            raise AnalysisInputError(f"no tuned axis {sorted(unknown)}; axes: {list(self.names)}")
        axes = []
        for a in self.axes:
            if a.name not in allowed:
                axes.append(a)
                continue
            keep = tuple(sorted({float(v) for v in allowed[a.name]}))
            if missing := [v for v in keep if v not in a.values]:
                raise AnalysisInputError(f"axis {a.name}: {missing} not on its grid {list(a.values)}")
            if not keep:
                raise AnalysisInputError(f"axis {a.name}: no value allowed")
            start = a.values[a.start_index]
            axes.append(Axis(a.name, keep, int(np.argmin([abs(v - start) for v in keep]))))
        return CandidateSpace(self.sizes, tuple(axes), self.replicates, self.ridge)

    def contains(self, frame: pl.DataFrame) -> pl.Series:
        """Which rows of a run frame lie in this space (their axis values on its grids)."""
        mask = pl.col("N").is_in(list(self.sizes))
        for a in self.axes:
            mask = mask & pl.col(a.name).is_in(list(a.values))
        return frame.select(mask.alias("in"))["in"]

    def runs_in(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The rows of a run frame in this space (a frame without rows, as it is)."""
        return frame.filter(self.contains(frame)) if frame.height else frame

    def key(self, N: float, cell: Cell, replicate: int = 0) -> str:
        return run_key(N, self.values(cell), self.names, replicate)

    def rows(self, items: Iterable[tuple[float, Cell, int]],
             flops: Callable[[pl.DataFrame], np.ndarray]) -> pl.DataFrame:
        """A run frame (module docstring) for (N, cell, replicate) triples."""
        items = list(items)
        data: dict[str, list] = {"key": [self.key(n, c, r) for n, c, r in items],
                                 "N": [float(n) for n, _, _ in items]}
        for k, a in enumerate(self.axes):
            data[a.name] = [a.values[c[k]] for _, c, _ in items]
        data["replicate"] = [int(r) for _, _, r in items]
        schema = {"key": pl.String, "N": pl.Float64, **{a.name: pl.Float64 for a in self.axes},
                  "replicate": pl.Int64}
        frame = pl.DataFrame(data, schema=schema)
        return frame.with_columns(pl.Series("flops", np.asarray(flops(frame), dtype=float)))

    def table(self, flops: Callable[[pl.DataFrame], np.ndarray]) -> pl.DataFrame:
        """Every candidate run (sizes outer, cells in product order, replicates inner)."""
        return self.rows(((n, c, r) for n in self.sizes for c in self.cells()
                          for r in range(self.replicates)), flops)
