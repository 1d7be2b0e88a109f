"""optim/pyproject.toml's torch range holds the torch these tests run on (the lock's 2.13 in
CI; the newest allowed release in the canary, scripts/test_newest.sh in the scalelab
repository), and has an upper bound: ``pip install ./optim`` on a machine without torch must
not pull an untested newer release (with its CUDA libraries, 5.5 GB)."""

import tomllib
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_running_torch_is_inside_the_bounded_range():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    assert any(s.operator == "<" for s in req.specifier), f"{req}: no upper bound"
    running = Version(torch.__version__.split("+")[0])
    assert req.specifier.contains(running), f"torch {running} is outside optim's range {req.specifier}"
    assert not req.specifier.contains(Version("2.12.1"))
