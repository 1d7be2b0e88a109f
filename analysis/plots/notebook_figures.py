"""Figures in the notebooks: shown inline in Jupyter, saved for scripts and CI.

``show(fig, name)`` writes ``$ANALYSIS_OUT/<name>.png`` and ``.svg`` when ANALYSIS_OUT is
set (CI counts them), then hands the figure to ``plt.show()`` under an interactive or
inline backend, or closes it under Agg (a headless script run).
"""

from __future__ import annotations

import os
from pathlib import Path

from analysis.plots.plots import save_figure
from analysis.plots.style import plt

__all__ = ["show"]


def show(fig, name: str) -> None:
    """Save (when ``$ANALYSIS_OUT`` is set) and display ``fig``."""
    out = os.environ.get("ANALYSIS_OUT")
    if out:
        save_figure(fig, Path(out) / name, close=False)
    if plt.get_backend().lower() == "agg":
        plt.close(fig)
    else:
        plt.show()
