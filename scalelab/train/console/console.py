"""Where a run's lines go: stdout of rank 0, in the format and quietness of its
``LogSettings`` (the lines themselves: ``scalelab.train.console.progress_log``)."""

from __future__ import annotations

import sys

from scalelab.train.console.progress_log import (
    EvalLine,
    LogSettings,
    ProgressLine,
    eval_line,
    message_line,
    progress_line,
)

__all__ = ["Console"]


class Console:
    """Prints a run's messages, progress and eval lines (only where ``enabled``: rank 0)."""

    def __init__(self, settings: LogSettings, run_id: str, *, enabled: bool = True):
        self.settings, self.run_id, self.enabled = settings, run_id, enabled

    def _print(self, line: str) -> None:
        print(line, file=sys.stdout, flush=True)  # sys.stdout at call time (captures work)

    def message(self, text: str) -> None:
        """A one-off message: printed even when quiet."""
        if self.enabled:
            self._print(message_line(text, self.settings.format, self.run_id))

    def progress(self, line: ProgressLine) -> None:
        if self.enabled and not self.settings.quiet:
            self._print(progress_line(line, self.settings.format, self.run_id))

    def eval(self, line: EvalLine) -> None:
        if self.enabled and not self.settings.quiet:
            self._print(eval_line(line, self.settings.format, self.run_id))
