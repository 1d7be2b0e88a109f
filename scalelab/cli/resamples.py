"""The ``--bootstrap`` option's check, shared by ``scalelab fit`` and ``scalelab report``."""

from __future__ import annotations

from scalelab.errors import UserError

__all__ = ["BOOTSTRAP_HELP", "check_bootstrap"]

BOOTSTRAP_HELP = ("Seeded bootstrap resamples: 0 (none) or 2 to 100,000 (drawn up front: 16 "
                  "bytes per resample and point).")


def check_bootstrap(resamples: int) -> None:
    """--bootstrap: 0 (none) or 2 .. ``analysis.fit.bootstrap.MAX_RESAMPLES``, checked before
    any data is read or any resample allocated."""
    from analysis.fit.bootstrap import MAX_RESAMPLES

    if resamples < 0 or resamples == 1 or resamples > MAX_RESAMPLES:
        raise UserError(f"--bootstrap must be 0 or >= 2 and at most {MAX_RESAMPLES:,} (resamples "
                        f"are drawn up front: 16 bytes per resample and point), got {resamples}",
                        key="--bootstrap")
