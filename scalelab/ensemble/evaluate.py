"""Held-out evaluation of K-member ensembles, K = 1..M, from the members' final weights.

Members are runs of one sweep whose identity differs only in ``member`` and the seeds
that follow it (``MEMBER_KEYS``; Kim et al. 2025, arXiv 2509.14786: member k trains with seed k).
For each such group the first K members (by member index) form the K-ensemble; every
K = 1..M is scored in one pass over the held-out batches (``PrefixEnsemble``), and each
member is also scored alone, on the same batches, so the ensemble can be compared with
each of its members.

Rows follow the evals schema (``train.records.records.EVALS_SCHEMA``) plus ``members`` (K) and ``method``:

    run_id       the ensemble group's id: the sha256 (64 hex) of the members' identity minus
                 ``MEMBER_KEYS``, whole as the run id's full hash (``scalelab.identity``),
                 since it decides which runs are one ensemble
    step, tokens the members' final step / training tokens (the minimum over members)
    split        'val'
    loss         mean token cross-entropy (nats) on the held-out batches; masked-diffusion
                 members ('mdm'): the ELBO of the ensembled denoiser on the runs' own
                 masking draws (an upper bound on its NLL)
    members      K
    method       'logits' | 'probs' for ensembles of the first K members; 'member' for one
                 member alone (then ``member`` holds its index and members = 1)
    member       the member index ('member' rows) or null
    name         the group's readable name; member_run_ids: comma-joined member run ids
    N            total parameters of one member

They land in ``<sweep>/ensembles/evals.parquet`` (rows of re-evaluated groups replaced;
rows written when the id was its first ``LEGACY_HEX`` digits are replaced by the group whose
id starts with them), written with its manifest (``analysis.tables.sweep_manifest``): a
damaged file is refused by every reader, naming ``scalelab ensemble SWEEP``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch

from analysis.tables.safe_parquet import SweepFileError, read_sweep_parquet
from analysis.tables.sweep_manifest import hint_for, manifest_of
from scalelab import strict
from scalelab.config import RunConfig
from scalelab.ensemble.combine import Method, PrefixEnsemble
from scalelab.ensemble.load import TrainedRun, load_trained, pick_device, read_config
from scalelab.errors import UserError
from scalelab.identity import canonical_json, identity_dict, run_id
from scalelab.model.masking import eval_draws
from scalelab.store.layout import RUNS_FOLDER, ensemble_evals_file
from scalelab.store.status import State, read_status
from scalelab.store.sweep_files import read_sweep_file, sweep_lock, write_sweep_table

__all__ = ["ENSEMBLE_SCHEMA", "EnsembleGroup", "eval_sizes", "evaluate_group", "evaluate_sweep", "find_groups",
           "group_label"]

LEGACY_HEX = 8
"""Hex digits of the group ids written before the id was the whole hash."""
SHORT_HEX = 12
"""Hex digits of a group id shown to a reader (display only: grouping compares it whole)."""

CHUNK_ELEMENTS = 1 << 27
"""Logit elements per forward chunk (512 MiB in fp32): a whole eval batch of a 128k-vocab
model would not fit beside M members on a GPU."""

ENSEMBLE_SCHEMA = {
    "run_id": pl.String,
    "step": pl.Int64,
    "tokens": pl.Int64,
    "split": pl.String,
    "loss": pl.Float64,
    "members": pl.Int64,
    "method": pl.String,
    "member": pl.Int64,
    "name": pl.String,
    "member_run_ids": pl.String,
    "N": pl.Int64,
}


@dataclass(frozen=True)
class EnsembleGroup:
    group_id: str
    name: str
    run_dirs: tuple[Path, ...]
    """COMPLETED members' run directories, sorted by member index."""
    member_ids: tuple[int, ...]


#: What members of one ensemble may differ in: the index and the seeds the planner shifts
#: per member (init and data order; the unique-token subset, data.subset_seed, is shared).
MEMBER_KEYS = ("member", "train.init_seed", "data.seed")


def group_id(cfg: RunConfig) -> str:
    """sha256 (all 64 hex) of the run identity without ``MEMBER_KEYS``: what the members
    share. Never truncated: runs of two configs whose ids shared a prefix would be pooled
    into one group (a repeated member index drops it, else its members are mixed)."""
    tree = identity_dict(cfg)
    for key in MEMBER_KEYS:
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.get(part, {})
        node.pop(leaf, None)
    return hashlib.sha256(canonical_json(tree).encode()).hexdigest()


