"""Shell conventions of the CLI: ``-h``, ``--version``, completion,
conventional metavars and flags, one-line Slurm errors, the ``executor: auto`` line.

Most cases run ``scalelab.cli.main`` in this process (capsys); the missing-``sbatch`` case
runs ``python -m scalelab`` in a subprocess, as a user would, to see that no traceback
reaches the terminal. Slurm is faked by scripts on PATH (``fake_bin``); PATH holds only
them where a Slurm client must be missing (this machine may have real ones).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from _waits import CEILING_S
from submitit.core.utils import FailedJobError, FailedSubmissionError

from scalelab.cli import main
from scalelab.cli.app import app, type_metavar
from scalelab.sweep.run.backends import ExecutorChoice, SubmitError, choose_executor
from scalelab.sweep.run.backends.slurm import ELSEWHERE, SlurmBackend, slurm_error

REPO = Path(__file__).resolve().parents[2]
FAKE_TARGET = "fake_train:train"
"""The sweep tests' stand-in trainer (never runs here: the fake sbatch queues nothing)."""

SPEC = """name: conv
base:
  model: {preset: cpu-50k}
  data: {seq_len: 16, unique_tokens: 2048, vocab_size: 256, val_tokens: 4096}
  train: {batch_size: 4, eval_every: 16, eval_batches: 2, checkpoint_every: 4, norms_every: 0,
          device: cpu}
grid: {optim.lr: [0.001, 0.003]}
"""

