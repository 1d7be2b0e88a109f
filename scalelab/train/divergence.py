"""When does a run count as DIVERGED? A pure rule over the stream of train losses.

A run diverges when its train loss (the mean over the global batch, all ranks, the loss
the optimizer minimises) is not finite, at once, or when it stays above a threshold for
``patience`` consecutive steps. The threshold is ``train.loss_ceiling`` when that is set
(an absolute override: it replaces the relative rule), else ``train.divergence_factor``
times the initial loss; both None: non-finite losses only.

The initial loss is ln(vocab size), the loss of the uniform predictor, which a freshly
initialised model scores (measured: 5.53-5.56 with AdamW's init and 6.76-7.05 with
Scion's norm-matched init, for ln 256 = 5.545; 8.9 with ``init_std`` 0.5). It is the same
on every rank and after every resume, so nothing needs checkpointing, and a model 10x
worse than predicting nothing has lost everything it learned.

Evidence for the defaults (factor 10, patience 1; tiny runs: cpu-50k, batch 8 x 64
tokens, 60-300 steps, byte vocab 256, no grad clipping unless said):

- Healthy runs never exceed 1.007x their initial loss at any step: AdamW at 3e-3,
  1.2e-2, and 3e-2 / 0.1 without warmup or clipping; Muon at 3e-3, 0.02, 0.05 (no warmup);
  Scion at 2^-10, 3e-3, 2^-5 (no warmup); SR-AdamW (bf16-pure) at 3e-3 and 1e-2; AdamW
  with init_std 0.1 and 0.5. The worst early spike that still trained (AdamW lr 1, no
  clipping: 5.3 -> 23 nats, val 3.39 at step 100) peaks at 4.1x.
- lr 1000 without clipping (AdamW, Muon, Scion; 4 seeds): the loss jumps to 4e5-2e7
  (8e4-4e6x) at step 2 and either turns NaN within 8 steps (already DIVERGED) or, at
  weight decay 0 and for Scion, stays above 10x for 4-15 steps and then sits at exactly
  ln 256 to the end: COMPLETED before this rule, having learned nothing. AdamW at lr 3000
  (weight decay 0) and Scion at lr 1e4 spend only 1-2 steps above 10x (Scion: a SINGLE
  step, 1.4e4x and 3.6e5x in two seeds) before going flat, hence patience 1.
- Flagged as well, deliberately: blow-ups to 14-200x that later came back (AdamW lr 3
  and 10, Muon lr 10, 1000-3000x their usual lr): their weights were wrecked.
- Not caught (no spike, nothing to see in the loss scale): AdamW at lr 1e4 with weight
  decay 0 goes straight to ln 256 at step 2 and stays there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DivergenceMonitor", "DivergenceRule"]


@dataclass(frozen=True)
class DivergenceRule:
    """The loss above ``threshold`` for ``patience`` consecutive steps diverges (None:
    only non-finite losses do); ``what`` names the threshold in the report."""

    threshold: float | None
    patience: int = 1
    what: str = ""

    @classmethod
    def of(cls, *, vocab_size: int, factor: float | None, patience: int,
           ceiling: float | None) -> DivergenceRule:
        """The rule of a run's config: ``ceiling`` when set, else ``factor`` x ln(vocab)."""
        if ceiling is not None:
            return cls(ceiling, patience, f"{ceiling} (train.loss_ceiling)")
        if factor is None:
            return cls(None, patience)
        initial = math.log(vocab_size)
        return cls(factor * initial, patience,
                   f"{factor:g} x initial loss {initial:.4g} (ln vocab {vocab_size})")


class DivergenceMonitor:
    """Feed it each step's train loss; it answers why the run diverged, or None.

    The count of consecutive steps above the threshold lives in memory: a resume starts
    it again (with patience 1, the default, there is nothing to count)."""

    def __init__(self, rule: DivergenceRule):
        self.rule = rule
        self.streak = 0

    def update(self, step: int, loss: float) -> str | None:
        if not math.isfinite(loss):
            return f"train loss {loss} non-finite at step {step}"
        rule = self.rule
        if rule.threshold is None or not loss > rule.threshold:
            self.streak = 0
            return None
        self.streak += 1
        if self.streak < rule.patience:
            return None
        steps = "step" if rule.patience == 1 else "steps"
        return (f"train loss {loss:.6g} above {rule.what} for {rule.patience} consecutive "
                f"{steps} at step {step}")
