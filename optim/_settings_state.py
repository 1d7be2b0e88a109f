"""Copies and pickles of an optimizer whose settings are attributes.

``torch.optim.Optimizer.__getstate__`` keeps only ``defaults``, ``state`` and ``param_groups``:
torch's own optimizers hold every setting in ``defaults``. Muon, AdamW and Scion hold theirs as
attributes (``foreach``, ``seed``, ``stochastic_rounding``, ...), so ``copy.deepcopy(opt)`` or a
pickle round trip made an optimizer whose next ``step()`` raised AttributeError. The mixin adds
the listed attributes to the pickled state; scratch (Muon's CPU workspace) is made anew, empty;
a deep copy shares the ``_SHARED`` attributes (a process group: one communicator, which
neither copies nor pickles) with the original.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["SettingsState"]


class SettingsState:
    """Mixin, first in the bases of a ``torch.optim.Optimizer`` subclass."""

    _SETTINGS: tuple[str, ...] = ()
    """Attribute names that ``__getstate__`` keeps beside torch's three keys."""
    _SHARED: tuple[str, ...] = ()
    """Of those, the ones a deep copy takes by reference."""

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()  # type: ignore[misc]
        return {**state, **{name: getattr(self, name) for name in self._SETTINGS}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self._new_scratch()

    def __deepcopy__(self, memo: dict) -> SettingsState:
        for name in self._SHARED:
            value = getattr(self, name)
            memo[id(value)] = value  # deepcopy returns what the memo holds: the same object
        twin = self.__class__.__new__(self.__class__)
        memo[id(self)] = twin
        twin.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return twin

    def _new_scratch(self) -> None:
        """Rebuild what is never copied (nothing by default)."""
