"""Progress reports of the analysis steps, the events every renderer reads, and a time
budget for ``fit_law`` (fit/fit.py).

Events. Every long step reports frozen dataclasses through a plain callback (``progress``
argument): ``FitProgress`` (each iteration of a fit's batched stages), ``BootstrapProgress``
(resamples refitted), ``SectionProgress`` (a report's sections). Each one, and those of
scalelab (tuning trials, collected runs), offers what ``Progress`` names: ``task`` (the
kind of step), ``label`` (one progress bar per label), ``done``/``total`` (``total`` None:
not known yet), ``detail``, ``final`` (the label's last report) and ``line()`` (its text).
Building one is cheap and prints nothing; rendering them (rich bars, text or JSON lines)
is the caller's (``scalelab.cli.progress``).

``progress`` arguments. ``progress_fn`` reads them all alike: a callable receives every
report, True prints them to stderr (``StderrProgress``: a label's first and last report and
at most one a second in between), False is silent, and None (the default) means the
reporter of the enclosing ``reporting(fn)`` block, if any: how ``scalelab fit`` hears the
fits and bootstraps that ``grouped.fit_selection`` runs without threading a callback.

Budget. ``FitClock`` times a fit from its start, hands each batched stage a ``monitor``
(levenberg.Monitor) that reports a ``FitProgress`` after every iteration and stops the
stage once ``time_budget_s`` of wall time is spent, and words what was cut short for
``FitResult.warnings``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from analysis.errors import AnalysisInputError

__all__ = [
    "BootstrapProgress",
    "FitClock",
    "FitProgress",
    "Progress",
    "ProgressFn",
    "Reporter",
    "SectionProgress",
    "Sections",
    "StderrProgress",
    "Throttle",
    "count_line",
    "progress_fn",
    "reporting",
]


class Progress(Protocol):
    """What every progress event offers its renderer (fields or properties)."""

    @property
    def task(self) -> str:
        """The kind of step: ``fit``, ``bootstrap``, ``report``, ``tune``, ``collect``."""

    @property
    def label(self) -> str:
        """What is progressing, e.g. ``bootstrap powerlaw``: one bar (and throttle) per label."""

    @property
    def done(self) -> int: ...

    @property
    def total(self) -> int | None:
        """None while unknown."""

    @property
    def detail(self) -> str:
        """What a bar shows beside the count (stage, best so far, section)."""

    @property
    def final(self) -> bool:
        """The label's last report (for now: a new stage or round may start it again)."""

    def line(self) -> str:
        """The report as one line of text."""


Reporter = Callable[[Progress], None]
"""Receives progress events of any kind."""


def count_line(label: str, done: int, total: int | None, unit: str, detail: str = "") -> str:
    """``bootstrap powerlaw: 40/200 resamples, 1.2 s``: the text line of a counted event."""
    shown = "?" if total is None else str(total)
    return f"{label}: {done}/{shown} {unit}" + (f", {detail}" if detail else "")


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
    task: ClassVar[str] = "fit"

    @property
    def label(self) -> str:
        return f"fit {self.law} {self.stage}"

    @property
    def done(self) -> int:
        return self.iteration

    @property
    def total(self) -> int:
        return self.max_iter

    @property
    def detail(self) -> str:
        return f"{self.rows:,} starts ({self.active:,} active), best {self.best:.8g}"

    @property
    def final(self) -> bool:
        """The stage's last iteration: every start stopped, or ``max_iter`` reached."""
        return self.active == 0 or self.iteration >= self.max_iter

    def line(self) -> str:
        return (
            f"fit {self.law}: {self.stage} {self.iteration}/{self.max_iter}, {self.rows:,} "
            f"starts ({self.active:,} active), best {self.best:.8g}, {self.elapsed_s:.1f} s"
        )


