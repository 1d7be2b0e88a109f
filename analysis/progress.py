"""Progress reports and a time budget for ``fit_law`` (fit.py).

A fit runs in stages (screen, continue, polish; fit.py). ``FitClock`` times it from its
start, hands each batched stage a ``monitor`` (levenberg.Monitor) that reports a
``FitProgress`` after every iteration and stops the stage once ``time_budget_s`` of wall
time is spent, and words what was cut short for ``FitResult.warnings``. ``progress=True``
prints the reports to stderr, at most one line a second per stage plus each stage's last;
a callable receives every report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from analysis.errors import AnalysisInputError

__all__ = ["FitClock", "FitProgress", "ProgressFn", "StderrProgress", "progress_fn"]


@dataclass(frozen=True)
class FitProgress:
    """One report: ``iteration`` of at most ``max_iter`` in ``stage`` ("screen", "continue",
    "polish"), over ``rows`` starts of which ``active`` still iterate; ``best`` is the
    lowest objective so far in the stage; ``elapsed_s`` wall seconds since the fit began."""

    law: str
    stage: str
    iteration: int
    max_iter: int
    rows: int
    active: int
    best: float
    elapsed_s: float

    def line(self) -> str:
        return (
            f"fit {self.law}: {self.stage} {self.iteration}/{self.max_iter}, {self.rows:,} "
            f"starts ({self.active:,} active), best {self.best:.8g}, {self.elapsed_s:.1f} s"
        )


ProgressFn = Callable[[FitProgress], None]


class StderrProgress:
    """Prints a stage's reports to stderr, at most one line per ``every_s`` seconds, and
    always its first and its last iteration."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self._last: dict[str, float] = {}

    def __call__(self, p: FitProgress) -> None:
        final = p.active == 0 or p.iteration >= p.max_iter
        if final or p.elapsed_s - self._last.get(p.stage, -np.inf) >= self.every_s:
            self._last[p.stage] = p.elapsed_s
            print(p.line(), file=sys.stderr, flush=True)


def progress_fn(progress: bool | ProgressFn | None) -> ProgressFn | None:
    """``progress`` as fit_law takes it: None/False (silent), True (stderr) or a callable."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return StderrProgress()
    if callable(progress):
        return progress
    raise AnalysisInputError(f"progress must be True, False or a callable, got {progress!r}")


class FitClock:
    """Wall time since a fit began, its budget and its progress reports."""

    def __init__(self, law: str, budget_s: float | None, report: ProgressFn | None) -> None:
        if budget_s is not None and not budget_s > 0:
            raise AnalysisInputError(f"time_budget_s must be > 0, got {budget_s}")
        self.law, self.budget_s, self.report = law, budget_s, report
        self.start = time.perf_counter()
        self.cut: str | None = None  # where the budget stopped the fit, for the warning

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.start

    @property
    def spent(self) -> bool:
        return self.budget_s is not None and self.elapsed_s > self.budget_s

    def monitor(
        self, stage: str, max_iter: int, rows: int
    ) -> Callable[[int, np.ndarray, int], bool]:
        """A levenberg.Monitor for one stage: reports, and stops the stage when spent."""

        def check(iteration: int, f: np.ndarray, active: int) -> bool:
            if self.report is not None:
                best = float(np.min(f, initial=np.inf, where=np.isfinite(f)))
                self.report(
                    FitProgress(
                        self.law, stage, iteration, max_iter, rows, active, best, self.elapsed_s
                    )
                )
            if active and self.spent:
                self.stop(f"{stage} iteration {iteration} of {max_iter}")
                return True
            return False

        return check

    def stop(self, where: str) -> None:
        """Record that the budget ran out at ``where`` (the first place counts)."""
        self.cut = self.cut or where

    def warning(self) -> list[str]:
        """The FitResult warning when the budget cut the fit short, else []."""
        if self.cut is None:
            return []
        msg = (
            f"time budget of {self.budget_s:g} s ran out at {self.cut} ({self.elapsed_s:.1f} s): "
            "the result is the best point found so far, not necessarily the optimum; "
            "raise time_budget_s or use fewer starts"
        )
        return [msg]
