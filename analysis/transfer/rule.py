"""A transfer law as a sweep spec's derive rule (``scalelab.sweep.spec.rules`` grammar).

A rule may read ``N`` (total parameters) and numeric config keys, so each variable is
written in those names:

    N   ``N``                                              exact: the runs table's N
    D   ``(data.unique_tokens * data.epochs)``            U·E; the runs' D_total is U·E
                                                          rounded down to whole steps
    U   ``data.unique_tokens``                            exact: the runs' D_unique
    C   ``(6 * N * data.unique_tokens * data.epochs)``   6·N·D (Kaplan et al. 2020); the
                                                          runs' flops add attention FLOPs

``D`` and ``C`` are therefore approximations of the columns the law was fitted on;
``approximations`` names them so the CLI can say so.
"""

from __future__ import annotations

from analysis.transfer.law import TransferLaw

__all__ = ["RULE_NAMES", "approximations", "derive_rule"]

RULE_NAMES: dict[str, str] = {
    "N": "N",
    "D": "(data.unique_tokens * data.epochs)",
    "U": "data.unique_tokens",
    "C": "(6 * N * data.unique_tokens * data.epochs)",
}
_APPROX = {
    "D": "D as data.unique_tokens * data.epochs (the runs' D_total rounds down to whole steps)",
    "C": "C as 6 * N * D (the runs' flops also count attention FLOPs)",
}


def derive_rule(law: TransferLaw) -> str:
    """``c * N ** a [* D ** b]``: the law as a derive rule's text (c to 6 significant
    digits, exponents to 4 decimals; a negative exponent in parentheses)."""
    parts = [f"{law.c:.6g}"]
    for name, a in zip(law.x, law.coef[1:]):
        parts.append(f"{RULE_NAMES[name]} ** ({a:.4f})" if a < 0 else f"{RULE_NAMES[name]} ** {a:.4f}")
    return " * ".join(parts)


def approximations(law: TransferLaw) -> list[str]:
    """What the rule writes approximately (empty for an N law)."""
    return [_APPROX[v] for v in law.x if v in _APPROX]
