"""Run ``scalelab ARGV`` in this process and return its exit code: the CLI always ends with
SystemExit (``pytest.raises`` fails the test if it does not). Output: the caller's capsys.
Arguments are turned into strings, so paths may be passed as they are."""

from __future__ import annotations

import pytest


def exit_code(argv) -> int:
    from scalelab.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    return exc.value.code


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """``exit_code`` with the output: (exit code, 0 for None; stdout; stderr)."""
    code = exit_code(argv)
    out, err = capsys.readouterr()
    return int(code or 0), out, err
