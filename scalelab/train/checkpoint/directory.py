"""Checkpoints: ``checkpoint/step-<NNNNNNNNN>/{state.pt, manifest.json}``, verified on load.

Writing (``save_checkpoint``), in this order:

1. ``.tmp-step-<N>-<pid>/state.pt``: ``torch.save`` through a hashing stream (size and
   sha256 computed as the bytes go out, never read back), flushed and fsynced;
2. ``.tmp-.../manifest.json`` LAST (``scalelab.train.checkpoint.manifest``: format, step, and each
   file's size and sha256), fsynced; then the temporary directory is fsynced;
3. the directory is renamed to ``step-<N>`` (atomic) and the parent fsynced;
4. pruning: of the checkpoints *older* than ``N``, all but the newest ``keep - 1`` are
   removed. A checkpoint newer than ``N`` is never pruned, so the intact checkpoint a
   run fell back to is never pruned on account of a corrupt newer one.

A sharded checkpoint (``train.parallelism: fsdp``; ``scalelab.train.checkpoint.training_state``) goes
through the same steps in pieces: ``begin_checkpoint`` makes the temporary directory, every
rank writes its DCP file into it (``scalelab.train.checkpoint.dcp``: ``__<rank>_0.distcp``, fsynced,
and ``.metadata``), rank 0 adds ``state.pt`` with ``write_state`` (the model and optimizer
are not in it), the ranks hash the DCP files, and ``commit_checkpoint`` writes the manifest
of every file, renames and prunes. ``is_sharded`` tells the two layouts apart.

A crash at any point is recoverable: before step 3 only a ``.tmp-*`` directory exists
(removed by the next save or load; the older checkpoints are untouched); after it the
checkpoint is complete; a crash while pruning leaves extra old checkpoints. Damage after
the fact (a truncated or bit-flipped file, a filesystem that lost unsynced data) is
caught on load by the manifest.

Loading (``find_checkpoint``/``load_checkpoint``, the run's resume) walks the ``step-*``
directories newest first and takes the first that verifies against its manifest and
unpickles; each one skipped is reported in ONE line through ``log`` (e.g. ``checkpoint
step-000000128 is corrupt (state.pt: 1000 bytes, manifest says 2345678); resuming from
step-000000064``) and, with ``set_aside``, renamed ``corrupt-step-<N>`` (never deleted; out
of the way of later saves and their pruning). ``load_final`` (a trained run's final weights: ensemble
members, distillation teachers) takes the newest checkpoint only and raises a one-line
``UserError`` when it is corrupt, since an older one is not the final model; a sharded
one's model is read whole into ``state['model']``, so callers see one layout.

Checkpoints never execute code: the state is tensors and primitives only (model and
optimizer state dicts, the number of completed steps, ``scalelab.train.checkpoint.rng`` RNG states,
the records position) and every load is ``torch.load(..., weights_only=True)``; a pickle
that asks for anything else (e.g. ``os.system``) is refused as corrupt. DCP's own
``.metadata`` pickle goes through an allowlisting unpickler (``scalelab.train.checkpoint.dcp``), with
the same outcome for a crafted one. Checkpoints of format 1 (before manifests, pickled
numpy RNG tuples) are refused the same way: a resume reports them as corrupt ("no
manifest.json") and starts over; ``load_final`` names them.

Test hook: ``SCALELAB_TEST_CHECKPOINT_PAUSE=<step>:<marker path>`` (``TEST_PAUSE_ENV``)
makes the write of checkpoint ``step`` stop after its first bytes of ``state.pt`` are on
disk, create the marker file and sleep (at most 10 minutes, then exit 70), so a test can
SIGKILL the run inside a checkpoint write without timing. Unset: no effect.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import shutil
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scalelab.errors import UserError
from scalelab.store.atomic import disk_full
from scalelab.store.layout import CHECKPOINT_FOLDER
from scalelab.train.checkpoint.manifest import (
    DCP_METADATA,
    MANIFEST_FILE,
    FileDigest,
    HashingWriter,
    verify,
    write_manifest,
)
from scalelab.train.checkpoint.rng import rng_state, set_rng_state

__all__ = [
    "CHECKPOINT_DIR",
    "STATE_FILE",
    "TEST_PAUSE_ENV",
    "Skipped",
    "begin_checkpoint",
    "commit_checkpoint",
    "fallback_message",
    "find_checkpoint",
    "is_sharded",
    "latest_step",
    "load_checkpoint",
    "load_final",
    "read_state",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "write_state",
]

CHECKPOINT_DIR = CHECKPOINT_FOLDER
STATE_FILE = "state.pt"
TEST_PAUSE_ENV = "SCALELAB_TEST_CHECKPOINT_PAUSE"
_STEP_RE = re.compile(r"^step-(\d{9})$")

Log = Callable[[str], None]


@dataclass(frozen=True)
class Skipped:
    """A checkpoint passed over on load, and why."""

    name: str  # 'step-000000128'
    reason: str  # 'state.pt: 1000 bytes, manifest says 2345678'


# ----------------------------------------------------------------------- layout
def _root(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def _name(step: int) -> str:
    return f"step-{step:09d}"


def _step_dirs(root: Path) -> list[int]:
    """Steps of every ``step-*`` directory, complete or not, ascending."""
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for c in root.iterdir() if (m := _STEP_RE.match(c.name)))


def is_sharded(directory: str | Path) -> bool:
    """True for a sharded checkpoint: model and optimizer in DCP files (``scalelab.train.checkpoint.dcp``)."""
    return (Path(directory) / DCP_METADATA).is_file()


def _remove_tmp(root: Path) -> None:
    if root.is_dir():
        for child in root.iterdir():
            if child.name.startswith(".tmp-"):
                shutil.rmtree(child, ignore_errors=True)


def _set_aside(path: Path, label: str) -> Path | None:
    """Rename ``step-N`` to ``<label>-step-N`` (``.1``, ``.2``, ... when taken); None when
    it is already gone (another rank moved it)."""
    for n in range(1000):
        target = path.with_name(f"{label}-{path.name}" + (f".{n}" if n else ""))
        if target.exists():
            continue
        try:
            os.rename(path, target)
        except FileNotFoundError:
            return None
        except OSError:  # target appeared meanwhile (a racing rank): try the next name
            continue
        return target
    return None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------- writing
def _pause_hook(step: int) -> Callable[[HashingWriter], None] | None:
    """The ``TEST_PAUSE_ENV`` hook for the write of ``step`` (None, always, when unset)."""
    spec = os.environ.get(TEST_PAUSE_ENV)
    if not spec:
        return None
    at, _, marker = spec.partition(":")
    if int(at) != step:
        return None

    def pause(writer: HashingWriter) -> None:
        writer.flush()
        Path(marker).write_text(str(os.getpid()))
        time.sleep(600)
        os._exit(70)

    return pause


def _write_state(path: Path, state: dict[str, Any], step: int) -> FileDigest:
    with open(path, "wb") as fh:
        writer = HashingWriter(fh, after_write=_pause_hook(step))
        torch.save(state, writer)
        fh.flush()
        os.fsync(fh.fileno())
    return writer.digest()


def _prune(root: Path, step: int, keep: int) -> None:
    """Remove the checkpoints older than ``step`` beyond the newest ``keep - 1`` of them;
    never one newer than ``step``."""
    older = [s for s in _step_dirs(root) if s < step]
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(root / _name(old), ignore_errors=True)


def begin_checkpoint(run_dir: str | Path, step: int) -> Path:
    """Create and return the temporary directory the checkpoint of ``step`` is written into
    (stale ``.tmp-*`` directories of killed writes are removed first)."""
    root = _root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    _remove_tmp(root)
    tmp = root / f".tmp-{_name(step)}-{os.getpid()}"
    tmp.mkdir()
    return tmp


def write_state(tmp: Path, state: dict[str, Any]) -> FileDigest:
    """``tmp/state.pt`` (tensors and primitives; ``state['step']`` is its step), hashed as
    written, fsynced."""
    return _write_state(tmp / STATE_FILE, state, int(state["step"]))


def commit_checkpoint(
    run_dir: str | Path, tmp: Path, step: int, files: Mapping[str, FileDigest], keep: int = 2
) -> Path:
    """Finish a checkpoint whose ``files`` (every file in ``tmp``, fsynced) are written: the
    manifest last, the atomic rename to ``step-<N>``, then pruning. Removes ``tmp`` on failure."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    root = _root(run_dir)
    final = root / _name(step)
    try:
        write_manifest(tmp, step, files)
        _fsync_dir(tmp)
        if final.exists():  # one a resume passed over (corrupt): set aside, not deleted
            _set_aside(final, "superseded")
        os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(root, step, keep)
    return final


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` (tensors and primitives) as the checkpoint of ``step``; keep the
    newest ``keep`` up to it (see the module docstring for the order of writes)."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    tmp = begin_checkpoint(run_dir, step)
    try:
        digest = _write_state(tmp / STATE_FILE, state, step)
    except BaseException as err:
        # torch.save on a full disk says "unexpected pos ..." with no errno: judged by the
        # free space while the partial file still fills it, then one OSError naming the step
        full = isinstance(err, Exception) and not getattr(err, "errno", None) and disk_full(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            where = str(_root(run_dir) / _name(step) / STATE_FILE)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), where) from err
        raise
    return commit_checkpoint(run_dir, tmp, step, {STATE_FILE: digest}, keep)


# ----------------------------------------------------------------------- reading
def _gist(err: BaseException) -> str:
    """The informative line of an exception message (torch's are paragraphs)."""
    boiler = ("Weights only load failed", "Check the documentation", "Please file an issue",
              "Re-running `torch.load`")
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(boiler)]
    text = (useful or lines or [type(err).__name__])[0]
    return text if len(text) <= 200 else text[:197] + "..."


def _unpickle(path: Path, map_location: Any) -> dict[str, Any] | str:
    """The dict in ``path`` via ``torch.load(weights_only=True)``, or why it cannot be had."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": one line follows
            state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        return f"{path.name}: pickle refused by weights_only=True: {_gist(err)}"
    except (MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - truncated zip, bad magic, EOF, ...: not a checkpoint
        return f"{path.name}: does not load: {type(err).__name__}: {_gist(err)}"
    if not isinstance(state, dict):
        return f"{path.name}: holds a {type(state).__name__}, not a dict"
    return state


def _read(directory: Path, step: int, map_location: Any) -> dict[str, Any] | str:
    """The verified state of one checkpoint directory, or why it is corrupt."""
    problem = verify(directory, step)
    if problem is not None:
        return problem
    if is_sharded(directory):  # its DCP index must unpickle safely too
        from scalelab.train.checkpoint import dcp

        problem = dcp.check_metadata(directory)
        if problem is not None:
            return problem
    return _unpickle(directory / STATE_FILE, map_location)


def fallback_message(skipped: list[Skipped], resumed: str | None) -> str:
    """One line: which checkpoints were skipped and why, and what the run does instead."""
    then = f"resuming from {resumed}" if resumed else "no intact checkpoint: starting from scratch"
    if len(skipped) == 1:
        return f"checkpoint {skipped[0].name} is corrupt ({skipped[0].reason}); {then}"
    what = ", ".join(f"{s.name} ({s.reason})" for s in skipped)
    return f"checkpoints {what} are corrupt; {then}"


def _stderr(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)


def latest_step(run_dir: str | Path) -> int | None:
    """The highest step whose checkpoint directory holds a manifest (so was written
    completely; ``load_checkpoint`` still verifies it), or None."""
    root = _root(run_dir)
    steps = [s for s in _step_dirs(root) if (root / _name(s) / MANIFEST_FILE).is_file()]
    return steps[-1] if steps else None


def find_checkpoint(
    run_dir: str | Path, map_location: Any = "cpu", *, log: Log = _stderr, set_aside: bool = False
) -> tuple[Path, dict[str, Any]] | None:
    """``(directory, state)`` of the newest intact checkpoint, or None when there is none.

    Corrupt checkpoints (see the module docstring) are skipped, newest first; when any
    was, ``log`` gets one line naming them and the step resumed from (or that none is
    left). ``set_aside``: rename each skipped one ``corrupt-step-<N>`` (the run's own
    resume, on one rank), so no later save prunes an intact one on its account.
    ``state`` is ``state.pt``'s dict; a sharded checkpoint (``scalelab.train.checkpoint.dcp``) keeps
    the model and optimizer in its other files.
    """
    root = _root(run_dir)
    _remove_tmp(root)
    skipped: list[Skipped] = []
    for step in reversed(_step_dirs(root)):
        directory = root / _name(step)
        got = _read(directory, step, map_location)
        if isinstance(got, dict):
            if skipped:
                log(fallback_message(skipped, directory.name))
            return directory, got
        skipped.append(Skipped(directory.name, got))
        if set_aside:
            _set_aside(directory, "corrupt")
    if skipped:
        log(fallback_message(skipped, None))
    return None


def load_checkpoint(
    run_dir: str | Path, map_location: Any = "cpu", *, log: Log = _stderr, set_aside: bool = False
) -> dict[str, Any] | None:
    """The newest intact checkpoint's ``state.pt`` dict, or None (``find_checkpoint``)."""
    found = find_checkpoint(run_dir, map_location, log=log, set_aside=set_aside)
    return None if found is None else found[1]


def read_state(directory: Path, map_location: Any = "cpu") -> dict[str, Any]:
    """``state.pt`` of a checkpoint another rank has verified (weights-only, not re-hashed)."""
    got = _unpickle(Path(directory) / STATE_FILE, map_location)
    if isinstance(got, str):
        raise UserError(f"corrupt checkpoint ({got})", file=str(directory))
    return got


def load_final(run_dir: str | Path, map_location: Any = "cpu") -> tuple[int, dict[str, Any]] | None:
    """``(step, state)`` of the newest checkpoint, or None when the run has none.

    Raises a one-line ``UserError`` naming the checkpoint when it is corrupt (or holds a
    pickle that would run code): an older checkpoint is not the run's final model. A
    sharded checkpoint's model is read whole into ``state['model']`` (one process).
    """
    root = _root(run_dir)
    steps = _step_dirs(root)
    if not steps:
        return None
    directory = root / _name(steps[-1])
    got = _read(directory, steps[-1], map_location)
    if isinstance(got, str):
        raise UserError(f"corrupt checkpoint ({got})", file=str(directory))
    if is_sharded(directory):
        from scalelab.train.checkpoint import dcp  # torch.distributed.checkpoint: only when it is one

        got = {**got, "model": dcp.read(directory, "model")}
    return steps[-1], got
