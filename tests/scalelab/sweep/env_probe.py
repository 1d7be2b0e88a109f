"""A train target that records its environment (the launcher's ``env`` reaching a job).

``env_probe:train`` writes the variables named ``SCALELAB_PROBE_*`` to ``<run>/env.json``
and ends COMPLETED.
"""

from __future__ import annotations

import os
from pathlib import Path

from scalelab.store.atomic import write_json_atomic
from scalelab.store.status import State, update_status

PREFIX = "SCALELAB_PROBE_"
TARGET = "env_probe:train"


def train(cfg, run_dir) -> State:
    seen = {k: v for k, v in os.environ.items() if k.startswith(PREFIX)}
    write_json_atomic(Path(run_dir) / "env.json", seen)
    update_status(run_dir, State.COMPLETED)
    return State.COMPLETED
