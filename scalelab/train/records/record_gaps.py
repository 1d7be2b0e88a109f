"""Which steps did corrupt record files take with them? Pure arithmetic on part names.

Part ``part-<S>.parquet`` of a table holds the rows logged after the table's previous
part (by name, readable or not) up to and including ``S``; a compacted file holds every
row up to its last step. The steps up to the resume point that no readable file accounts
for are the ones lost: a run reports them (``records.Records``) and never re-creates them.
"""

from __future__ import annotations

__all__ = ["covered", "lost_steps", "uncovered"]


def covered(compact_last: int | None, part_steps: list[int], readable: set[int]
            ) -> list[tuple[int, int]]:
    """The (first, last) step spans the readable files account for: ``compact_last`` is the
    last step of a readable compacted file (None: none), ``part_steps`` the steps of every
    part file, ``readable`` those of the readable ones."""
    spans = [] if compact_last is None else [(0, compact_last)]
    prev = -1
    for step in sorted(part_steps):
        if step in readable:
            spans.append((prev + 1, step))
        prev = step
    return spans


def uncovered(spans: list[tuple[int, int]], upto: int) -> list[tuple[int, int]]:
    """The ranges of steps in ``[0, upto]`` that no span ``(first, last)`` (inclusive)
    covers, in order."""
    gaps, nxt = [], 0
    for first, last in sorted(spans):
        if first > nxt:
            gaps.append((nxt, min(first - 1, upto)))
        nxt = max(nxt, last + 1)
        if nxt > upto:
            break
    if nxt <= upto:
        gaps.append((nxt, upto))
    return [g for g in gaps if g[0] <= g[1]]


def lost_steps(compact_last: int | None, part_steps: list[int], readable: set[int],
               upto: int) -> str:
    """The lost steps up to ``upto`` as text ('6-10, 21'), '' when none are."""
    gaps = uncovered(covered(compact_last, part_steps, readable), upto)
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in gaps)
