"""File-name stems for one figure per recipe: the one rule ``report.md``'s sections (the joint
laws, the precision laws) name their figures by.

A recipe's name is the user's (``--recipe NAME=...``, ``extra.recipe``): it may hold
characters no file name should (``../x``, spaces), and two names may differ only there
("a b" and "a_b"). Each stem is the name with every run of other characters than letters,
digits, ``_``, ``.`` and ``-`` made one ``_``, stripped of leading/trailing ``_`` and ``.``
("recipe" if nothing is left), prefixed with ``-``, and made unique among the names by a
counter (``-a_b``, ``-a_b-2``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["recipe_stems"]

_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def recipe_stems(names: Sequence[str]) -> list[str]:
    """One safe, unique stem suffix per name, in order (module docstring)."""
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        stem = "-" + (_SLUG.sub("_", name).strip("_.") or "recipe")
        k, unique = 2, stem
        while unique in seen:
            unique, k = f"{stem}-{k}", k + 1
        seen.add(unique)
        out.append(unique)
    return out
