"""Waiting in tests: on states, never on wall-clock guesses.

A test that waits for something (a subprocess, a Slurm job, a file a run writes) polls the
state it needs and gives up only at ``CEILING_S``, a generous ceiling meant to catch a hang,
not to judge speed: a machine under heavy load makes a test slower, never red. Where the
thing waited on can tell that it is gone (a process exited, a job left the Slurm queue),
``wait_until`` fails at once with what it saw instead of waiting out the ceiling.

Importable by name from optim's tests and scalelab's: both conftest.py files put this
folder on sys.path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

CEILING_S = float(os.environ.get("SCALELAB_TEST_CEILING_S", "1800"))
"""The longest any single wait or subprocess in the suite may take (default 30 min)."""


def wait_until(predicate: Callable[[], T], what: str, *, alive: Callable[[], bool] | None = None,
               every: float = 0.2, ceiling: float = CEILING_S) -> T:
    """Poll ``predicate`` until it returns something other than None or False; return that
    (a DataFrame, say, whose truth value polars refuses to guess).

    ``alive``: optional; when it returns False the awaited process can make no more progress,
    so the predicate gets one last look and the wait fails at once if it is still false.
    """
    deadline = time.monotonic() + ceiling
    while True:
        value = predicate()
        if _done(value):
            return value
        if alive is not None and not alive():
            value = predicate()  # it may have finished between the two looks
            if _done(value):
                return value
            raise AssertionError(f"gave up waiting for {what}: it can no longer happen")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after the {ceiling:.0f} s ceiling")
        time.sleep(every)


def _done(value: object) -> bool:
    return value is not None and value is not False
