"""An offline W&B run says where it went and how to upload it (issue 34 item 7): one line at
the end of a run with ``wandb: true`` in offline mode, ``wandb sync <dir>``."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from scalelab.train.console.tracker import offline_note

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/scalelab: _train_util


def test_offline_note_names_the_run_folder(tmp_path):
    folder = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    run = SimpleNamespace(settings=SimpleNamespace(mode="offline", sync_dir=str(folder)),
                          dir=str(folder / "files"))
    assert offline_note(run) == f"wandb: offline run in {folder}; upload it with: wandb sync {folder}"
    # an older wandb without sync_dir: the parent of the run's files folder
    run = SimpleNamespace(settings=SimpleNamespace(mode="offline"), dir=str(folder / "files"))
    assert offline_note(run).endswith(f"wandb sync {folder}")


def test_online_runs_say_nothing(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    assert offline_note(SimpleNamespace(settings=SimpleNamespace(mode="online"), dir="x")) is None


def test_a_tracked_offline_run_ends_with_the_sync_line(tmp_path, monkeypatch, capfd):
    pytest.importorskip("wandb", reason="wandb is an optional extra (scalelab[wandb])")
    from _train_util import make_token_dir, tiny_cfg

    from scalelab.store.status import State
    from scalelab.train import train

    home = tmp_path / "wandb-home"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(home / var.lower()))
    for var in ("SCALELAB_LOG_FORMAT", "SCALELAB_QUIET"):
        monkeypatch.delenv(var, raising=False)
    data = make_token_dir(tmp_path / "tokens")
    cfg = tiny_cfg(data, 4, "train.norms_every=0", "train.checkpoint_every=100", "wandb=true")
    run_dir = tmp_path / "r"
    assert train(cfg, run_dir) == State.COMPLETED
    captured = capfd.readouterr()
    text = captured.out + captured.err
    (folder,) = (run_dir / "wandb").glob("offline-run-*")
    assert f"wandb: offline run in {folder}; upload it with: wandb sync {folder}" in text