FAKES = {
    "sbatch": 'echo "sbatch $*" >> "$(dirname "$0")/calls.log"; echo "Submitted batch job 100"',
    "sinfo": "echo idle",
    "srun": "exit 1",
    "squeue": "true",
    "sacct": "true",
    "scontrol": 'echo "MaxArraySize            = 1001"',
}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """``scalelab ARGV`` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def fake_bin(folder: Path, *names: str) -> Path:
    """``folder`` holding the fake Slurm clients ``names`` (all of ``FAKES`` when none)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or tuple(FAKES):
        exe = folder / name
        exe.write_text(f"#!/bin/bash\n{FAKES[name]}\n")
        exe.chmod(0o755)
    return folder


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "conv.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    """Help rendered wide enough that no usage line wraps."""
    monkeypatch.setenv("COLUMNS", "200")


# --- -h ------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [[], ["sweep"], ["status"], ["train"], ["fit"], ["data"],
                                  ["data", "prepare"], ["tune"]])
def test_dash_h_is_help(argv, capsys):
    code, out, err = run([*argv, "-h"], capsys)
    assert code == 0 and err == ""
    assert f"Usage: {' '.join(['scalelab', *argv])} [OPTIONS]" in out
    assert re.search(r"--help\s+-h\s", out), out


@pytest.mark.parametrize("argv", [[], ["data"]])
def test_a_group_without_a_command_prints_its_help(argv, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and err == "" and "Usage: " + " ".join(["scalelab", *argv]) in out


def test_dash_h_and_dash_dash_help_print_the_same(capsys):
    assert run(["sweep", "-h"], capsys) == run(["sweep", "--help"], capsys)


# --- --version ---------------------------------------------------------------------------


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git checkout")
def test_version_has_the_commit_in_a_git_checkout(capsys):
    import scalelab

    code, out, err = run(["--version"], capsys)
    assert code == 0 and err == ""
    assert re.fullmatch(rf"scalelab {re.escape(scalelab.__version__)} \(commit [0-9a-f]{{7}}(\+dirty)?\)\n",
                        out), out
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert f"commit {head[:7]}" in out


@pytest.mark.parametrize(("git", "shown"), [
    ({"commit": "0123456789abcdef", "dirty": True}, "scalelab 0.1.0 (commit 0123456+dirty)\n"),
    ({"commit": "0123456789abcdef", "dirty": False}, "scalelab 0.1.0 (commit 0123456)\n"),
    ({"commit": None, "dirty": None, "note": "not a git checkout"}, "scalelab 0.1.0\n"),
])
def test_version_line(git, shown, capsys, monkeypatch):
    import scalelab
    from scalelab.train import meta

    monkeypatch.setattr(scalelab, "__version__", "0.1.0")
    monkeypatch.setattr(meta, "git_info", lambda: git)
    assert run(["--version"], capsys) == (0, shown, "")


# --- completion --------------------------------------------------------------------------


def test_show_completion_prints_a_bash_script(capsys, monkeypatch):
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")  # --show-completion SHELL
    code, out, _ = run(["--show-completion", "bash"], capsys)
    assert code == 0
    assert "complete -o default -F _scalelab_completion scalelab" in out
    assert "_SCALELAB_COMPLETE=complete_bash" in out


def test_install_completion_writes_the_script_under_home(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = run(["--install-completion", "bash"], capsys)
    assert code == 0 and "bash completion installed" in out
    assert (tmp_path / ".bash_completions" / "scalelab.sh").is_file()
    assert "scalelab.sh" in (tmp_path / ".bashrc").read_text()


@pytest.mark.parametrize(("words", "expected"), [("scalelab sw", "sweep"),
                                                 ("scalelab sweep --dry", "--dry-run")])
def test_completion_completes_verbs_and_options(words, expected, capsys, monkeypatch):
    monkeypatch.setenv("_SCALELAB_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(words.split()) - 1))
    code, out, _ = run([], capsys)
    assert code == 0 and out.split() == [expected]


# --- metavars and flags ------------------------------------------------------------------

_TYPER_STYLE = re.compile(r"<(bool|str|int|float|path|file|dir|list\[[^\]]*\])>|\{[a-z_]+\}")
"""What typer writes where the convention is PATH, TEXT, SPEC: ``<bool>``, ``{spec}``."""


def _commands(command, path: tuple[str, ...] = ()):
    """(argv, click command) for ``command`` and every visible command under it."""
    yield list(path), command
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def test_sweep_usage_is_conventional(capsys):
    _, out, _ = run(["sweep", "-h"], capsys)
    assert re.search(r"^ Usage: scalelab sweep \[OPTIONS\] SPEC *$", out, re.MULTILINE), out
    assert re.search(r"^\W*\*\s+SPEC\s+PATH\s+Sweep spec YAML", out, re.MULTILINE), out
    dry = next(line for line in out.splitlines() if "--dry-run" in line)
    assert "<bool>" not in dry and re.search(r"--dry-run\s+Print the plan", dry), dry
    assert re.search(r"--root\s+PATH\s", out)


def test_no_command_shows_typer_style_metavars(capsys):
    seen = 0
    for argv, _ in _commands(typer.main.get_command(app)):
        _, out, _ = run([*argv, "-h"], capsys)
        assert not _TYPER_STYLE.search(out), (argv, _TYPER_STYLE.search(out).group(0), out)
        seen += 1
    assert seen >= 12


def test_boolean_options_are_flags(capsys):
    _, out, _ = run(["data", "prepare", "-h"], capsys)
    assert re.search(r"--force\s+--no-force\s+Replace", out), out
    _, out, _ = run(["retry", "-h"], capsys)
    assert re.search(r"--failed\s+Relaunch", out) and re.search(r"--wait\s+On Slurm", out), out


def test_missing_argument_names_it_in_upper_case(capsys):
    assert run(["sweep"], capsys) == (2, "", "error: Missing argument 'SPEC'.\n")


@pytest.mark.parametrize(("label", "metavar"), [
    ("<path>", "PATH"), ("<str>", "TEXT"), ("<int>", "INTEGER"), ("<float>", "FLOAT"),
    ("<list[str]>", "TEXT"), ("<int range>", "INTEGER RANGE"), ("<a|b>", "[a|b]"),
    ("<int,float>", "INTEGER FLOAT"), ("<dir>", "DIRECTORY"),
])
def test_type_metavar(label, metavar):
    assert type_metavar(label) == metavar


# --- Slurm errors: one line, what to do ---------------------------------------------------


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    assert err.startswith("error: "), err
    return err[len("error: "):-1]


def test_missing_sbatch_is_one_line_exit_2_no_traceback(tmp_path):
    """A subprocess with nothing on PATH: ``--executor slurm`` on a machine without Slurm."""
    env = {**os.environ, "PATH": str(fake_bin(tmp_path / "bin", "sinfo")), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "scalelab", "sweep", str(spec_file(tmp_path)),
                           "--executor", "slurm", "--root", str(tmp_path / "root")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=CEILING_S, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout
    assert _one_line(proc.stderr) == f"executor slurm: no `sbatch` on PATH; {ELSEWHERE}"


def test_missing_srun_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path / "bin", "sbatch", "sinfo")))
    code, _, err = run(["sweep", str(spec_file(tmp_path)), "--executor", "slurm",
                        "--root", str(tmp_path / "root")], capsys)
    assert code == 2
    assert _one_line(err) == (f"executor slurm: `sbatch` at {tmp_path / 'bin' / 'sbatch'} but no "
                              f"`srun` on PATH; {ELSEWHERE}")


def test_slurm_backend_without_srun_refuses_before_the_snapshot(tmp_path, monkeypatch):
    """The backend used directly (as ``retry``, ``tune`` and distillation stages do)."""
    from scalelab.sweep.run.job import JobSpec
    from scalelab.sweep.spec.sections import LauncherConfig

    monkeypatch.setenv("PATH", str(fake_bin(tmp_path / "bin", "sbatch", "sinfo")))
    backend = SlurmBackend(LauncherConfig(executor="slurm"), tmp_path / "sw")
    with pytest.raises(SubmitError) as err:
        backend.submit([JobSpec("r0", "run0", str(tmp_path / "sw" / "runs" / "run0"), FAKE_TARGET)])
    assert str(err.value) == f"slurm: `srun` not found on PATH; {ELSEWHERE}"
    assert not (tmp_path / "sw" / "code").exists()


def test_submitits_could_not_detect_srun_becomes_one_line(tmp_path, monkeypatch):
    """submitit's own check (srun present for us, absent for submitit) never escapes raw."""
    import submitit

    from scalelab.sweep.spec.sections import LauncherConfig

    def no_srun(*args, **kwargs):
        raise RuntimeError('Could not detect "srun", are you indeed on a slurm cluster?')

    monkeypatch.setenv("PATH", str(fake_bin(tmp_path / "bin")))
    monkeypatch.setattr(submitit, "SlurmExecutor", no_srun)
    with pytest.raises(SubmitError) as err:
        SlurmBackend(LauncherConfig(executor="slurm"), tmp_path / "sw", snapshot=False).executor()
    assert str(err.value) == f"slurm: `srun` not found on PATH; {ELSEWHERE}"


