"""Tables printed whole: at their natural width when the output is no terminal.

rich fits a table to the console's width, 80 columns when stdout is a pipe, a file or a
Slurm log, and crushes the cells beyond it to ``…``: ``20,000,000`` printed as ``20,00…``.
Read by a program or kept in a log, every digit must survive, so off a terminal a table
is printed as wide as it needs (``scalelab status`` pages its grid the same way); on a
terminal rich's own fitting stays.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["natural_width", "print_wide"]


def natural_width(view: Any) -> int:
    """The width ``view`` takes when nothing is crushed or wrapped."""
    return Console(width=100_000).measure(view).maximum


def print_wide(view: Any, console: Console | None = None) -> None:
    """Print ``view`` (a rich renderable) on ``console`` (default: stdout, no highlighting),
    at its natural width when that console is no terminal."""
    console = console or Console(highlight=False, soft_wrap=True)
    width = console.width if console.is_terminal else natural_width(view)
    if width > console.width:
        console = Console(file=console.file, width=width, highlight=False, soft_wrap=True, color_system=None)
    console.print(view)
