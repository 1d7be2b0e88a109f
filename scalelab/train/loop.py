"""``train(cfg, run_dir)``: one training run, end to end, resumable.

Step convention: the loop runs updates with 0-based index ``i = 0 .. T-1``; records use
``step = i + 1`` (updates done), so ``tokens = step * tokens_per_step`` and step 0 holds
the initial weights' eval and norms. Update ``i`` trains on ``stream.batch(i)``, a pure
function of ``i``, so resuming needs no sampler state.

Per step: lr from the schedule -> forward/backward over micro-batches (DDP syncs on the
last; FSDP, ``train.parallelism: fsdp``, reduce-scatters after each) -> one all-reduce of
(loss, preempt flag) -> divergence check -> grad clipping -> optimizer step -> records.
Activation checkpointing (``scalelab.model.checkpointing``) and FSDP2 sharding
(``scalelab.train.parallel.fsdp``) are applied to the model before the optimizer is built;
checkpoints go through ``scalelab.train.checkpoint.training_state`` (one ``state.pt``, or DCP files
per rank when sharded). Evals every ``eval_every`` and at the last step; norms every
``norms_every``; checkpoints every ``checkpoint_every``, on SIGTERM/SIGUSR1 and at the end.
Every ``log_every`` steps (and at the last): a metrics row and a progress line (loss,
tokens/s, MFU on GPU, ETA: ``scalelab.train.console.progress_log``, printed per ``LogSettings``:
text or JSON lines, or quiet). W&B, when ``cfg.wandb``: ``scalelab.train.console.tracker``.
Exit states: COMPLETED, DIVERGED (non-finite loss, or loss above ``divergence_factor`` x
ln(vocab) or ``loss_ceiling``: ``scalelab.train.divergence``), PREEMPTED
(signal; resumable), FAILED (exception; status.json holds the error, the exception
propagates).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import random
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from scalelab import strict
from scalelab.config import RunConfig
from scalelab.data import TrainStream, open_dataset, val_batches
from scalelab.derive import derive
from scalelab.errors import UserError
from scalelab.identity import full_id as full_run_id
from scalelab.identity import id_of
from scalelab.model import build_model
from scalelab.model.checkpointing import apply_activation_checkpointing
from scalelab.model.masking import eval_draws, train_draw
from scalelab.model.micro_batch import device_memory_gib, micro_batch
from scalelab.store.atomic import write_json_atomic, write_yaml_atomic
from scalelab.store.layout import CONFIG_FILE, META_FILE
from scalelab.store.status import State, read_status, update_status
from scalelab.train.checkpoint import directory as ckpt
from scalelab.train.checkpoint import training_state as run_ckpt
from scalelab.train.console.console import Console
from scalelab.train.console.mfu import device_peak_flops
from scalelab.train.console.progress_log import EvalLine, LogSettings, ProgressLine
from scalelab.train.console.progress_meter import ProgressMeter
from scalelab.train.console.sweep_context import sweep_context
from scalelab.train.console.tracker import Tracker, tracker_setup
from scalelab.train.divergence import DivergenceMonitor, DivergenceRule
from scalelab.train.meta import collect_meta
from scalelab.train.optimizers import build_optimizer
from scalelab.train.parallel import distributed as dst
from scalelab.train.parallel import fsdp
from scalelab.train.precision import autocast_context, prepare_model, set_quant_step
from scalelab.train.records.norms import NormRecorder
from scalelab.train.records.records import Records
from scalelab.train.records.records_manifest import write_records_manifest
from scalelab.train.schedules import lr_at
from scalelab.train.seeds import run_seeds
from scalelab.train.signals import PreemptionFlag
from scalelab.train.step import evaluate, forward_backward, micro_batches

__all__ = ["train"]


def train(cfg: RunConfig, run_dir: str | Path, *, log: LogSettings | None = None) -> State:
    """Train (or resume, or skip when already COMPLETED/DIVERGED) the run in ``run_dir``.
    ``log``: how it prints (default: ``LogSettings.from_env()``, what sweep jobs get)."""
    run_dir = Path(run_dir)
    log = log or LogSettings.from_env()
    _check_run_dir(run_dir, full_run_id(cfg))
    status = read_status(run_dir)
    if status and State(status["state"]).terminal:
        return State(status["state"])
    env = dst.detect()
    device = dst.pick_device(cfg.train.device, env)
    owns_group = env.distributed and not dist.is_initialized()
    dst.setup(env, device)
    run = None
    try:
        try:
            run = _Run(cfg, run_dir, env, device, log)
        except UserError:
            raise  # bad input: one line, exit 2, no status written
        except BaseException as err:  # e.g. out of memory while building: the sweep sees it
            if env.is_main:
                update_status(run_dir, State.FAILED, error=f"{type(err).__name__}: {err}"[:2000])
            raise
        return run.execute()
    finally:
        # Free the run first: a DDP reducer still alive when its gloo group is destroyed can
        # deadlock in ~ProcessGroupGloo when it is freed later (seen at process exit). One
        # process has no group: no collection (0.1-0.5 s of a short run).
        run = None
        if env.distributed:
            gc.collect()
        if owns_group:
            dst.teardown()


def _check_run_dir(run_dir: Path, full: str) -> None:
    """Refuse a run directory that belongs to another configuration: its ``config.yaml``
    must hold the full id ``full`` (``run_id_full``; a prefix proves nothing)."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return
    stored = strict.load_yaml(path)
    stored = stored if isinstance(stored, dict) else {}
    if stored.get("run_id_full") != full:
        held = stored.get("run_id_full") or stored.get("run_id")
        raise UserError(
            f"run directory holds {f'run {held}' if held else 'no run id'}, not {full} "
            "(a different config); train this config in its own run directory",
            file=str(run_dir),
        )


