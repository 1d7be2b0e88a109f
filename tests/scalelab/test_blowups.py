"""Inputs that would allocate without bound are refused first, in one line (exit 2) saying
the bound: scalars multiplied by aliases, ensemble members, bootstrap resamples.

Each runs the real CLI in a subprocess capped at 1 GiB of address space (the refusals use
a fraction of it; before the bounds, each case took gigabytes) and reports the child's
peak resident memory from ``resource.getrusage``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import REPO, assert_one_line, write

from analysis.errors import AnalysisInputError
from analysis.fit.bootstrap import MAX_RESAMPLES, bootstrap_fit
from scalelab import yamlsafe
from scalelab.config import MEMBER_LIMIT
from scalelab.errors import UserError

CAP = 1 << 30
"""Address-space limit of the CLI child (imports take about 0.8 GiB of address space)."""
PEAK_KIB = 400 << 10
"""Peak resident memory a refusal stays under (a plain dry-run peaks near 130 MiB)."""

_CAPPED = """
import json, os, resource, subprocess, sys
cap, args, env = json.loads(sys.argv[1])
proc = subprocess.run([sys.executable, "-m", "scalelab", *args], capture_output=True, text=True,
                      env={**os.environ, **env},
                      preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([proc.returncode, proc.stdout, proc.stderr, peak]))
"""


def capped_cli(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI under ``CAP``; (its process, its peak RSS in KiB)."""
    env = {"SCALELAB_ROOT": str(tmp_path / "root"), "OMP_NUM_THREADS": "1"}
    request = json.dumps([CAP, list(map(str, args)), env])
    out = subprocess.run([sys.executable, "-c", _CAPPED, request],
                         cwd=REPO, capture_output=True, text=True, check=True, timeout=600)
    code, stdout, stderr, peak = json.loads(out.stdout)
    return subprocess.CompletedProcess(args, code, stdout, stderr), peak


def _alias_spec(tmp_path: Path, mib: int = 10, refs: int = 99) -> Path:
    """A ``mib`` MiB scalar under an anchor and ``refs`` aliases of it (1 GB expanded)."""
    lines = ["name: aliases", "base:", "  extra:", f"    big: &big {'x' * (mib << 20)}"]
    lines += [f"    copy{i}: *big" for i in range(refs)]
    return write(tmp_path / "aliases.yaml", "\n".join(lines) + "\n")


def test_a_large_scalar_behind_many_aliases_is_refused_with_bounded_memory(tmp_path):
    spec = _alias_spec(tmp_path)
    proc, peak = capped_cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:4: base.extra: refused: aliases expand its scalars",
                    f"{yamlsafe.MAX_EXPANSION}x the file's length")
    assert peak < PEAK_KIB, peak


def test_alias_expansion_is_bounded_relative_to_the_file():
    small = "a: &a " + "y" * 1000 + "\nb: [" + ", ".join(["*a"] * 90) + "]\n"
    assert len(yamlsafe.load(small, file="s.yaml")["b"]) == 90  # 91 KB: under the 1 Mi floor
    big = "a: &a " + "y" * 100_000 + "\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    with pytest.raises(UserError, match=r"^b\.yaml:2: b: refused: aliases expand its scalars "
                                        r"to more than 1,048,576 characters"):
        yamlsafe.load(big, file="b.yaml")
    plain = "c: " + "z" * (3 << 20) + "\n"  # large but alias-free: never refused
    assert len(yamlsafe.load(plain, file="p.yaml")["c"]) == 3 << 20


def test_members_are_bounded_before_any_run_is_expanded(tmp_path):
    spec = write(tmp_path / "members.yaml", "name: m\nbase:\n  data: {vocab_size: 256, "
                 "unique_tokens: 4096}\nmembers: 100000000\n")
    proc, peak = capped_cli(tmp_path, "sweep", spec, "--dry-run")
    assert_one_line(proc, f"{spec}:4: members: expected an integer in [1, {MEMBER_LIMIT}]",
                    "got 100000000")
    assert peak < PEAK_KIB, peak


def test_bootstrap_count_is_bounded_before_allocation(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for extra in ([], ["--isoflop"]):
        proc, peak = capped_cli(tmp_path, "fit", sweep, "--bootstrap", "100000000000", *extra)
        assert_one_line(proc, "--bootstrap: --bootstrap must be 0 or >= 2 and at most 100,000",
                        "got 100000000000")
        assert peak < PEAK_KIB, peak


def test_bootstrap_entry_point_refuses_too_many_resamples_first():
    class Fit:  # touched only after the count is checked
        def __getattr__(self, name):
            raise AssertionError(f"read {name} before checking the count")

    with pytest.raises(AnalysisInputError, match="exceed the maximum of 100,000"):
        bootstrap_fit(Fit(), n=MAX_RESAMPLES + 1)
