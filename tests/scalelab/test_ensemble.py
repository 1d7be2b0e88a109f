"""Ensemble combination (Kim et al. 2025, arXiv 2509.14786: logits averaged before softmax + CE)
against direct computations written out token by token, and the sweep-level evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _waits import CEILING_S

from scalelab.ensemble.combine import PrefixEnsemble, ensemble_log_probs, ensemble_nll

# fp32 round-off over V <= 11 classes: 1e-5 absolute on per-token NLL of O(1) nats.
TOL = 1e-5


def _direct_logit_avg_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """float64, by hand: z = mean_k z_k; nll = logsumexp(z) - z[y]."""
    K, B, T, V = logits.shape
    out = np.empty((B, T))
    for b in range(B):
        for t in range(T):
            z = logits[:, b, t, :].mean(axis=0)
            m = z.max()
            out[b, t] = m + math.log(np.exp(z - m).sum()) - z[targets[b, t]]
    return out


def _direct_prob_avg_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """float64, by hand: p = mean_k softmax(z_k); nll = -log p[y]."""
    K, B, T, V = logits.shape
    out = np.empty((B, T))
    for b in range(B):
        for t in range(T):
            p = np.zeros(V)
            for k in range(K):
                e = np.exp(logits[k, b, t] - logits[k, b, t].max())
                p += e / e.sum() / K
            out[b, t] = -math.log(p[targets[b, t]])
    return out


@pytest.fixture
def case():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 2, 3, 11, generator=g) * 3  # [K, B, T, V]
    targets = torch.randint(0, 11, (2, 3), generator=g)  # [B, T]
    return logits, targets


def test_logit_averaged_loss_equals_direct_computation(case):
    logits, targets = case
    want = _direct_logit_avg_nll(logits.double().numpy(), targets.numpy())
    got = ensemble_nll(logits, targets, "logits")
    np.testing.assert_allclose(got.numpy(), want, atol=TOL, rtol=0)
    # And it is not the probability average (the two differ by far more than TOL here).
    other = _direct_prob_avg_nll(logits.double().numpy(), targets.numpy())
    assert np.abs(want - other).max() > 1e-2


def test_prob_averaged_loss_equals_direct_computation(case):
    logits, targets = case
    want = _direct_prob_avg_nll(logits.double().numpy(), targets.numpy())
    got = ensemble_nll(logits, targets, "probs")
    np.testing.assert_allclose(got.numpy(), want, atol=TOL, rtol=0)


def test_single_member_is_plain_cross_entropy(case):
    logits, targets = case
    ce = torch.nn.functional.cross_entropy(logits[0].flatten(0, 1), targets.flatten(), reduction="none")
    for method in ("logits", "probs"):
        np.testing.assert_allclose(ensemble_nll(logits[:1], targets, method).flatten().numpy(), ce.numpy(), atol=TOL)


@pytest.mark.parametrize("method", ["logits", "probs"])
def test_prefix_ensemble_matches_stacked(case, method):
    logits, targets = case
    prefix = PrefixEnsemble(method)
    for k in range(logits.shape[0]):
        prefix.add(logits[k])
        want = ensemble_nll(logits[: k + 1], targets, method)
        np.testing.assert_allclose(prefix.nll(targets).numpy(), want.numpy(), atol=TOL)
    lp = ensemble_log_probs(logits, method)
    np.testing.assert_allclose(lp.exp().sum(-1).numpy(), 1.0, atol=1e-6)  # normalised


def test_probability_average_obeys_jensen(case):
    """-log mean_k p_k <= mean_k -log p_k for every token (a mixture beats its mean member)."""
    logits, targets = case
    ens = ensemble_nll(logits, targets, "probs")
    members = torch.stack([ensemble_nll(logits[k : k + 1], targets, "probs") for k in range(4)])
    assert bool((ens <= members.mean(0) + 1e-6).all())


def test_unknown_method_is_rejected(case):
    with pytest.raises(ValueError, match="not one of"):
        ensemble_nll(case[0], case[1], "median")


def _member_run(root, k: int, dataset: str, *, preset: str = "cpu-50k"):
    from scalelab import strict
    from scalelab.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from scalelab.identity import run_dir_name
    from scalelab.model import build_model
    from scalelab.store.atomic import write_yaml_atomic
    from scalelab.store.status import State, update_status
    from scalelab.train.checkpoint.directory import save_checkpoint

    cfg = RunConfig(
        name=f"ens_member={k}",
        model=ModelConfig(preset=preset),
        data=DataConfig(dataset=dataset, seq_len=8, val_tokens=300),
        train=TrainConfig(batch_size=4, eval_batches=3),
        member=k,
    )
    run_dir = root / "runs" / run_dir_name(cfg)
    model = build_model(cfg.model, vocab_size=32)
    model.init_weights(seed=k, std=0.3)
    write_yaml_atomic(run_dir / "config.yaml", strict.to_dict(cfg))
    save_checkpoint(run_dir, 7, {"model": model.state_dict(), "step": 7})
    update_status(run_dir, State.COMPLETED)
    return run_dir, model


def test_sweep_evaluation_writes_k_1_to_m_rows_equal_to_direct_computation(tmp_path, monkeypatch):
    import polars as pl

    from scalelab.config import DataConfig
    from scalelab.data import open_dataset, val_batches
    from scalelab.data.format import write_token_dir
    from scalelab.ensemble.evaluate import evaluate_sweep, find_groups

    corpus = str(write_token_dir(tmp_path / "c", np.random.default_rng(0).integers(0, 32, 3000), vocab_size=32,
                                 tokenizer_id="t", eos_id=None, n_documents=1, sources=["rng"]))
    members = [_member_run(tmp_path, k, corpus) for k in range(3)]
    # A diverged run and a run with another shape are not members of the group.
    from scalelab.store.status import State, update_status

    diverged = _member_run(tmp_path, 3, corpus)[0]
    (diverged / "status.json").unlink()  # planted: a COMPLETED run never moves back
    update_status(diverged, State.DIVERGED)
    _member_run(tmp_path, 0, corpus, preset="cpu-100k")
    (group,) = find_groups(tmp_path)
    assert group.member_ids == (0, 1, 2)

    table, path = evaluate_sweep(tmp_path, methods=("logits", "probs"), n_batches=3, batch_size=4, device="cpu")
    assert path == tmp_path / "ensembles" / "evals.parquet"
    assert set(table.columns) >= {"run_id", "step", "tokens", "split", "loss", "members", "method"}
    assert pl.read_parquet(path).equals(table)
    ds = open_dataset(DataConfig(dataset=corpus, seq_len=8, val_tokens=300))
    batches = list(val_batches(ds, 8, 4, 3))
    with torch.no_grad():
        logits = [torch.stack([m(x) for _, m in members]) for x, _ in batches]  # [K, B, T, V] each
    for method in ("logits", "probs"):
        for k in (1, 2, 3):
            want = torch.cat([ensemble_nll(z[:k], y, method).flatten() for z, (_, y) in zip(logits, batches)]).mean()
            row = table.filter((pl.col("method") == method) & (pl.col("members") == k))
            assert row.height == 1 and row["step"][0] == 7 and row["split"][0] == "val"
            assert row["loss"][0] == pytest.approx(float(want), abs=TOL)
    alone = table.filter(pl.col("method") == "member").sort("member")
    assert alone["member"].to_list() == [0, 1, 2]
    first = table.filter((pl.col("method") == "logits") & (pl.col("members") == 1))["loss"][0]
    assert alone["loss"][0] == pytest.approx(first, abs=TOL)
    # Re-evaluating replaces the group's rows instead of appending duplicates; one-row
    # chunks (as a 128k vocab would need on a GPU) give the same losses.
    import scalelab.ensemble.evaluate as ev

    monkeypatch.setattr(ev, "CHUNK_ELEMENTS", 8 * 32)
    again, _ = evaluate_sweep(tmp_path, methods=("logits", "probs"), n_batches=3, batch_size=4, device="cpu")
    assert again.height == table.height
    np.testing.assert_allclose(again.sort(["method", "members", "member"])["loss"].to_numpy(),
                               table.sort(["method", "members", "member"])["loss"].to_numpy(), atol=TOL)


def _corpus(tmp_path) -> str:
    from scalelab.data.format import write_token_dir

    return str(write_token_dir(tmp_path / "c", np.random.default_rng(0).integers(0, 32, 3000), vocab_size=32,
                               tokenizer_id="t", eos_id=None, n_documents=1, sources=["rng"]))


def _make_malicious(run_dir, marker):
    """Replace the member's checkpoint by one whose pickle calls os.system (manifest matching)."""
    import shutil

    from _train_util import write_malicious_checkpoint

    shutil.rmtree(run_dir / "checkpoint")
    return write_malicious_checkpoint(run_dir, 7, marker)