class _Run:
    def __init__(self, cfg: RunConfig, run_dir: Path, env: dst.DistEnv, device: torch.device,
                 log: LogSettings):
        tc = cfg.train
        self.cfg, self.tc, self.run_dir, self.env, self.device = cfg, tc, run_dir, env, device
        self.run_id = id_of(full_run_id(cfg))
        self.console = Console(log, self.run_id, enabled=env.is_main)
        self.tracker: Tracker | None = None
        self.seeds = run_seeds(cfg)
        self.dataset = open_dataset(cfg.data)
        self.derived = derive(
            cfg,
            vocab_size=self.dataset.vocab_size,
            train_tokens_available=len(self.dataset.train),
        )
        data_cfg = dataclasses.replace(cfg.data, seed=self.seeds.data)
        if cfg.distill.synthetic_weight > 0:  # real + teacher tokens (scalelab.distill)
            from scalelab.distill.train_hooks import mixture_stream

            self.stream = mixture_stream(cfg, run_dir, self.dataset, data_cfg, tc.batch_size,
                                         world_size=env.world_size, log=self._log)
        else:
            self.stream = TrainStream(self.dataset, data_cfg, tc.batch_size)
        self.total_steps = self.derived.steps
        self.rows = dst.shard_slice(tc.batch_size, env)
        micro = micro_batch(cfg, self.dataset.vocab_size, env.world_size,
                            device_memory_gib(device))  # scalelab.model.memory's prediction
        self.micro = micro.size
        if tc.micro_batch_size == "auto":
            over = "" if micro.fits is not False else " (more than fits: micro-batch 1 anyway)"
            self._log(f"micro-batch {micro.size} of {micro.per_gpu} (auto): predicted peak "
                      f"{micro.estimate.peak_gib:.1f} GiB per GPU{over}")
        # Global RNGs from the init seed (nothing in the loop draws from them today; they
        # are seeded and checkpointed so that anything that does stays reproducible).
        random.seed(self.seeds.init)
        np.random.seed(self.seeds.init % 2**32)
        torch.manual_seed(self.seeds.init)
        model = build_model(cfg.model, self.dataset.vocab_size)
        model.init_weights(seed=self.seeds.init, std=tc.init_std)
        self.mask_id = model.mask_id  # None for 'ar'; the [MASK] token of 'mdm'
        self.model = prepare_model(model, tc.precision, device)
        apply_activation_checkpointing(self.model, tc.activation_checkpointing)
        self.sharded = env.distributed and tc.parallelism == "fsdp"
        if self.sharded:  # before the optimizer: it sees the sharded (DTensor) params
            fsdp.shard_model(self.model, device,
                             fsdp.param_dtype_for(tc.fsdp_param_dtype, tc.precision),
                             compile_blocks=tc.compile)
        self.optimizer = build_optimizer(self.model, cfg.optim)
        if callable(getattr(self.optimizer, "init", None)):  # Scion's norm-matched init
            self.optimizer.init(seed=self.seeds.init)
        wrapped = self.model
        if env.distributed and not self.sharded:
            ids = [device.index] if device.type == "cuda" else None
            wrapped = DistributedDataParallel(self.model, device_ids=ids)
        # FSDP compiles per block (shard_model); DDP and one process compile the whole model
        self.forward_model = torch.compile(wrapped) if tc.compile and not self.sharded else wrapped
        self.loss_fn = None  # plain cross-entropy; logit KD replaces it (scalelab.distill)
        if cfg.distill.kd_weight > 0:
            from scalelab.distill.train_hooks import build_kd_loss

            self.loss_fn = build_kd_loss(cfg, run_dir, device)
        self.autocast = autocast_context(tc.precision, device)
        self.records = Records(run_dir, self.run_id, enabled=env.is_main, log=self._log)
        self.norms = (NormRecorder(self.model, self.records, collective=self.sharded)
                      if tc.norms_every > 0 else None)
        self._val: list | None = None
        self._norms_published: int | None = None
        self.elapsed_before = 0.0

    # ----------------------------------------------------------------- bookkeeping
    def _log(self, msg: str) -> None:
        self.console.message(msg)

    def _write_header(self) -> None:
        if not self.env.is_main:
            return
        derived = dataclasses.asdict(self.derived)
        doc = {
            "run_id": self.run_id,
            "run_id_full": full_run_id(self.cfg),
            "config": strict.to_dict(self.cfg),
            "derived": derived,
            "seeds": self.seeds._asdict(),
        }
        write_yaml_atomic(self.run_dir / CONFIG_FILE, doc)
        write_json_atomic(self.run_dir / META_FILE, collect_meta(self.device, self.env, self.tc.precision))
        update_status(
            self.run_dir, State.RUNNING, run_id=self.run_id, world_size=self.env.world_size,
            total_steps=self.total_steps, error=None,
        )

    # ----------------------------------------------------------------- the run
    def execute(self) -> State:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_header()
        try:
            start = self._resume()
            self.tracker = self._tracker()
            self.t0 = time.perf_counter()
            with PreemptionFlag() as flag:
                return self._loop(start, flag)
        except BaseException as err:
            if self.tracker is not None:
                self.tracker.finish(exit_code=1)
            if self.env.is_main:
                tail = traceback.format_exception(type(err), err, err.__traceback__)[-3:]
                update_status(
                    self.run_dir, State.FAILED, error=f"{type(err).__name__}: {err}"[:2000],
                    traceback="".join(tail)[-4000:],
                )
            raise

    def _tracker(self) -> Tracker:
        enabled = self.cfg.wandb and self.env.is_main
        config = {"run_id": self.run_id, "run_id_full": full_run_id(self.cfg),
                  **strict.to_dict(self.cfg), "derived": dataclasses.asdict(self.derived),
                  "seeds": self.seeds._asdict()}
        context = sweep_context(self.run_dir, self.run_id) if enabled else None
        setup = tracker_setup(self.run_dir.name, config, context) if enabled else None
        return Tracker(enabled, run_dir=self.run_dir, run_id=self.run_id, setup=setup)

    def _resume(self) -> int:
        # The newest intact checkpoint; corrupt newer ones are reported in one line and set
        # aside (by rank 0 only); the records are truncated back to the step resumed from.
        state = run_ckpt.restore(self.run_dir, self.model, self.optimizer, log=self._log)
        if state is None:
            self.records.truncate(-1)  # rows of an attempt with no (intact) checkpoint
            return 0
        ckpt.set_rng_state(state["rng"])
        self.elapsed_before = float(state["elapsed_s"])
        step = int(state["step"])
        self.records.truncate(step)
        self._log(f"resumed from checkpoint at step {step}/{self.total_steps}")
        return step

    def _elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.t0

    def _loop(self, start: int, flag: PreemptionFlag) -> State:
        tc, T, opt = self.tc, self.total_steps, self.optimizer
        tokens_per_step = self.derived.tokens_per_step
        if start == 0:
            self._eval(0)
            if self.norms:
                self.norms.weights(0)
        # (under FSDP: the sharded params, as _eval reshards the root after its forward)
        params = [p for p in self.model.parameters() if p.requires_grad]
        max_norm = tc.grad_clip if tc.grad_clip is not None else math.inf
        monitor = DivergenceMonitor(DivergenceRule.of(
            vocab_size=self.dataset.vocab_size, factor=tc.divergence_factor,
            patience=tc.divergence_patience, ceiling=tc.loss_ceiling))
        prev = time.perf_counter()
        meter = ProgressMeter(
            total_steps=T, tokens_per_step=tokens_per_step,
            flops_per_token=self.derived.flops_per_token,
            peak_flops=device_peak_flops(self.device, self.env.world_size),
            start_step=start, start_time=prev)
        for i in range(start, T):
            step = i + 1
            mult = lr_at(i, T, tc.schedule, self.derived.warmup_steps, tc.min_lr_ratio,
                         tc.decay_fraction)
            for group in opt.param_groups:
                group["lr"] = group["base_lr"] * mult
            x, y = self.stream.batch(i, self.rows)  # [B / W, seq] int64: this rank's rows
            x = x.to(self.device, non_blocking=True)
            y = y.to(self.device, non_blocking=True)
            set_quant_step(self.model, i, self.seeds.init)  # SR keys of quantized GEMMs (fp8/fp4)
            loss = forward_backward(self.forward_model, self._chunks(i, x, y), self.autocast,
                                    self.loss_fn)
            packed = torch.stack([loss, torch.tensor(float(flag.requested), device=loss.device)])
            if dist.is_initialized():
                dist.all_reduce(packed)  # sum over ranks
            train_loss = packed[0].item() / self.env.world_size
            stop = bool(packed[1].item() > 0)
            grad_norm = fsdp.clip_grad_norm(params, max_norm)
            row = dict(step=step, tokens=step * tokens_per_step, epoch=self.stream.epoch_at(step),
                       lr=opt.param_groups[0]["lr"], train_loss=train_loss, grad_norm=grad_norm)
            diverged = monitor.update(step, train_loss)  # same on every rank: loss all-reduced
            if diverged:
                self.records.add("metrics", **row, step_time_s=time.perf_counter() - prev)
                return self._end(State.DIVERGED, step, error=diverged)
            norm_step = self.norms is not None and (step % tc.norms_every == 0 or step == T)
            if norm_step:
                self.norms.grads(step)
                self.norms.snapshot()
            opt.step()
            opt.zero_grad(set_to_none=True)
            now = time.perf_counter()
            meter.add_step(now - prev)
            if step % tc.log_every == 0 or step == T:
                self.records.add("metrics", **row, step_time_s=now - prev)
                self._progress(meter.line(step, train_loss, now, self._elapsed()), row)
            if norm_step:
                self.norms.updates(step, opt)
                self.norms.weights(step)
            if (tc.eval_every > 0 and step % tc.eval_every == 0) or step == T:
                self._eval(step, train_loss)
            if step % tc.checkpoint_every == 0 or stop or step == T:
                self._checkpoint(step)
            if stop and step < T:
                self._log(f"preempted ({flag.received.name if flag.received else 'peer'}) "
                          f"at step {step}; checkpoint written")
                return self._end(State.PREEMPTED, step)
            prev = time.perf_counter()
        return self._end(State.COMPLETED, T)

    def _progress(self, line: ProgressLine, row: dict) -> None:
        """The progress line of a log step, and its metrics to W&B."""
        self.console.progress(line)
        perf = {"perf/tokens_per_s": line.tokens_per_s, "perf/mfu": line.mfu}
        self.tracker.log({"train/loss": row["train_loss"], "lr": row["lr"],
                          "grad_norm": row["grad_norm"], "tokens": row["tokens"],
                          "epoch": row["epoch"],
                          **{k: v for k, v in perf.items() if v is not None}}, line.step)

    def _publish_norms(self, step: int) -> None:
        """The newest norm records as one W&B table, once per norm step (at ``step``)."""
        norms = self.norms
        if (self.tracker is None or not self.tracker.enabled or norms is None
                or norms.latest_step is None or norms.latest_step == self._norms_published):
            return
        self.tracker.norms(norms.latest, step)
        self._norms_published = norms.latest_step

    def _chunks(self, i: int, x: torch.Tensor, y: torch.Tensor) -> list:
        """Update ``i``'s micro-batches: (x, y); for 'mdm' (z, x, w), the clean inputs x
        masked by the step's draw (``scalelab.model.masking``)."""
        if self.mask_id is None:
            return micro_batches(x, y, micro=self.micro)
        z, w = train_draw(x, seed=self.seeds.init, step=i, rows=self.rows,
                          global_rows=self.tc.batch_size, mask_id=self.mask_id)
        return micro_batches(z, x, w, micro=self.micro)

    def _val_batches(self) -> list[list]:
        """The validation micro-batches, once per ELBO draw for 'mdm' (one list for 'ar')."""
        if self._val is None:
            draws = 1 if self.mask_id is None else self.tc.elbo_draws
            self._val = [[] for _ in range(draws)]
            for b, (x, y) in enumerate(val_batches(self.dataset, self.cfg.data.seq_len,
                                                   self.tc.batch_size, self.tc.eval_batches)):
                x = x[self.rows].to(self.device)
                y = y[self.rows].to(self.device)
                if self.mask_id is None:
                    self._val[0].extend(micro_batches(x, y, micro=self.micro))
                    continue
                masked = eval_draws(x, batch_index=b, n_draws=draws, rows=self.rows,
                                    global_rows=self.tc.batch_size, mask_id=self.mask_id)
                for j, (z, w) in enumerate(masked):
                    self._val[j].extend(micro_batches(z, x, w, micro=self.micro))
        return self._val

    def _eval(self, step: int, train_loss: float | None = None) -> None:
        """The validation loss: AR's exact NLL; for 'mdm' the mean of the ELBO draws, with
        their Monte Carlo SE (sd over the K draws / sqrt(K))."""
        per_draw = [dst.all_mean(evaluate(self.model, batches, self.autocast)).item()
                    for batches in self._val_batches()]
        loss = math.fsum(per_draw) / len(per_draw)
        se = None
        if self.mask_id is not None:
            var = math.fsum((v - loss) ** 2 for v in per_draw) / (len(per_draw) - 1)
            se = math.sqrt(var / len(per_draw))
        if self.sharded:  # FSDP2 keeps the root's params unsharded after a forward: free them
            self.model.reshard()
        self.records.add("evals", step=step, tokens=step * self.derived.tokens_per_step,
                         split="val", loss=loss, loss_se=se)
        self.tracker.log({"val/loss": loss, **({} if se is None else {"val/loss_se": se})}, step)
        self._publish_norms(step)
        self.console.eval(EvalLine(step=step, total_steps=self.total_steps, val_loss=loss,
                                   train_loss=train_loss, elapsed_s=self._elapsed()))

    def _checkpoint(self, step: int) -> None:
        self.records.flush(step)  # parts first: a checkpoint never precedes its rows
        extras = {"rng": ckpt.rng_state(), "records_step": self.records.flushed_step,
                  "elapsed_s": self._elapsed(), "run_id": self.run_id}
        run_ckpt.save(self.run_dir, step, self.model, self.optimizer, extras)

    def _end(self, state: State, step: int, error: str | None = None) -> State:
        self.records.flush(step)
        finished = state in (State.COMPLETED, State.DIVERGED)
        if finished:
            self.records.compact()
        self._publish_norms(step)
        # PREEMPTED too: the resumed attempt reopens the same W&B run
        synced = self.tracker.finish()  # offline: where the run went, how to sync it
        self.tracker = None
        if synced and self.env.is_main:
            self._log(synced)
        if self.env.is_main:
            # the records' manifest last of the record files, then the state that commits it
            marked = write_records_manifest(self.run_dir, step, self.run_id) if finished else {}
            update_status(self.run_dir, state, steps_done=step, wall_time_s=self._elapsed(),
                          error=error, **marked)
        if error:
            self._log(error)
        return state
