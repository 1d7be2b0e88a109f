"""optim's test suite runs on its own: ``pip install ./optim[test]`` then ``pytest optim/tests``
(no scalelab needed). pytest puts this folder on sys.path, so the helpers ``_ranks``,
``_waits`` and ``_setup`` import by name."""

from _setup import pytest_collection_modifyitems, set_threads  # noqa: F401  (the hook)

set_threads()