@dataclass(frozen=True)
class BootstrapProgress:
    """``done`` of ``total`` resamples of a ``law`` fit refitted, ``elapsed_s`` after the
    bootstrap began (fit/bootstrap.py)."""

    law: str
    done: int
    total: int
    elapsed_s: float
    task: ClassVar[str] = "bootstrap"

    @property
    def label(self) -> str:
        return f"bootstrap {self.law}"

    @property
    def detail(self) -> str:
        return ""

    @property
    def final(self) -> bool:
        return self.done >= self.total

    def line(self) -> str:
        return count_line(self.label, self.done, self.total, "resamples", f"{self.elapsed_s:.1f} s")


@dataclass(frozen=True)
class SectionProgress:
    """``done`` of the ``total`` sections of ``report`` (a file name) written; ``section``
    is the one being written now ('' once all are, or why the rest was not)."""

    report: str
    section: str
    done: int
    total: int
    task: ClassVar[str] = "report"

    @property
    def label(self) -> str:
        return self.report

    @property
    def detail(self) -> str:
        return self.section

    @property
    def final(self) -> bool:
        return self.done >= self.total

    def line(self) -> str:
        return count_line(self.label, self.done, self.total, "sections", self.section)


class Sections:
    """Reports the sections of one report as it writes them: call it with a section's
    name as that section starts, and ``end()`` once all are written. ``progress``: a
    reporter, or None/False (silent; ``progress_fn`` has resolved it already)."""

    def __init__(self, report: str, total: int, progress: Reporter | bool | None) -> None:
        self.report, self.total, self.progress = report, total, progress
        self.started = 0

    def __call__(self, section: str) -> None:
        if callable(self.progress):
            self.progress(SectionProgress(self.report, section, self.started, self.total))
        self.started += 1

    def end(self, note: str = "") -> None:
        """All sections are done; ``note`` says how when not as planned (``not written``)."""
        if callable(self.progress):
            self.progress(SectionProgress(self.report, note, self.total, self.total))


ProgressFn = Callable[[FitProgress], None]
"""What ``fit_law`` calls with each report (a ``Reporter`` is one)."""

_REPORTER: ContextVar[Reporter | None] = ContextVar("analysis_progress_reporter", default=None)


@contextmanager
def reporting(progress: Reporter | None) -> Iterator[None]:
    """Within the block (this thread or task), a ``progress`` argument left at None means
    ``progress``: the fits and bootstraps that code between the caller and them runs
    report there without each layer passing the callback on."""
    token = _REPORTER.set(progress)
    try:
        yield
    finally:
        _REPORTER.reset(token)


class Throttle:
    """Passes reports on to ``emit``: per label, one at most every ``every_s`` seconds of
    ``clock`` and every final one, from ``delay_s`` after the label's first report on (its
    first report itself when ``delay_s`` is 0). A final report starts the label afresh;
    a step that ends within ``delay_s`` passes nothing at all."""

    def __init__(
        self,
        emit: Reporter,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        delay_s: float = 0.0,
    ) -> None:
        self.emit, self.every_s, self.clock, self.delay_s = emit, every_s, clock, delay_s
        self._since: dict[str, float] = {}  # label -> its first report's time
        self._last: dict[str, float] = {}  # label -> its last report passed on

    def __call__(self, p: Progress) -> None:
        now = self.clock()
        since = self._since.setdefault(p.label, now)
        last = self._last.get(p.label)
        if p.final:
            self._since.pop(p.label)
            self._last.pop(p.label, None)
            if last is None and now - since < self.delay_s:
                return
        elif now - since < self.delay_s or (last is not None and now - last < self.every_s):
            return
        else:
            self._last[p.label] = now
        self.emit(p)


class StderrProgress(Throttle):
    """Prints reports' lines to stderr (``Throttle``: each stage's first and last iteration
    and at most one line per ``every_s`` seconds in between)."""

    def __init__(self, every_s: float = 1.0) -> None:
        super().__init__(lambda p: print(p.line(), file=sys.stderr, flush=True), every_s)


def progress_fn(progress: bool | Reporter | ProgressFn | None) -> Reporter | None:
    """``progress`` as analysis functions take it: a callable (every report), True
    (stderr), False (silent) or None (the enclosing ``reporting`` block's, else silent)."""
    if progress is None:
        return _REPORTER.get()
    if progress is False:
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
