"""Errors the CLI turns into one line and an exit code (0 ok, 1 failure, 2 bad input)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
EXIT_PREEMPTED = 75
"""Stopped on SIGTERM/SIGUSR1 after a checkpoint; resumable (sysexits EX_TEMPFAIL)."""


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})
"""Every character ``str.splitlines`` breaks at -> its escape (``\\n``, ``\\x85``, ...)."""


class UserError(Exception):
    """Bad input: the CLI prints ``str(err)`` on one line and exits with code 2.

    ``str(err)`` is ``file: key: message`` and always one line: line breaks that come in
    with the input (a YAML key or an override holding a newline) are shown escaped."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        where = ": ".join(p for p in (file, key) if p)
        text = f"{where}: {message}" if where else message
        super().__init__(text.translate(_LINE_BREAKS))
        self.file, self.key, self.detail = file, key, message


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``''`` when nothing is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
