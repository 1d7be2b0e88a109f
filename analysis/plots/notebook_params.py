"""A notebook's parameters, set from outside it: the command line, else the environment,
else the defaults written in the notebook.

A notebook declares its parameters once, in its first (``parameters``) cell::

    from analysis.plots.notebook_params import parameters

    SWEEP, N_BOOT = parameters(
        SWEEP="",  # a collected sweep directory; empty: the synthetic runs table
        N_BOOT=200,  # bootstrap resamples per fit
    )

and reads each one, first found wins, from

1. the command line, when the notebook runs as a script: ``--NAME value``,
   ``--NAME=value`` or ``NAME=value`` (NAME in any case, ``-`` for ``_``:
   ``python analysis/notebooks/04_transfer_laws.py --sweep runs/x --best-over optim.lr``);
2. the environment: ``SCALELAB_NB_<NAME>`` (one prefix for every notebook:
   ``SCALELAB_NB_SWEEP=runs/x jupyter lab``);
3. the default in the notebook.

A value is typed by its default: str, int, float, bool (true/false, 1/0, yes/no, on/off; a
bare ``--NAME`` is true) or a list of str (repeat ``--NAME``; in the environment, entries
separated by ``;``). ``--help`` lists the parameters. A bad value or an unknown parameter
on the command line is one line on stderr and exit 2 (with a did-you-mean); inside Jupyter
it is one ``AnalysisInputError``. An unknown ``SCALELAB_NB_`` variable is ignored (it may be
another notebook's), with a line on stderr when it is close to a parameter of this one.

Inside Jupyter (ipykernel, papermill, nbclient) ``sys.argv`` is the kernel's
(``.../ipykernel_launcher.py -f .../kernel-1234.json``), not the notebook's: it is ignored,
and the environment and defaults apply. Papermill's ``-p NAME value`` still works: it
injects its assignments after this cell. Imports only the standard library and
``analysis.errors``, so a bad parameter fails before the notebook's heavy imports.
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisInputError, did_you_mean

__all__ = ["ENV_PREFIX", "parameters", "read_parameters"]

ENV_PREFIX = "SCALELAB_NB_"
"""Environment variables ``SCALELAB_NB_<NAME>`` set a notebook's parameter NAME."""

LIST_SEP = ";"
"""Separates the entries of a list parameter in its environment variable."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_TYPES = {str: "text", int: "an integer", float: "a number", bool: "true or false",
          list: "text (repeatable)"}  # fmt: skip


def in_kernel(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a Jupyter kernel's (``ipykernel_launcher.py``, ``python -m
    ipykernel``, Colab's ``colab_kernel_launcher.py``), not a script's."""
    head = Path(argv[0]).as_posix() if argv else ""
    return "ipykernel" in head or Path(head).stem.endswith("kernel_launcher")


def _kind(name: str, default: Any) -> type:
    if isinstance(default, list) and all(isinstance(v, str) for v in default):
        return list
    for kind in (bool, int, float, str):  # bool before int: True is an int
        if isinstance(default, kind):
            return kind
    raise TypeError(f"parameter {name}: default {default!r} is not a str, int, float, bool or "
                    "list of str")


def _convert(name: str, kind: type, raw: str, where: str) -> Any:
    """``raw`` as ``kind``; a bad value is one AnalysisInputError line naming ``where``."""
    text = raw.strip()
    try:
        if kind is bool:
            low = text.lower()
            if low in _TRUE | _FALSE:
                return low in _TRUE
            raise ValueError
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise AnalysisInputError(
            f"{name} (from {where}) must be {_TYPES[kind]}, got {raw!r}") from None
    return raw