@pytest.mark.parametrize(("error", "expected"), [
    (FailedJobError("sbatch: error: invalid partition\nmore"),
     "launcher: sbatch refused 3 run(s): sbatch: error: invalid partition"),
    (FileNotFoundError(2, "No such file or directory", "sbatch"),
     f"slurm: `sbatch` not found on PATH; {ELSEWHERE}"),
    (FailedSubmissionError('Could not make sense of "x"\nJob'),
     ("slurm: sbatch answered without a job id (Could not make sense of \"x\"); check that `sbatch` "
      "on PATH is Slurm's, or use --executor local")),
    (PermissionError(13, "Permission denied", "/sw/jobs"),
     ("slurm: could not submit ([Errno 13] Permission denied: '/sw/jobs'); check that the sweep "
      "directory is writable")),
])
def test_slurm_errors_are_one_line_with_what_to_do(error, expected):
    err = slurm_error(error, 3)
    assert isinstance(err, SubmitError) and str(err) == expected and "\n" not in str(err)


def test_other_errors_are_not_disguised():
    assert slurm_error(KeyError("bug"), 1) is None


# --- executor auto says what it chose ------------------------------------------------------


def test_auto_without_sbatch_chooses_local_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path / "bin", "sinfo")))
    choice = choose_executor(None)
    assert choice == ExecutorChoice("local", "auto", "no `sbatch` on PATH")
    assert choice.line(cpu_only=True) == "executor auto -> local (no `sbatch` on PATH)"
    assert choose_executor("local").line() is None  # named, not chosen: nothing to say


def test_auto_cpu_sweep_on_slurm_says_so_on_launch(tmp_path, capsys, monkeypatch):
    bin_dir = fake_bin(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    argv = ["sweep", str(spec_file(tmp_path)), "--root", str(tmp_path / "root"), "--train-target", FAKE_TARGET]
    code, out, err = run(argv, capsys)
    assert code == 0, (out, err)
    assert err.splitlines()[0] == (
        f"executor auto -> slurm (`sbatch` found at {bin_dir / 'sbatch'}; a CPU-only sweep "
        f"(train.device cpu in every run) goes to Slurm all the same; --executor local runs it "
        f"on this machine)")
    assert "2 launched on slurm" in out and "queued as job(s) 100" in out
    assert len((bin_dir / "calls.log").read_text().splitlines()) == 1  # one array