def test_a_member_checkpoint_that_would_run_code_is_refused_in_one_line(tmp_path):
    from scalelab.ensemble.load import load_trained
    from scalelab.errors import UserError

    run_dir, _ = _member_run(tmp_path, 0, _corpus(tmp_path))
    assert load_trained(run_dir).step == 7
    marker = tmp_path / "code-ran"
    state_file = _make_malicious(run_dir, marker)
    with pytest.raises(UserError) as err:
        load_trained(run_dir)
    msg = str(err.value)
    assert "\n" not in msg and not marker.exists()
    assert msg.startswith(f"{state_file.parent}: corrupt checkpoint (state.pt: pickle refused by weights_only=True")


def test_ensemble_cli_exits_2_with_one_line_on_a_code_running_member(tmp_path):
    import subprocess
    import sys

    corpus = _corpus(tmp_path)
    run_dirs = [_member_run(tmp_path, k, corpus)[0] for k in range(2)]
    marker = tmp_path / "code-ran"
    state_file = _make_malicious(run_dirs[1], marker)
    proc = subprocess.run([sys.executable, "-m", "scalelab", "ensemble", str(tmp_path), "--device", "cpu"],
                          capture_output=True, text=True, timeout=CEILING_S, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"error: {state_file.parent}: corrupt checkpoint (state.pt: pickle refused")
    assert not marker.exists()