def find_groups(sweep_dir: str | Path, *, min_members: int = 2) -> list[EnsembleGroup]:
    """Ensemble groups of a sweep directory: COMPLETED runs that differ only in
    ``MEMBER_KEYS``, with distinct member indices (groups with a repeated index are skipped)."""
    found: dict[str, list[tuple[int, Path, RunConfig]]] = defaultdict(list)
    for cfg_path in sorted(Path(sweep_dir).glob(f"{RUNS_FOLDER}/*/config.yaml")):
        run_dir = cfg_path.parent
        if (read_status(run_dir) or {}).get("state") != State.COMPLETED.value:
            continue  # DIVERGED / unfinished members are left out
        cfg = read_config(run_dir)
        found[group_id(cfg)].append((cfg.member, run_dir, cfg))
    groups = []
    for gid, rows in sorted(found.items()):
        rows.sort(key=lambda r: r[0])
        if len({m for m, _, _ in rows}) != len(rows) or len(rows) < min_members:
            continue
        name = group_label(rows[-1][2]) or gid
        groups.append(EnsembleGroup(gid, name, tuple(r[1] for r in rows), tuple(r[0] for r in rows)))
    return groups


def eval_sizes(cfg: RunConfig, n_batches: int | None, batch_size: int | None) -> tuple[int, int]:
    """(held-out batches, sequences per batch) of a group whose members' config is ``cfg``:
    by default the runs' own (``train.eval_batches``, ``train.batch_size``). A value given
    (``--batches``, ``--batch-size``) is checked against the W windows of the validation
    split before anything is loaded: batches in [1, W] (batch k + W repeats batch k:
    ``config.val_windows_limit``), a batch in [1, max(W, train.batch_size)] (a larger one
    holds some window twice; the runs' own batch is always allowed)."""
    from scalelab.data import open_dataset

    windows = len(open_dataset(cfg.data).val) // (cfg.data.seq_len + 1)
    if batch_size is not None:
        most = max(windows, cfg.train.batch_size)
        if not 1 <= batch_size <= most:
            raise UserError(f"expected 1 to {most:,} sequences (the {windows:,} windows of the "
                            f"validation split of '{group_label(cfg)}', or its train.batch_size), "
                            f"got {strict.shown(batch_size)}", key="--batch-size")
    if n_batches is not None and not 1 <= n_batches <= max(windows, 1):
        raise UserError(f"expected 1 to {max(windows, 1):,} batches (the windows of the validation "
                        f"split of '{group_label(cfg)}': batch k + {windows:,} repeats batch k), "
                        f"got {strict.shown(n_batches)}", key="--batches")
    return n_batches or cfg.train.eval_batches, batch_size or cfg.train.batch_size


def group_label(cfg: RunConfig) -> str:
    """A group's readable name: a member's name without its member suffix (planner: '_m<k>')."""
    return re.sub(r"_m\d+$", "", cfg.name)


def _scored(run: TrainedRun, cfg: RunConfig, index: int, x: torch.Tensor, y: torch.Tensor):
    """What validation batch ``index`` is scored on: [(inputs, targets, per-token weights)].
    'ar': the batch itself, weight 1. 'mdm': its ``train.elbo_draws`` maskings, the draws of
    the runs' own evals (``scalelab.model.masking``), each weighted for the ELBO, so the
    ensemble's loss is the ELBO of the ensembled denoiser (its per-token predictions
    combined by ``method``; 'probs' averages the members' probabilities)."""
    mask_id = run.model.mask_id
    if mask_id is None:
        return [(x, y, None)]
    draws = eval_draws(x, batch_index=index, n_draws=cfg.train.elbo_draws, rows=slice(0, x.shape[0]),
                       global_rows=x.shape[0], mask_id=mask_id)
    return [(z, x, w) for z, w in draws]


