"""The names a derive rule reads, for one run (see ``rules.py`` and ``plan.py``).

``N`` and ``N_non_embedding`` come from ``scalelab.model.counts`` for the run's resolved
shape and vocabulary (cached per distinct model config); dotted keys come from the run's
config, where a preset fills model.* keys left null and the dataset fills
data.vocab_size / data.unique_tokens when null. Values already derived for this run (the
``overlay``) take precedence; launcher rules get their extra names (FLOPs, D, steps,
launcher.*) through it (``scalelab.sweep.spec.launcher``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scalelab.config import RunConfig
from scalelab.errors import UserError
from scalelab.model.counts import param_counts
from scalelab.model.presets import resolve_shape
from scalelab.sweep.spec import keys

if TYPE_CHECKING:
    from scalelab.sweep.spec.load import Spec

__all__ = ["RuleEnv"]


class RuleEnv(Mapping):
    """Names a derive rule reads: N, N_non_embedding, and dotted config keys (a preset's
    shape fills model.* keys left null; data.vocab_size null = the dataset's)."""

    def __init__(self, cfg: RunConfig, facts, n_cache: dict, spec: Spec, target: str,
                 overlay: Mapping[str, Any] | None = None):
        self.cfg, self.facts, self.n_cache, self.spec, self.target = cfg, facts, n_cache, spec, target
        self.overlay = overlay or {}

    def _vocab(self) -> int:
        vocab = self.cfg.data.vocab_size or (self.facts.vocab_size if self.facts else None)
        if vocab is None:
            raise self._err("N needs data.vocab_size (the dataset is not on this machine)")
        return vocab

    def evaluate(self, rule, integer: bool) -> float | int:
        """``rule`` on this run; errors name the run and the rule's line. ``integer``
        targets are rounded to the nearest integer (half to even)."""
        try:
            value = rule.evaluate(self)
        except UserError as err:
            if err.file:
                raise
            raise self.spec.error(f"run '{self.cfg.name}': {err.detail}", err.key) from None
        return round(value) if integer else value

    def _err(self, message: str) -> UserError:
        return self.spec.error(f"run '{self.cfg.name}': {message}", f"derive.{self.target}")

    def __getitem__(self, name: str) -> float:
        if name in ("N", "N_non_embedding"):
            key = (self.cfg.model, self._vocab())
            if key not in self.n_cache:
                try:
                    counts = param_counts(resolve_shape(self.cfg.model), key[1])
                except UserError as err:
                    raise self._err(err.detail) from None
                self.n_cache[key] = (counts.total, counts.non_embedding)
            return float(self.n_cache[key][0 if name == "N" else 1])
        value = self.overlay[name] if name in self.overlay else keys.get_value(self.cfg, name)
        if value is None and name.startswith("model."):
            try:
                value = getattr(resolve_shape(self.cfg.model), name.split(".", 1)[1])
            except (UserError, AttributeError):
                value = None
        if value is None and name == "data.vocab_size":
            value = self._vocab()
        if value is None and name == "data.unique_tokens" and self.facts:
            value = self.facts.train_tokens
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._err(f"'{name}' is {value!r}, not a number")
        return float(value)

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0
