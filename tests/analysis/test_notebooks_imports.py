"""The four notebooks run top to bottom as scripts; analysis never imports torch/scalelab."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _waits import CEILING_S

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "analysis" / "notebooks").glob("*.py"))


def test_four_jupytext_percent_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]
    for p in NOTEBOOKS:
        text = p.read_text()
        assert "format_name: percent" in text and "# %%" in text


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(notebook, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALELAB_NB_")}
    env.update(MPLBACKEND="Agg", ANALYSIS_OUT=str(tmp_path), SCALELAB_NB_N_BOOT="40")
    proc = subprocess.run(
        [sys.executable, str(notebook)], env=env, capture_output=True, text=True, timeout=CEILING_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(tmp_path.glob("*.png")) and list(tmp_path.glob("*.svg"))


def test_analysis_imports_neither_torch_nor_scalelab():
    code = (
        "import sys, analysis, analysis.plots.plots, analysis.report.report\n"
        "import analysis.recipes, analysis.fit.power_law\n"
        "import analysis.synthetic.runs, analysis.fit.constrained, analysis.fit.bootstrap\n"
        "bad = [m for m in ('torch', 'scalelab') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=CEILING_S, check=False)
    assert proc.returncode == 0, proc.stderr
