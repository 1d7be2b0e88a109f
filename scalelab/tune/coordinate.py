"""Kim et al. 2025's certified coordinate search (arXiv 2509.14786), as pure functions.

Over ordered grids (for Kim et al.: epochs, lr, wd), start at a point and repeat:

1. train the centre and its one-step neighbours (±1 index on each axis, within the grid);
2. if a neighbour is strictly better than the centre, move to the best one (ties go to
   the earlier-listed neighbour) and repeat; otherwise stop at the centre.

The final point is **certified** when all 2·d one-step neighbours (6 for three axes) were
trained and every one is strictly worse. It is *not* certified, and says why in
``flags``, when:

* it sits on a grid edge: the neighbour beyond the edge cannot be trained (the grid
  must be extended to certify it; Kim et al.'s 64-epoch optima are of this kind);
* a neighbour failed to train (loss None/NaN) - a diverged run reports +inf, which is a
  valid "worse";
* a neighbour ties it;
* the evaluation budget ``max_evals`` ran out first.

The loss strictly decreases with every move, so the walk ends on a finite grid. Points
are tuples of grid values; ``evaluate(points) -> losses`` trains them (in one batch).
``CoordinateSearch`` exposes the same walk as a state machine (``pending``/``tell``) so
that many searches (one per model size) can share each batch of training.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["CoordinateResult", "CoordinateSearch", "coordinate_search", "neighbours"]

Index = tuple[int, ...]


@dataclass(frozen=True)
class CoordinateResult:
    """The end of one search."""

    best: tuple
    """Grid values of the accepted point."""
    loss: float
    certified: bool
    flags: tuple[str, ...]
    """Why the point is not certified (empty when it is)."""
    path: tuple[tuple, ...]
    """Centres visited, start first."""
    evaluated: dict[tuple, float | None] = field(repr=False)
    """Every trained point -> loss (None: failed)."""


def neighbours(index: Index, sizes: Sequence[int], ridge: bool = False,
               ) -> tuple[list[Index], list[tuple[int, int]]]:
    """(in-grid one-step neighbours, [(axis, direction)] of those beyond an edge). With
    ``ridge`` (and >= 2 axes), also the in-grid points one step up on every axis at once
    and one step down (TuneConfig.ridge); a diagonal beyond an edge certifies nothing."""
    inside, outside = [], []
    for axis, size in enumerate(sizes):
        for step in (-1, 1):
            j = index[axis] + step
            if 0 <= j < size:
                inside.append(index[:axis] + (j,) + index[axis + 1 :])
            else:
                outside.append((axis, step))
    if ridge and len(sizes) > 1:
        for step in (-1, 1):
            diagonal = tuple(i + step for i in index)
            if all(0 <= i < n for i, n in zip(diagonal, sizes)):
                inside.append(diagonal)
    return inside, outside


class CoordinateSearch:
    """The walk as a state machine: ``pending()`` points to train, ``tell(results)``."""

    def __init__(self, grids: Sequence[Sequence[float]], start: Sequence[float], *,
                 axes: Sequence[str] | None = None, max_evals: int | None = None,
                 ridge: bool = False):
        self.grids = [tuple(g) for g in grids]
        if not self.grids or any(len(g) == 0 for g in self.grids):
            raise ValueError("coordinate search needs non-empty grids")
        for g in self.grids:
            if list(g) != sorted(g) or len(set(g)) != len(g):
                raise ValueError(f"grid {g} must be strictly increasing")
        if len(start) != len(self.grids):
            raise ValueError("start needs one value per axis")
        self.axes = list(axes) if axes is not None else [f"axis{i}" for i in range(len(grids))]
        self.sizes = [len(g) for g in self.grids]
        self.max_evals = max_evals
        self.ridge = ridge
        self.centre: Index = tuple(g.index(v) for g, v in zip(self.grids, start))
        self.path: list[Index] = [self.centre]
        self.losses: dict[Index, float | None] = {}
        self._result: CoordinateResult | None = None
        self._budget_hit = False
        self._advance()

    # --- public -----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._result is not None

    def pending(self) -> list[tuple]:
        """Points (grid values) to train next; empty once done."""
        if self.done:
            return []
        return [self._values(i) for i in self._needed()]

    def tell(self, results: Mapping[tuple, float | None]) -> None:
        """Record losses (None or NaN: the run failed; +inf: it diverged)."""
        for point, loss in results.items():
            index = tuple(g.index(v) for g, v in zip(self.grids, point))
            bad = loss is None or (isinstance(loss, float) and math.isnan(loss))
            self.losses[index] = None if bad else float(loss)
        self._advance()

    def result(self) -> CoordinateResult:
        if self._result is None:
            raise RuntimeError("the search has not finished; train pending() points first")
        return self._result

    # --- the walk -----------------------------------------------------------------------
    def _needed(self) -> list[Index]:
        inside, _ = neighbours(self.centre, self.sizes, self.ridge)
        return [i for i in [self.centre, *inside] if i not in self.losses]

    def _advance(self) -> None:
        while self._result is None:
            needed = self._needed()
            if needed:
                if self.max_evals is not None and len(self.losses) + len(needed) > self.max_evals:
                    self._budget_hit = True
                    self._finish()
                return
            inside, _ = neighbours(self.centre, self.sizes, self.ridge)
            here = self._key(self.centre)
            best = min(inside, key=self._key, default=None)
            if best is not None and self._key(best) < here:
                self.centre = best
                self.path.append(best)
                continue
            self._finish()

    def _key(self, index: Index) -> float:
        loss = self.losses.get(index)
        return math.inf if loss is None else loss

    def _finish(self) -> None:
        c = self.centre
        loss = self.losses.get(c)
        inside, outside = neighbours(c, self.sizes, self.ridge)
        flags = []
        if loss is None or not math.isfinite(loss):
            flags.append("the accepted point itself failed or diverged")
        for axis, step in outside:
            end = "maximum" if step > 0 else "minimum"
            flags.append(f"edge: {self.axes[axis]} is at its grid {end} "
                         f"{self.grids[axis][c[axis]]}; extend the grid to certify")
        for n in inside:
            what = self._describe(n)
            if n not in self.losses:
                flags.append(f"neighbour {what} not trained")
            elif self.losses[n] is None:
                flags.append(f"neighbour {what} failed")
            elif loss is not None and self.losses[n] <= loss:
                flags.append(f"neighbour {what} ties or beats it ({self.losses[n]:.6g})")
        if self._budget_hit:
            flags.append(f"stopped at max_evals={self.max_evals} before the walk ended")
        self._result = CoordinateResult(
            best=self._values(c),
            loss=math.inf if loss is None else loss,
            certified=not flags,
            flags=tuple(flags),
            path=tuple(self._values(p) for p in self.path),
            evaluated={self._values(i): v for i, v in self.losses.items()},
        )

    def _values(self, index: Index) -> tuple:
        return tuple(g[i] for g, i in zip(self.grids, index))

    def _describe(self, index: Index) -> str:
        return ", ".join(f"{a}={v}" for a, v in zip(self.axes, self._values(index))
                         if v != self._values(self.centre)[self.axes.index(a)])


def coordinate_search(
    grids: Sequence[Sequence[float]],
    start: Sequence[float],
    evaluate: Callable[[list[tuple]], Sequence[float | None]],
    *,
    axes: Sequence[str] | None = None,
    max_evals: int | None = None,
    ridge: bool = False,
) -> CoordinateResult:
    """Run the walk to the end, training each round's points with one ``evaluate`` call."""
    search = CoordinateSearch(grids, start, axes=axes, max_evals=max_evals, ridge=ridge)
    while not search.done:
        points = search.pending()
        losses = list(evaluate(points))
        if len(losses) != len(points):
            raise ValueError(f"evaluate returned {len(losses)} losses for {len(points)} points")
        search.tell(dict(zip(points, losses)))
    return search.result()