def _split_args(args: Sequence[str], names: Mapping[str, str],
                kinds: Mapping[str, type]) -> list[tuple[str, str, str]]:
    """``(NAME, raw value, where)`` for every parameter on the command line."""
    found: list[tuple[str, str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("-f", "--f") and i < len(args) and args[i].endswith(".json"):
            i += 1  # a kernel's connection file: not the notebook's
            continue
        if arg.startswith("--f=") and arg.endswith(".json"):
            continue
        if arg.startswith("--"):
            key, eq, value = arg[2:].partition("=")
        elif "=" in arg and not arg.startswith("-"):
            key, eq, value = arg.partition("=")
        else:
            raise AnalysisInputError(
                f"unexpected argument {arg!r}: give parameters as --NAME value or NAME=value "
                f"(parameters: {', '.join(kinds)})")
        name = names.get(key.replace("-", "_").upper())
        if name is None:
            shown = f"--{key}" if arg.startswith("--") else key
            raise AnalysisInputError(
                f"unknown parameter {shown}"
                f"{did_you_mean(key.replace('-', '_').upper(), kinds)} "
                f"(parameters: {', '.join(kinds)})")
        where = f"--{key}" if arg.startswith("--") else f"{key}="
        if not eq and arg.startswith("--"):
            nxt = args[i] if i < len(args) else None
            if kinds[name] is bool and (nxt is None or nxt.strip().lower() not in _TRUE | _FALSE):
                value = "true"  # a bare --FLAG
            elif nxt is None:
                raise AnalysisInputError(f"{where} needs a value ({_TYPES[kinds[name]]})")
            else:
                value = nxt
                i += 1
        found.append((name, value, where))
    return found


def read_parameters(defaults: Mapping[str, Any], argv: Sequence[str] | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Each parameter's value (command line, else environment, else default) and the notes
    on ignored environment variables. ``argv``: ``sys.argv`` (its first item the program;
    a kernel's argv is ignored whole). Raises AnalysisInputError (one line) on a bad value,
    an unknown command-line parameter or a non-list parameter given twice."""
    argv = list(sys.argv if argv is None else argv)
    environ = os.environ if environ is None else environ
    kinds = {name: _kind(name, value) for name, value in defaults.items()}
    names = {name.upper(): name for name in kinds}
    values = {name: (list(v) if kinds[name] is list else v) for name, v in defaults.items()}
    notes = []
    from_env = {}
    for var, raw in sorted(environ.items()):
        if not var.startswith(ENV_PREFIX):
            continue
        key = var[len(ENV_PREFIX):].upper()
        if key not in names:
            hint = did_you_mean(key, kinds)
            if hint:
                notes.append(f"{var} is not a parameter of this notebook{hint}: ignored")
            continue
        from_env[names[key]] = (raw, var)
    for name, (raw, var) in from_env.items():
        if kinds[name] is list:
            values[name] = [v.strip() for v in raw.split(LIST_SEP) if v.strip()]
        else:
            values[name] = _convert(name, kinds[name], raw, var)
    args = [] if in_kernel(argv) else argv[1:]
    seen: set[str] = set()
    for name, raw, where in _split_args(args, names, kinds):
        if kinds[name] is list:
            values[name] = (values[name] if name in seen else []) + [raw]
        elif name in seen:
            raise AnalysisInputError(f"{name} given twice on the command line")
        else:
            values[name] = _convert(name, kinds[name], raw, where)
        seen.add(name)
    return values, notes


def usage(program: str, defaults: Mapping[str, Any]) -> str:
    """What ``--help`` prints: how to set each parameter and its default."""
    lines = [f"usage: python {program} [--NAME value | NAME=value ...]",
             f"  else the environment ({ENV_PREFIX}NAME), else the default:"]
    for name, value in defaults.items():
        env = f"{ENV_PREFIX}{name.upper()}"
        lines.append(f"  --{name.lower().replace('_', '-'):12s} {env:24s} "
                     f"{_TYPES[_kind(name, value)]}, default {value!r}")
    return "\n".join(lines)


def parameters(**defaults: Any) -> tuple:
    """The notebook's parameters, in the order given, as a named tuple (unpack it: ``SWEEP,
    N_BOOT = parameters(SWEEP="", N_BOOT=200)``). As a script, a bad parameter prints one
    line on stderr and exits 2, and ``--help`` prints the usage and exits 0."""
    argv = sys.argv
    script = not in_kernel(argv)
    program = Path(argv[0]).name if argv and argv[0] else "notebook"
    if script and any(a in ("-h", "--help") for a in argv[1:]):
        print(usage(program, defaults))
        raise SystemExit(0)
    try:
        values, notes = read_parameters(defaults, argv)
    except AnalysisInputError as err:
        if not script:
            raise
        print(f"{program}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return namedtuple("Parameters", list(defaults))(**values)
