"""``train.activation_checkpointing``: same loss and gradients, fewer bytes kept for backward.

Exactness: recomputation repeats the same CPU ops on the same inputs, so 'block' and
'selective' give the loss and every gradient of 'none' bitwise (fp32 and bf16 autocast).

Bytes (cpu-1m with GQA, batch 2 x 64 tokens, fp32), measured two ways
(``_activation_bytes``): ``live`` (storages born in the forward and still alive after it:
what backward keeps, checkpoint inputs and the selective cache included) drops from
none > selective > block; ``hooked`` (packed through saved_tensors_hooks, which do not see
inside checkpointed regions, and which count the weights that matmuls save) drops to the
part outside the blocks. 'selective' keeps exactly what its definition says on top of
'block': per block, the seven projection outputs and the attention kernel's outputs.
"""

from __future__ import annotations

import pytest
import torch
from _activation_bytes import hooked_bytes, live_bytes
from _train_util import assert_tensors_equal, make_token_dir, tiny_cfg

from scalelab.config import ModelConfig
from scalelab.model import build_model, resolve_shape
from scalelab.model.checkpointing import apply_activation_checkpointing
from scalelab.store.status import State
from scalelab.train import train
from scalelab.train.step import lm_loss

MODEL = ModelConfig(preset="cpu-1m", n_heads=4, n_kv_heads=2)  # GQA: the repeats recomputed
B, T, V = 2, 64, 256


def _run(mode: str, autocast: bool = False):
    model = build_model(MODEL, V)
    model.init_weights(seed=0)
    apply_activation_checkpointing(model, mode)
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randint(0, V, (B, T), generator=g) for _ in range(2))

    def forward() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return lm_loss(model, x, y)

    hooked, loss = hooked_bytes(forward)
    del loss
    live, loss = live_bytes(forward)
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return loss.detach(), grads, hooked, live


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_checkpointed_loss_and_gradients_are_bitwise_those_of_none(autocast):
    loss, grads, _, _ = _run("none", autocast)
    for mode in ("block", "selective"):
        got_loss, got_grads, _, _ = _run(mode, autocast)
        assert torch.equal(got_loss, loss), mode
        assert_tensors_equal(got_grads, grads, mode)


def test_saved_bytes_drop_and_selective_keeps_what_it_says():
    got = {mode: _run(mode)[2:] for mode in ("none", "block", "selective")}
    for mode, (hooked, live) in got.items():
        print(f"{mode:9s}: live {live / 2**20:.3f} MiB, "
              f"saved_tensors_hooks {hooked / 2**20:.3f} MiB")
    (h_none, l_none), (h_block, l_block), (h_sel, l_sel) = got.values()
    assert l_none > l_sel > l_block
    assert l_block < 0.2 * l_none
    assert h_block == h_sel < h_none
    s = resolve_shape(MODEL)
    q, kv = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    tokens = B * T
    projections = tokens * (q + 2 * kv + s.d_model + 2 * s.d_ff + s.d_model)  # wq..w_down
    attention = B * s.n_heads * T * (s.head_dim + 1)  # output and log-sum-exp
    assert l_sel - l_block == s.n_layers * (projections + attention) * 4  # fp32 bytes


def test_training_with_checkpointing_matches_none_bitwise(tmp_path):
    data = make_token_dir(tmp_path / "tokens")
    ref = tiny_cfg(data, 3, "train.norms_every=1")
    assert train(ref, tmp_path / "none") == State.COMPLETED
    from _train_util import final_state

    want = final_state(tmp_path / "none")
    for mode in ("block", "selective"):
        cfg = tiny_cfg(data, 3, "train.norms_every=1", f"train.activation_checkpointing={mode}")
        assert train(cfg, tmp_path / mode) == State.COMPLETED
        got = final_state(tmp_path / mode)
        assert_tensors_equal(got["model"], want["model"], f"{mode}.model")
        assert_tensors_equal(got["optimizer"]["state"], want["optimizer"]["state"], mode)


def test_unknown_mode_and_double_application_are_refused():
    model = build_model(MODEL, V)
    with pytest.raises(ValueError, match="unknown activation_checkpointing"):
        apply_activation_checkpointing(model, "everything")
    apply_activation_checkpointing(model, "block")
    assert [n for n, _ in model.named_parameters()] == [
        n for n, _ in build_model(MODEL, V).named_parameters()]  # names unchanged
    with pytest.raises(ValueError, match="already applied"):
        apply_activation_checkpointing(model, "selective")
