"""Optional Weights & Biases logging (``RunConfig.wandb``): never required, imported lazily.

Offline by default (``WANDB_MODE=offline`` unless the environment sets it), files under
``<run_dir>/wandb``; rank 0 only. An offline run ends with one line saying where it went and
how to upload it (``wandb: offline run in DIR; upload it with: wandb sync DIR``). What a W&B run holds:

- config: the full resolved run config (``TrackerSetup.config``: the RunConfig, derived
  quantities, seeds, run ids, the sweep and block);
- group: the sweep's name; job_type: the run's block (``train`` for a standalone run or a
  sweep without blocks); tags: ``key=value`` of the axes the run's block varies
  (``scalelab.train.console.sweep_context``);
- history: ``train/loss``, ``lr``, ``grad_norm``, ``tokens``, ``epoch`` every
  ``log_every`` steps, ``perf/tokens_per_s`` (and ``perf/mfu`` on GPU) with each progress
  line, ``val/loss`` at each eval;
- per-layer norms: one ``norms`` table (rows: step x kind x layer x param x norm, with the
  value: the schema of ``norms.parquet``) at each eval that has new norm records and at the
  end, never one metric per layer per step; the summary holds the latest.

The W&B run id is random, made on the run directory's first tracked start and kept in
``<run_dir>/wandb-id`` (written atomically): two sweeps that train the same config are two
W&B runs, and a preempted run that resumes reads the id back and continues its own W&B run
(``resume='allow'``). Steps a resumed attempt logs again after an older checkpoint (a crash
between checkpoints) are ones W&B already has: it keeps the first values.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.tables.bounded_read import LIMITS, Unreadable, read_bounded
from scalelab.errors import UserError
from scalelab.store.atomic import write_text_atomic
from scalelab.train.console.sweep_context import SweepContext, tags

__all__ = ["NORMS_COLUMNS", "STANDALONE_JOB_TYPE", "WANDB_ID_FILE", "Tracker", "TrackerSetup",
           "tracker_setup", "wandb_run_id"]

WANDB_ID_FILE = "wandb-id"
NORMS_COLUMNS = ("step", "kind", "layer", "param", "norm", "value")
"""Columns of the ``norms`` table (``scalelab.train.records.records.NORMS_SCHEMA`` less run_id)."""
STANDALONE_JOB_TYPE = "train"
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class TrackerSetup:
    """Everything ``wandb.init`` is told about the run, but its id and directory."""

    name: str
    group: str | None
    job_type: str
    tags: tuple[str, ...]
    config: dict[str, Any]


def tracker_setup(name: str, config: dict[str, Any], context: SweepContext) -> TrackerSetup:
    """The setup of a run called ``name`` with resolved ``config`` in ``context``."""
    where = {"sweep": context.sweep, "block": context.block}
    return TrackerSetup(name=name, group=context.sweep,
                        job_type=context.block or STANDALONE_JOB_TYPE, tags=tags(context),
                        config={**config, **where})


def wandb_run_id(run_dir: Path, prefix: str) -> str:
    """The W&B run id of ``run_dir``: the one kept in ``wandb-id``, else a new
    ``<prefix>-<8 random hex>`` written there first (a file that does not hold an id is
    replaced)."""
    path = Path(run_dir) / WANDB_ID_FILE
    try:  # a state-sized regular file, never a FIFO or a device (analysis.tables.bounded_read)
        found = read_bounded(path, LIMITS["state"]).data.decode("utf-8", "replace").strip()
    except (FileNotFoundError, NotADirectoryError, Unreadable):
        found = ""
    if _ID_RE.match(found):
        return found
    new = f"{prefix}-{secrets.token_hex(4)}"
    write_text_atomic(path, new + "\n")
    return new


class Tracker:
    """Forwards to a wandb run when enabled; every method is a no-op otherwise."""

    def __init__(self, enabled: bool, *, run_dir: Path, run_id: str,
                 setup: TrackerSetup | None = None):
        """``setup`` is required when ``enabled``."""
        self._run: Any = None
        if not enabled:
            return
        assert setup is not None, "an enabled Tracker needs its TrackerSetup"
        try:
            import wandb
        except ImportError:
            raise UserError(
                "wandb is not installed (pip install 'scalelab[wandb]')", key="wandb"
            ) from None
        self._wandb = wandb
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        self.id = wandb_run_id(run_dir, run_id)
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "scalelab"),
            id=self.id,
            name=setup.name,
            group=setup.group,
            job_type=setup.job_type,
            tags=list(setup.tags),
            dir=str(run_dir),
            config=setup.config,
            resume="allow",
        )

    @property
    def enabled(self) -> bool:
        return self._run is not None

    def log(self, values: dict[str, float], step: int) -> None:
        if self._run is not None:
            self._run.log(values, step=step)

    def norms(self, rows: list[dict[str, Any]], step: int) -> None:
        """One ``norms`` table of ``rows`` (norm records, ``NORMS_COLUMNS``) at ``step``."""
        if self._run is None or not rows:
            return
        table = self._wandb.Table(columns=list(NORMS_COLUMNS),
                                  data=[[r[c] for c in NORMS_COLUMNS] for r in rows])
        self._run.log({"norms": table}, step=step)

    def finish(self, exit_code: int = 0) -> str | None:
        """End the W&B run; offline, the line that says where it went and how to sync it
        (``offline_note``), else None."""
        if self._run is None:
            return None
        note = offline_note(self._run)
        self._run.finish(exit_code=exit_code)
        self._run = None
        return note


def offline_note(run: Any) -> str | None:
    """``wandb: offline run in DIR; upload it with: wandb sync DIR`` for an offline run (DIR:
    its ``offline-run-*`` folder, the parent of ``run.dir``'s ``files``), else None."""
    settings = getattr(run, "settings", None)
    mode = getattr(settings, "mode", None) or os.environ.get("WANDB_MODE", "")
    offline = str(mode) in ("offline", "dryrun") or bool(getattr(settings, "_offline", False))
    if not offline:
        return None
    where = getattr(settings, "sync_dir", None)
    if not where:
        files = Path(getattr(run, "dir", "") or "")
        where = files.parent if files.name == "files" else files
    return f"wandb: offline run in {where}; upload it with: wandb sync {where}"
