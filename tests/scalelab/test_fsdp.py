"""``train.parallelism: fsdp`` on 2 gloo CPU ranks: FSDP2 == one process, and DCP resume.

One pair of spawned ranks runs every 2-rank job (``_fsdp_jobs``); the single-process
references run in this process. cpu-50k, 8 steps of 8 sequences, micro-batches of 2 (so
FSDP reduce-scatters after every micro-batch).

1 process vs 2 ranks. Not bitwise: the gradient is summed in another order (each rank's
micro-batch mean reduce-scattered vs one process accumulating all micro-batches; the norm
for clipping is a sum of per-shard sums of squares). With fp32 compute step 1's loss (the
same init, no update yet) is exact. Afterwards the optimizers amplify last-bit gradient
differences differently, so the tolerances are per case, each a few times the floor that a
pure summation reorder *inside one process* shows (micro_batch_size 4 instead of 2),
measured at this config (max |loss difference| over the 8 steps; step 2 = one update):

=================  ==========  ==========  ==============  ==========  ==========
case               2 ranks     2 ranks     reorder floor   tolerance   tolerance
                   all steps   step 2      (1 process)     step 2      all steps
=================  ==========  ==========  ==============  ==========  ==========
AdamW fp32         0           0           —               1e-5        1e-5
Muon fp32          1.2e-4      0           1.1e-4          1e-4        1e-3
Scion fp32         1.3e-2      1.3e-5      9.3e-3          1e-4        5e-2
SR-AdamW bf16      2.0e-4      1.5e-4      5.7e-4          1e-3        2e-3
AdamW bf16 gather  2.2e-3      7.2e-4      5.5e-4          5e-3        1e-2
=================  ==========  ==========  ==============  ==========  ==========

Muon orthogonalises in bf16 (its default ns_dtype), where a last-bit change of the fp32
input can move a bf16 rounding; Scion's Sign LMO of the head is discontinuous (an entry
of its momentum near 0 flips sign, a full-size change of that entry's update). Step 2's
loss is held tighter: a sharding or reduction bug (a rank on the wrong rows, a gradient
left out of the clipping norm: both seen while building this) moves it by 1e-3 or more in
fp32. SR-AdamW keeps bf16 params (``precision: bf16-pure``) and rounds stochastically
(the same bits on a shard as on the full tensor). "bf16 gather" is ``bf16-autocast``, whose
FSDP ``param_dtype`` is bf16: not DDP's numerics (bf16 residual stream, bf16 gains; with
``fsdp_param_dtype: fp32`` the difference is 7e-5 and step 1 exact), so step 1 differs
too (1.4e-5). AdamW fp32's final weights: per-tensor relative Frobenius difference < 2e-4
(as in test_ddp.py; measured 4e-7).

Resume: a 2-rank FSDP run killed at the start of step 8 (checkpoints at 2, 4, 6), the
newest checkpoint corrupted (one flipped bit in rank 1's DCP file, found by its sha256),
then relaunched: it falls back to step 4, sets step 6 aside, and ends bitwise equal to the
uninterrupted 2-rank run (metrics, evals, norms, every model and optimizer tensor).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch
from _fsdp_jobs import Job, spawn_jobs
from _train_util import assert_tensors_equal, make_token_dir, tiny_overrides
from _waits import CEILING_S

from scalelab.config import load_run_config
from scalelab.store.status import State, read_status
from scalelab.train import train
from scalelab.train.checkpoint import dcp
from scalelab.train.checkpoint import directory as ckpt

STEPS = 8
STEP1_ULPS = 4
"""Step 1 starts from the same weights, so its loss differs only by the order of the
float32 sums: one process adds its 4 micro-batch losses in turn, two ranks add 2 each and
then all-reduce ((m1 + m2) + (m3 + m4) vs ((m1 + m2) + m3) + m4). Each reordered addition
rounds at most half an ulp of the running sum, so 4 ulps of the loss bounds it. A 0.0
tolerance held on some CPUs and not others (the matmul kernels set the micro losses'
last bits); any real divergence (wrong init, wrong shard) is orders larger."""
CASES = {  # name: (overrides, step-1 tolerance (None: STEP1_ULPS), step-2, all-steps tolerance)
    "adamw": (("optim.name=adamw",), None, 1e-5, 1e-5),
    "muon": (("optim.name=muon", "optim.lr=0.02"), None, 1e-4, 1e-3),
    "scion": (("optim.name=scion", "optim.lr=0.01"), None, 1e-4, 5e-2),
    "sr-adamw": (("optim.name=sr-adamw", "train.precision=bf16-pure"), None, 1e-3, 2e-3),
    "adamw-bf16": (("optim.name=adamw", "train.precision=bf16-autocast"), 1e-4, 5e-3, 1e-2),
    "mdm": (("optim.name=adamw", "model.objective=mdm"), None, 1e-5, 1e-5),  # masked diffusion
}
RESUMED = "muon"  # the resume scenario's optimizer: Muon's fsdp mode and its AdamW groups
CHECKPOINTING = ("block", "selective")


def _newest(run_dir):
    return max((run_dir / "checkpoint").glob("step-*"))


def _overrides(data, name: str, *extra: str) -> tuple[str, ...]:
    return (*tiny_overrides(data, STEPS, batch=8), *CASES[name][0], "train.micro_batch_size=2",
            "train.norms_every=4", "train.eval_every=4", *extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fsdp")
    data = make_token_dir(root / "tokens")
    fsdp = ("train.parallelism=fsdp",)
    resume = (*fsdp, "train.checkpoint_every=2")
    jobs = [Job(_overrides(data, n, *fsdp), str(root / f"fsdp-{n}")) for n in CASES]
    jobs += [
        Job(_overrides(data, RESUMED, *resume), str(root / "reference")),
        Job(_overrides(data, RESUMED, *resume), str(root / "killed"), kill_at=STEPS),
        Job(_overrides(data, RESUMED, *resume), str(root / "killed"),
            corrupt="__1_0.distcp"),
        # layout hand-offs: DDP's state.pt resumed by FSDP; FSDP's DCP left for 1 process
        Job(_overrides(data, RESUMED, "train.checkpoint_every=2"), str(root / "ddp-to-fsdp"),
            kill_at=6),
        Job(_overrides(data, RESUMED, *resume), str(root / "ddp-to-fsdp")),
        Job(_overrides(data, RESUMED, *resume), str(root / "fsdp-to-1"), kill_at=6),
    ]
    jobs += [Job(_overrides(data, RESUMED, *fsdp, f"train.activation_checkpointing={mode}"),
                 str(root / f"fsdp-{RESUMED}-{mode}")) for mode in CHECKPOINTING]
    states = spawn_jobs(2, jobs, root / "states", CEILING_S)
    return root, data, states


@pytest.mark.xdist_group("dist")
@pytest.mark.parametrize("name", list(CASES))
def test_fsdp_two_ranks_match_one_process(runs, name):
    root, data, states = runs
    assert states[: len(CASES)] == ["COMPLETED"] * len(CASES)
    sharded, single = root / f"fsdp-{name}", root / f"single-{name}"
    assert train(load_run_config(None, list(_overrides(data, name))), single) == State.COMPLETED
    assert read_status(sharded)["world_size"] == 2
    step, state = ckpt.load_final(sharded)  # DCP files, read whole in this process
    assert step == STEPS and ckpt.is_sharded(_newest(sharded))
    a, b = (pl.read_parquet(d / "metrics.parquet") for d in (sharded, single))
    assert a["step"].to_list() == list(range(1, STEPS + 1))  # rank 0 wrote each step once
    diff = (a["train_loss"] - b["train_loss"]).abs()
    print(f"{name}: |loss FSDP(2) - 1 process| per step: {[f'{d:.1e}' for d in diff]}")
    _, first, second, every = CASES[name]
    if first is None:  # the same init: equal up to the order of fp32 sums (STEP1_ULPS)
        first = STEP1_ULPS * float(np.finfo(np.float32).eps) * abs(float(b["train_loss"][0]))
    assert diff[0] <= first
    assert diff[1] <= second
    assert diff.max() <= every
    ea, eb = (pl.read_parquet(d / "evals.parquet")["loss"] for d in (sharded, single))
    assert (ea - eb).abs().max() <= every
    na, nb = (pl.read_parquet(d / "norms.parquet") for d in (sharded, single))
    assert na.select("step", "layer", "param", "kind", "norm").equals(
        nb.select("step", "layer", "param", "kind", "norm"))  # every norm row, gathered
    want = ckpt.load_final(single)[1]["model"]
    got = state["model"]
    assert {k: v.shape for k, v in got.items()} == {k: v.shape for k, v in want.items()}
    rel = max(((got[k] - want[k]).norm() / want[k].norm()).item() for k in want)
    print(f"{name}: max per-tensor relative Frobenius diff of the final weights {rel:.1e}")
    if name == "adamw":
        assert rel < 2e-4
        weights = [(d.filter(pl.col("kind") == "weight")["value"]) for d in (na, nb)]
        assert ((weights[0] - weights[1]).abs() / weights[1].abs()).max() < 1e-4


@pytest.mark.xdist_group("dist")
def test_fsdp_kill_corrupt_resume_is_bitwise_identical(runs):
    root, _, states = runs
    assert states[len(CASES):][:3] == ["COMPLETED", "KILLED", "COMPLETED"]
    run, ref = root / "killed", root / "reference"
    checkpoints = run / "checkpoint"
    assert (checkpoints / "corrupt-step-000000006" / "__1_0.distcp").is_file()  # kept aside
    assert read_status(run)["attempts"] == 2
    cols = ["step", "tokens", "epoch", "lr", "train_loss", "grad_norm"]
    m, r = (pl.read_parquet(d / "metrics.parquet") for d in (run, ref))
    assert m["step"].to_list() == list(range(1, STEPS + 1))  # each step exactly once
    assert m.select(cols).equals(r.select(cols))
    for table, key in (("evals", ["step", "split", "loss"]),
                       ("norms", ["step", "layer", "param", "kind", "norm", "value"])):
        a, b = (pl.read_parquet(d / f"{table}.parquet").select(key) for d in (run, ref))
        assert a.equals(b), table
    got, want = (_newest(d) for d in (run, ref))
    for key in ("model", "optimizer"):
        assert_tensors_equal(dcp.read(got, key), dcp.read(want, key), key)
    manifest = (got / "manifest.json").read_text()
    for name in ("state.pt", ".metadata", "__0_0.distcp", "__1_0.distcp"):
        assert f'"{name}"' in manifest  # every file hashed
    assert torch.equal(ckpt.load_final(run)[1]["rng"]["torch"],
                       ckpt.load_final(ref)[1]["rng"]["torch"])


@pytest.mark.xdist_group("dist")
def test_a_run_may_change_parallelism_and_world_size_between_attempts(runs):
    """DDP's state.pt resumed by 2 FSDP ranks (full state sharded on load), and FSDP's DCP
    checkpoint resumed by one process (resharded on load): both end within Muon's
    tolerance of the uninterrupted 2-rank FSDP run (each attempt sums in its own order)."""
    root, data, states = runs
    assert states[-3 - len(CHECKPOINTING):-len(CHECKPOINTING)] == ["KILLED", "COMPLETED", "KILLED"]
    ref = pl.read_parquet(root / "reference" / "metrics.parquet")["train_loss"]
    handoff = root / "ddp-to-fsdp"
    assert not ckpt.is_sharded(handoff / "checkpoint" / "step-000000004")  # DDP wrote it
    assert ckpt.is_sharded(_newest(handoff))  # FSDP wrote the rest
    single = root / "fsdp-to-1"
    assert ckpt.is_sharded(_newest(single))
    cfg = load_run_config(None, list(_overrides(data, RESUMED, "train.parallelism=fsdp",
                                                "train.checkpoint_every=2")))
    assert train(cfg, single) == State.COMPLETED
    for run in (handoff, single):
        m = pl.read_parquet(run / "metrics.parquet")
        assert m["step"].to_list() == list(range(1, STEPS + 1))
        assert (m["train_loss"] - ref).abs().max() <= CASES[RESUMED][3]
        assert read_status(run)["attempts"] == 2


def test_a_dcp_metadata_that_would_run_code_is_refused_as_corrupt(tmp_path):
    """DCP unpickles .metadata with pickle.load: a crafted one (with a matching manifest)
    is refused by the allowlisting unpickler, reported in one line, never run."""
    from _train_util import CodeRunningPickle

    from scalelab.train.checkpoint.manifest import file_digest, write_manifest

    marker = tmp_path / "code-ran"
    directory = tmp_path / "run" / "checkpoint" / "step-000000004"
    directory.mkdir(parents=True)
    torch.save({"step": 4}, directory / "state.pt")
    (directory / ".metadata").write_bytes(__import__("pickle").dumps(CodeRunningPickle(marker)))
    write_manifest(directory, 4, {n: file_digest(directory / n) for n in ("state.pt", ".metadata")})
    lines = []
    assert ckpt.find_checkpoint(tmp_path / "run", log=lines.append) is None
    assert not marker.exists()
    assert len(lines) == 1 and "step-000000004 is corrupt (.metadata: refused:" in lines[0]
    assert "system" in lines[0]


@pytest.mark.xdist_group("dist")
def test_activation_checkpointing_under_fsdp_changes_no_bit(runs):
    """The recomputation runs inside FSDP2's unshard/reshard of each block: bitwise the
    same losses, norms and final weights as FSDP without checkpointing."""
    root, _, states = runs
    assert states[-len(CHECKPOINTING):] == ["COMPLETED"] * len(CHECKPOINTING)
    plain = root / f"fsdp-{RESUMED}"
    for mode in CHECKPOINTING:
        run = root / f"fsdp-{RESUMED}-{mode}"
        for table in ("metrics", "norms"):
            a, b = (pl.read_parquet(d / f"{table}.parquet") for d in (run, plain))
            cols = [c for c in a.columns if "time" not in c]
            assert a.select(cols).equals(b.select(cols)), (mode, table)
        assert_tensors_equal(dcp.read(_newest(run)), dcp.read(_newest(plain)), mode)


def test_fsdp_param_dtype_follows_precision_unless_set():
    from scalelab.train.parallel.fsdp import param_dtype_for

    assert param_dtype_for("auto", "bf16-autocast") == torch.bfloat16
    assert param_dtype_for("auto", "fp32") is None
    assert param_dtype_for("auto", "bf16-pure") is None  # params are bf16 already
    assert param_dtype_for("fp32", "bf16-autocast") == torch.float32
    assert param_dtype_for("bf16", "fp32") == torch.bfloat16
