"""``scalelab`` command line (README.md, "Common commands").

Exit codes: 0 ok, 1 failure, 2 bad input. An ``OSError`` that reaches the top (a path
that cannot be written, a file where a directory belongs, a full disk) is bad input too:
one line naming the path and what to do (``errors.os_error_message``), exit 2. So is a
library's own error that quotes a full disk's errno in its text (polars' "(os error 28)",
pyarrow's "[errno 28]": ``errors.disk_full_error``); the atomic writers
(``scalelab.store.atomic``) turn the ones that do not quote it into ENOSPC naming the file.
An allocation that fails (``MemoryError``, torch's allocator errors) is one line too
(``errors.out_of_memory_message``), exit 2: sizes multiplied past the machine's memory.

Each verb lives in its own module and registers on ``scalelab.cli.app.app``; add a new
module's name to ``_VERB_MODULES``.
"""

from __future__ import annotations

import importlib
import sys

from scalelab.cli.app import app
from scalelab.errors import (
    EXIT_BAD_INPUT,
    UserError,
    disk_full_error,
    os_error_message,
    out_of_memory_message,
)

_VERB_MODULES: tuple[str, ...] = ("train", "data", "ensemble", "sweep", "fit", "report", "explain", "tune", "demo",
                                  "compare", "next", "transfer")

for _name in _VERB_MODULES:
    importlib.import_module(f"scalelab.cli.{_name}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. A verb may return an int exit code; bad input is
    one line on stderr and exit code 2, never a traceback. The program is named
    ``scalelab`` however it was started (``python -m scalelab`` too): in usage lines and
    in the shell-completion variable ``_SCALELAB_COMPLETE``."""
    import click
    import typer

    try:  # typer >= 0.2x raises its vendored click's exceptions, not click's
        from typer._click.exceptions import UsageError as TyperUsageError
    except ImportError:
        TyperUsageError = click.exceptions.UsageError
    usage = (click.exceptions.UsageError, TyperUsageError)
    aborts = (click.exceptions.Abort, typer.Abort)
    exits = (click.exceptions.Exit, typer.Exit)

    try:
        result = app(args=argv, prog_name="scalelab", standalone_mode=False)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except usage as err:
        if message := err.format_message():  # empty: no arguments, the help was printed
            print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except aborts:
        sys.exit(1)
    except BrokenPipeError:  # `scalelab ... | head`: the reader left; say nothing more
        _silence_stdout()
        sys.exit(0)
    except OSError as err:
        print(f"error: {os_error_message(err)}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except exits as err:
        sys.exit(err.exit_code)
    except Exception as err:  # a full disk or memory; anything else is a bug, shown as one
        full = disk_full_error(err)
        line = os_error_message(full) if full is not None else out_of_memory_message(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(result if isinstance(result, int) else 0)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit cannot raise again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
