"""Where the progress of ``tune``, ``fit``, ``report`` and ``collect`` goes: one renderer
for the events their libraries report (``analysis.progress.Progress``: fits, bootstraps,
report sections; ``scalelab.tune.study.TrialProgress``; ``scalelab.sweep.view.collect.
CollectProgress``), always on stderr so that stdout keeps the command's result.

The mode follows ``scalelab train``'s settings (``scalelab.train.console.progress_log.LogSettings``:
the flags, else ``SCALELAB_LOG_FORMAT`` / ``SCALELAB_QUIET``):

- ``-q`` / ``--quiet``: nothing (the libraries are given no callback at all);
- ``--log-format json``: one JSON object per line, for cluster logs: ``{"event":
  "progress", "task": "bootstrap", "done": 40, "total": 200, ...}`` plus the event's own
  fields (non-finite numbers as null); per label its first and final events and at most
  one a second in between (``analysis.progress.Throttle``);
- text on a terminal: rich progress bars, one per label (``bootstrap powerlaw``, ``tune``),
  with the count, the event's detail (stage, best so far, section) and the time elapsed;
  they vanish once the command ends, leaving its result;
- text elsewhere (a pipe, a log file): lines only for a step still running
  ``TEXT_DELAY_S`` after it began (a person waits), then at most one a second and its
  final line; a quick command prints none (bad input stays one line on stderr).

A command opens ``ProgressOutput.from_flags(log_format, quiet)`` around its work and hands
``output.sink`` to the libraries; ``output.paused()`` stops the bars while something else
draws (``tune``'s training rounds show the sweep's own run bar).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import IO, TYPE_CHECKING, Any, Self

import typer

from scalelab.train.console.progress_log import LogSettings

if TYPE_CHECKING:
    from analysis.progress import Progress, Reporter

__all__ = ["TEXT_DELAY_S", "ProgressOutput", "json_line", "log_format_option", "quiet_option"]

TEXT_DELAY_S = 2.0
"""Seconds a step runs before text lines (off a terminal) report it."""


def quiet_option() -> Any:
    """The ``-q/--quiet`` option of a command that reports progress."""
    return typer.Option(False, "--quiet", "-q",
                        help="No progress on stderr (the result still prints; default $SCALELAB_QUIET).")


def log_format_option() -> Any:
    """The ``--log-format`` option of a command that reports progress."""
    return typer.Option(None, "--log-format", metavar="[text|json]",
                        help="Progress on stderr as text (default: bars on a terminal) or json: "
                             "one JSON object per line, for cluster logs (default $SCALELAB_LOG_FORMAT).")


def _plain(value: Any) -> Any:
    """``value`` as strict JSON can hold it: non-finite floats as None, containers walked."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def json_line(event: Progress) -> str:
    """One progress event as a JSON object on one line: ``event``, ``task``, ``done``,
    ``total`` and the event's own fields."""
    doc: dict[str, Any] = {"event": "progress", "task": event.task, "done": event.done,
                           "total": event.total}
    if is_dataclass(event):
        doc.update((k, v) for k, v in asdict(event).items() if k not in doc)
    return json.dumps(_plain(doc), allow_nan=False, default=str)


class _Bars:
    """Rich progress bars on ``console``, one per label, drawn from the first event on. A
    final event fills its bar (a stage that converged early is done) and stops its clock;
    the label's next event starts the bar afresh (the next stage, group or round)."""

    def __init__(self, console: Any) -> None:
        from rich import progress as rp

        self.bars = rp.Progress(rp.TextColumn("{task.description}"), rp.BarColumn(),
                                rp.MofNCompleteColumn(), rp.TimeElapsedColumn(),
                                rp.TextColumn("{task.fields[detail]}"),
                                console=console, transient=True, redirect_stdout=False)
        self.ids: dict[str, Any] = {}
        self.ended: set[str] = set()
        self.live = False

    def __call__(self, event: Progress) -> None:
        label, total = event.label, event.total
        if event.final and total is not None:
            total = event.done  # done, however far short of the most it might have taken
        task = self.ids.get(label)
        if task is None:
            self.ids[label] = self.bars.add_task(label, total=total, completed=event.done,
                                                 detail=event.detail)
        elif label in self.ended:
            self.bars.reset(task, total=total, completed=event.done, detail=event.detail)
        else:
            self.bars.update(task, total=total, completed=event.done, detail=event.detail)
        (self.ended.add if event.final else self.ended.discard)(label)
        if not self.live:  # drawn with its first bar in place
            self.bars.start()
            self.live = True

    def stop(self) -> None:
        if self.live:
            self.bars.stop()
            self.live = False


class ProgressOutput:
    """A command's progress renderer (see the module docstring); a context manager that
    takes its bars down on the way out. ``stream``: where it writes (default: sys.stderr
    at each write); ``console``: a rich console to draw bars on (tests), forcing bars."""

    def __init__(self, settings: LogSettings, *, stream: IO[str] | None = None,
                 console: Any = None) -> None:
        self.settings = settings
        self._stream = stream
        self._bars: _Bars | None = None
        if settings.quiet:
            self.mode = "quiet"
        elif settings.format == "json":
            self.mode = "json"
        elif console is not None or self._out().isatty():
            self.mode = "bars"
            if console is None:
                from rich.console import Console

                console = Console(file=self._out())
            self._bars = _Bars(console)
        else:
            self.mode = "text"
        from analysis.progress import Throttle  # numpy: not at every CLI start

        self._lines = Throttle(self._write, delay_s=TEXT_DELAY_S if self.mode == "text" else 0.0)

    @classmethod
    def from_flags(cls, log_format: str | None, quiet: bool) -> ProgressOutput:
        """The renderer of a command's ``--log-format`` and ``-q`` (not given: the environment)."""
        return cls(LogSettings.from_env().overridden(fmt=log_format, quiet=quiet or None))

    def _out(self) -> IO[str]:
        return self._stream or sys.stderr  # sys.stderr at call time (captures work)

    def _write(self, event: Progress) -> None:
        text = json_line(event) if self.mode == "json" else event.line()
        print(text, file=self._out(), flush=True)

    @property
    def sink(self) -> Reporter | None:
        """The callback to hand the libraries; None when quiet (they then build no events)."""
        if self.mode == "quiet":
            return None
        return self._bars if self._bars is not None else self._lines

    @property
    def run_bars(self) -> bool:
        """Whether a sweep's own run bar may show too (``tune``'s rounds): not when quiet,
        nor in JSON logs."""
        return self.mode in ("bars", "text")

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Take the bars down for the block (something else draws), then carry on."""
        if self._bars is not None:
            self._bars.stop()
        yield

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
