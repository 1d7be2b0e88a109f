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
