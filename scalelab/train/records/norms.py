"""Per-layer norm records (Disco; Filatov et al. 2025, arXiv 2510.03871) — glue between the
loop and ``optim.norms``.

Every ``train.norms_every`` steps (and at step 0 and the last step) rank 0 records, for
every parameter, the norms ``optim.norms.DEFAULT_KINDS`` (rms_to_rms, l1_to_rms,
rms_to_inf, supremum, frobenius; the embedding read transposed, 1-D gains as diag(w)):

- ``kind='weight'``: the parameter after the step's update;
- ``kind='update'``: the applied step ``p_after - p_before`` with the decoupled weight
  decay ``-lr·wd·p_before`` (groups with a ``weight_decay`` key) added back, i.e. the
  ``-η·u`` that Disco logs; any other shrink an optimizer applies as part of its method
  (Scion's constrained SCG step) stays in the update. Costs one parameter copy per
  norm step;
- ``kind='grad'``: the gradient (after the DDP all-reduce, before clipping).

rms_to_rms uses ``POWER_ITERS`` power iterations (``optim.norms.spectral``: a lower bound
on sigma_max from a fixed start, cheap on every device) rather than a full SVD.
Parameters are replicated under DDP, so only rank 0 computes. Sharded (FSDP) parameters
are gathered whole per tensor (``optim.norms`` calls ``full_tensor()``, a collective), so
with ``collective=True`` every rank computes and only rank 0's records are kept.

``latest`` holds the rows of the newest norm step (rank 0), for the W&B ``norms`` table
(``scalelab.train.console.tracker``).
"""

from __future__ import annotations

import torch
from torch import nn

from optim.norms import layer_norms, update_norms
from scalelab.train.records.records import Records

__all__ = ["POWER_ITERS", "NormRecorder"]

POWER_ITERS = 20


class NormRecorder:
    def __init__(self, model: nn.Module, records: Records, power_iters: int = POWER_ITERS, *,
                 collective: bool = False):
        self.model, self.records, self.power_iters = model, records, power_iters
        self.collective = collective
        self._before: dict[torch.Tensor, torch.Tensor] = {}
        self.latest_step: int | None = None
        self.latest: list[dict] = []
        """The rows recorded at ``latest_step`` (every kind), as written to the records."""

    @property
    def active(self) -> bool:
        return self.records.enabled or self.collective

    def _add(self, rows: list[dict], step: int, kind: str) -> None:
        rows = [{"step": step, "kind": kind, **r} for r in rows]
        self.records.extend("norms", rows)
        if self.records.enabled:
            if step != self.latest_step:
                self.latest_step, self.latest = step, []
            self.latest.extend(rows)

    def weights(self, step: int) -> None:
        if self.active:
            self._add(layer_norms(self.model, power_iters=self.power_iters), step, "weight")

    def grads(self, step: int) -> None:
        if self.active:
            grads = {p: p.grad for p in self.model.parameters() if p.grad is not None}
            self._add(update_norms(self.model, grads, power_iters=self.power_iters), step, "grad")

    @torch.no_grad()
    def snapshot(self) -> None:
        """Copy the parameters before ``optimizer.step()`` (for the update norms)."""
        if self.active:
            self._before = {p: p.detach().clone() for p in self.model.parameters()}

    @torch.no_grad()
    def updates(self, step: int, optimizer: torch.optim.Optimizer) -> None:
        """Record the applied step of the update just taken (needs ``snapshot`` before it)."""
        if not self.active:
            return
        deltas = {}
        for group in optimizer.param_groups:
            decay = float(group.get("lr", 0.0)) * float(group.get("weight_decay", 0.0))
            for p in group["params"]:
                before = self._before.get(p)
                if before is None:
                    continue
                old = before.float()
                delta = p.detach().float() - old  # [param shape]
                deltas[p] = delta.add_(old, alpha=decay) if decay else delta
        self._before = {}
        self._add(update_norms(self.model, deltas, power_iters=self.power_iters), step, "update")