def _weighted_sum(nll: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """sum of per-token NLL (or an already summed 0-d one), each times its weight, fp64 on CPU."""
    if weights is not None:
        nll = nll * weights.flatten()
    return nll.double().sum().cpu()


def _val_batches(cfg: RunConfig, batch_size: int, n_batches: int):
    """The held-out batches, one at a time (never all of them in memory)."""
    from scalelab.data import open_dataset, val_batches

    return val_batches(open_dataset(cfg.data), cfg.data.seq_len, batch_size, n_batches)


@torch.no_grad()
def evaluate_group(
    group: EnsembleGroup,
    *,
    methods: tuple[Method, ...] = ("logits",),
    n_batches: int | None = None,
    batch_size: int | None = None,
    device: str = "auto",
    device_key: str = "device",
) -> pl.DataFrame:
    """Rows (ENSEMBLE_SCHEMA) for every K = 1..M and method, plus each member alone."""
    dev = pick_device(device, key=device_key)
    runs: list[TrainedRun] = [load_trained(d, dev) for d in group.run_dirs]
    cfg = runs[0].cfg
    nb, bs = eval_sizes(cfg, n_batches, batch_size)  # the members' own eval batches by default
    batches = _val_batches(cfg, bs, nb)
    M = len(runs)
    # Sums of per-token NLL: [K] per method, and [M] for the members alone.
    ens_sum = {m: torch.zeros(M, dtype=torch.float64) for m in methods}
    member_sum = torch.zeros(M, dtype=torch.float64)
    count = 0
    for b, (xb, yb) in enumerate(batches):
        # Row chunks keep each [rows, T, V] logits tensor near CHUNK_ELEMENTS (vocab 128k).
        rows = max(1, CHUNK_ELEMENTS // (xb.shape[1] * runs[0].model.vocab_size))
        for inp, tgt, weights in _scored(runs[0], cfg, b, xb, yb):
            w_rows = [None] * len(inp.split(rows)) if weights is None else weights.split(rows)
            for x, y, w in zip(inp.split(rows), tgt.split(rows), w_rows):
                x, y = x.to(dev), y.to(dev)  # [rows, T]
                w = None if w is None else w.to(dev)  # [rows, T]
                prefix = {m: PrefixEnsemble(m) for m in methods}
                for k, run in enumerate(runs):
                    z = run.model(x)  # [rows, T, V] fp32
                    member_sum[k] += _weighted_sum(torch.nn.functional.cross_entropy(
                        z.flatten(0, 1), y.flatten(), reduction="none" if w is not None else "sum"), w)
                    for m in methods:
                        prefix[m].add(z)
                        ens_sum[m][k] += _weighted_sum(prefix[m].nll(y).flatten(), w)
                count += y.numel()
    step = min(r.step for r in runs)
    tokens = step * cfg.train.batch_size * cfg.data.seq_len
    n_params = sum(p.numel() for p in runs[0].model.parameters())
    common = {
        "run_id": group.group_id,
        "step": step,
        "tokens": tokens,
        "split": "val",
        "name": group.name,
        "member_run_ids": ",".join(run_id(r.cfg) for r in runs),
        "N": n_params,
    }
    rows = []
    for m in methods:
        for k in range(M):
            rows.append({**common, "loss": float(ens_sum[m][k] / count), "members": k + 1, "method": m, "member": None})
    for k in range(M):
        rows.append(
            {**common, "loss": float(member_sum[k] / count), "members": 1, "method": "member",
             "member": group.member_ids[k]}
        )
    return pl.DataFrame(rows, schema=ENSEMBLE_SCHEMA)


DAMAGED_SUFFIX = ".damaged"
"""A damaged ``ensembles/evals.parquet`` is kept beside the new one as ``evals.parquet.damaged``."""


def set_aside_damaged(sweep_dir: str | Path) -> str | None:
    """When the sweep's ``ensembles/evals.parquet`` fails its reader (its manifest, parquet,
    size), move it and its manifest aside (``DAMAGED_SUFFIX``) so that the next
    ``evaluate_sweep`` writes every group afresh; returns the line saying so, or None when
    there is no such file or it reads."""
    out = ensemble_evals_file(sweep_dir)
    if not os.path.lexists(out):
        return None
    try:
        read_sweep_parquet(out)
        return None
    except SweepFileError as err:
        why = err.reason.removesuffix(f"; {hint_for(out)}")
    with sweep_lock(out.parent):
        for path in (out, manifest_of(out)):
            if os.path.lexists(path):
                os.replace(path, path.with_name(path.name + DAMAGED_SUFFIX))
    return (f"{out} is damaged ({why}); moved aside as {out.name}{DAMAGED_SUFFIX}: every group is "
            "evaluated afresh and rows of methods not asked for now are not kept")


def evaluate_sweep(
    sweep_dir: str | Path,
    *,
    methods: tuple[Method, ...] = ("logits",),
    n_batches: int | None = None,
    batch_size: int | None = None,
    device: str = "auto",
    device_key: str = "device",
    progress=None,
) -> tuple[pl.DataFrame, Path]:
    """Evaluate every ensemble group of the sweep; merge into ``ensembles/evals.parquet``."""
    sweep_dir = Path(sweep_dir)
    out = ensemble_evals_file(sweep_dir)
    pick_device(device, key=device_key)
    old = read_sweep_file(out) if os.path.lexists(out) else None  # damaged: said before any work
    groups = find_groups(sweep_dir)
    for group in groups:  # every size checked before any member is loaded
        eval_sizes(read_config(group.run_dirs[0]), n_batches, batch_size)
    frames = []
    for group in groups:
        frames.append(evaluate_group(group, methods=methods, n_batches=n_batches, batch_size=batch_size,
                                     device=device, device_key=device_key))
        if progress is not None:
            progress(group)
    new = pl.concat(frames) if frames else pl.DataFrame(schema=ENSEMBLE_SCHEMA)
    if old is not None:
        ids = new["run_id"].unique().to_list()
        legacy = [gid[:LEGACY_HEX] for gid in ids]  # the same groups, named by a prefix before
        keep = old.filter(~(pl.col("run_id").is_in(ids + legacy) & pl.col("method").is_in(list(methods) + ["member"])))
        new = pl.concat([keep.select(list(ENSEMBLE_SCHEMA)), new])
    new = new.sort(["run_id", "method", "members", "member"], nulls_last=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_sweep_table(out, new)  # the file, then its manifest (analysis.tables.sweep_manifest)
    return new, out
