"""scalelab's pytest setup: the same as optim's own suite (optim/tests/_setup.py), whose
folder also holds the helpers both suites share (``_ranks``: N gloo ranks with a ceiling;
``_waits``: waiting on states, never on sleeps)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "optim" / "tests"))

from _setup import pytest_collection_modifyitems, set_threads  # noqa: E402,F401  (the hook)

set_threads()
