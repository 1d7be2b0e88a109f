"""scalelab-optim stands alone: the wheel built from optim/ holds only the optim package,
depends on torch only (triton and the test tools are extras), carries its version and
licence, and installs into a fresh venv where scalelab is absent and optim's own tests pass.

The fresh venv borrows the running interpreter's site-packages for torch and pytest through
a .pth path entry: .pth files inside that folder (editable installs' finders, scalelab's
among them) are not processed from there, so neither scalelab nor an editable optim is
importable in it; only the wheel's optim is.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import optim

OPTIM_DIR = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built (no network, no build isolation) from a copy of optim/, so the
    checkout gets no build/ or egg-info folders."""
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "optim"
    shutil.copytree(OPTIM_DIR, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(tmp / "dist"), str(src)], cwd=tmp)
    (whl,) = (tmp / "dist").glob("scalelab_optim-*.whl")
    return whl


def test_wheel_holds_optim_only_and_depends_on_torch_only(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(z.read(meta_name))
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"optim"}, packages
    assert "optim/kernels/ns_kernels.py" in names and "optim/scion.py" in names
    assert not [n for n in names if "/tests/" in n or n.endswith("pyproject.toml")]
    assert meta["Name"] == "scalelab-optim" and meta["Version"] == optim.__version__
    assert meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    requires = meta.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert len(core) == 1 and core[0].startswith("torch"), requires
    assert set(core[0].removeprefix("torch").split(",")) == {">=2.13", "<2.16"}, requires
    extras = {r.split("extra ==")[1].strip().strip("'\"") for r in requires if "extra ==" in r}
    assert extras == {"triton", "test"}, requires


def test_installs_into_a_fresh_venv_without_scalelab_and_its_tests_pass(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], cwd=tmp_path)
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path).strip())
    (site / "_borrowed_torch.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run_dir = tmp_path / "run"  # cwd: not the checkout, so only the installed optim is importable
    run_dir.mkdir()
    probe = ("import importlib.util, optim; print(optim.__file__); "
             "print(importlib.util.find_spec('scalelab'))")
    where, scalelab = _run([str(py), "-c", probe], run_dir).split()
    assert Path(where).is_relative_to(site), where
    assert scalelab == "None"
    tests = OPTIM_DIR / "tests"
    out = _run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(OPTIM_DIR / "pyproject.toml"),
                "--rootdir", str(OPTIM_DIR), str(tests / "test_adamw.py"), str(tests / "test_weights_only.py"),
                str(tests / "test_newton_schulz.py")], run_dir)
    assert " passed" in out and "failed" not in out, out[-2000:]
