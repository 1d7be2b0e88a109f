"""A synthetic trainer for the adaptive tests (never shipped): ``analysis.adaptive``'s
SyntheticTrainer (a known law A/x^B + E, a tuning penalty around an optimum that moves with
N, noise) as a ``module:function`` target of the sweep backends.

It honours the run-dir contract ``collect`` reads (status.json, evals.parquet with val
losses), as ``sweep/landscape_train.py`` does, and appends to ``invocations.log`` so tests
can count trainings. The run's loss is the SyntheticTrainer's for the run's key: N (derived
from the config, as the plan derives it), its epochs and weight decay (the tuned axes) and
its replicate (``train.init_seed``: the test specs use ``seeds: [0, 1, ...]``). The noise
seed is ``extra.noise_seed`` (default 0), so a study's losses depend on the run alone.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import polars as pl

from analysis.adaptive import SyntheticTrainer, run_key
from scalelab.derive import derive
from scalelab.store.atomic import write_parquet_atomic
from scalelab.store.status import State, update_status

AXES = ("data.epochs", "optim.weight_decay")
PRESETS = ("twin-5.6k", "twin-10k", "twin-15k", "twin-26k", "twin-41k", "twin-80k", "twin-132k",
           "twin-271k")
EPOCHS = (2.0, 4.0, 8.0)
WD = (0.1, 0.3, 1.0)
E = 1.95
U0 = 2048
"""The tuned grid's unique tokens; other budgets (a ``data`` block) add the data term."""
DATA_A, DATA_B = 0.2, 0.5
"""The data term DATA_A ((U/U0)^-DATA_B - 1): 0 at U0, a power law in U elsewhere."""
DATA_BLOCK = """\
blocks:
  - name: data
    base: {optim: {weight_decay: 0.1}, data: {epochs: 4}}
    grid:
      model.preset: [twin-41k, twin-80k]
      data.unique_tokens: [512, 1024, 4096, 8192, 16384]
"""
"""A ``data`` block for ``spec_text``: the standard recipe at four more budgets U (the
data law ``scalelab next --target multiplier`` inverts)."""


def spec_text(name: str = "nx", *, presets=PRESETS, seeds=(0, 1), noise_seed: int = 0,
              priced: bool = True, grid_extra: str = "") -> str:
    """A study spec over ``presets`` x EPOCHS x WD x ``seeds`` on the debug backend;
    ``priced``: GPU-hours from ``launcher.flops_per_gpu_s`` (1 GFLOP/s); ``grid_extra``:
    more grid lines (two-space indented)."""
    launcher = "{executor: debug, flops_per_gpu_s: 1.0e9}" if priced else "{executor: debug}"
    text = textwrap.dedent(f"""\
        name: {name}
        base:
          model: {{preset: twin-5.6k}}
          data: {{dataset: /nonexistent/x, vocab_size: 256, unique_tokens: 2048, seq_len: 32, epochs: 4}}
          train: {{batch_size: 8, device: cpu}}
          extra: {{noise_seed: {noise_seed}}}
        launcher: {launcher}
        grid:
          model.preset: [{", ".join(presets)}]
          data.epochs: [{", ".join(f"{e:g}" for e in EPOCHS)}]
          optim.weight_decay: [{", ".join(f"{w:g}" for w in WD)}]
        seeds: [{", ".join(str(s) for s in seeds)}]
        """)
    return text.replace("\nseeds:", f"{grid_extra}\nseeds:")


def law(noise_seed: int = 0) -> SyntheticTrainer:
    """The truth: E = 1.95; the optimum moves from (2 epochs, wd 0.1) at 5.6k to (8, 1.0)
    at 271k parameters, snapped to the grid."""
    return SyntheticTrainer(
        E=E, noise_sd=0.01, curvature={"data.epochs": 0.02, "optim.weight_decay": 0.02},
        opt_lo={"data.epochs": 2.0, "optim.weight_decay": 0.1},
        opt_hi={"data.epochs": 8.0, "optim.weight_decay": 1.0},
        x_range=(5608 / 1e6, 270816 / 1e6), grid={"data.epochs": EPOCHS, "optim.weight_decay": WD},
        epochs_axis="data.epochs", seed=noise_seed)


def loss_of(cfg) -> float:
    """The synthetic final loss of the run ``cfg``."""
    n = float(derive(cfg).n_params)
    values = (float(cfg.data.epochs), float(cfg.optim.weight_decay))
    frame = pl.DataFrame({"key": [run_key(n, values, AXES, cfg.train.init_seed)], "N": [n],
                          **{a: [v] for a, v in zip(AXES, values)}})
    data = DATA_A * ((float(cfg.data.unique_tokens) / U0) ** -DATA_B - 1.0)
    return float(law(int(cfg.extra.get("noise_seed", 0))).loss(frame)[0]) + data


def train(cfg, run_dir) -> State:
    run_dir = Path(run_dir)
    with open(run_dir / "invocations.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    update_status(run_dir, State.RUNNING)
    loss = loss_of(cfg)
    evals = pl.DataFrame({"run_id": ["x", "x"], "step": [1, 2], "tokens": [1, 2],
                          "split": ["val", "val"], "loss": [loss + 1.0, loss]})
    write_parquet_atomic(run_dir / "evals.parquet", evals)
    update_status(run_dir, State.COMPLETED)
    return State.COMPLETED
