"""The typer application every verb module registers on (one module per verb group), and
the shell conventions every command shares (README.md, "Common commands"):

- ``-h`` as well as ``--help``, on the app and on every command;
- ``scalelab --version``: the package version and the git commit of the checkout;
- ``scalelab --install-completion`` / ``--show-completion`` (typer's);
- help written the conventional way: arguments and values in upper case (``SPEC``,
  ``PATH``, ``INTEGER``), boolean options as bare flags (``--dry-run``, ``--force /
  --no-force``), never ``{spec}``, ``<path>`` or ``--dry-run <bool>``.

Typer builds every parameter itself (it has no hook for their classes), so the commands
and groups made through ``LabTyper`` re-class typer's arguments and options to
``_Argument`` / ``_Option`` when asked for their parameters: subclasses that change only
how a parameter is shown. A verb module registers with ``@app.command`` (or makes its own
group with ``LabTyper``) and gets all of this without declaring anything.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["HELP_OPTION_NAMES", "ConventionalCommand", "ConventionalGroup", "LabTyper", "app",
           "type_metavar", "version_line"]

HELP_OPTION_NAMES = ["-h", "--help"]

_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN",
               "path": "PATH", "file": "FILE", "dir": "DIRECTORY", "datetime": "DATETIME",
               "uuid": "UUID", "bytes": "BYTES"}
"""Typer's type labels -> click's conventional metavars."""


def type_metavar(label: str) -> str:
    """Typer's type label as a conventional metavar: ``<path>`` -> ``PATH``, ``<str>`` ->
    ``TEXT``, ``<list[str]>`` -> ``TEXT``, ``<int range>`` -> ``INTEGER RANGE``,
    ``<int,float>`` -> ``INTEGER FLOAT``, choices ``<a|b>`` -> ``[a|b]``."""
    inner = label.strip().removeprefix("<").removesuffix(">")
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[len("list["):-1]
    if "|" in inner:
        return f"[{inner}]"
    ranged = inner.endswith(" range")
    names = [_TYPE_NAMES.get(part, part.upper()) for part in inner.removesuffix(" range").split(",")]
    return " ".join(names) + (" RANGE" if ranged else "")


class _Argument(TyperArgument):
    """A typer argument shown as ``SPEC`` (required), ``[SPEC]`` (optional), ``SPEC...``
    (many), with its type as ``PATH``: also in errors ("Missing argument 'SPEC'")."""

    @property
    def display_name_raw(self) -> str:
        return self.metavar or (self.name or "").upper()

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx: Any) -> str | None:
        return type_metavar(self.display_type(ctx))


class _Option(TyperOption):
    """A typer option whose value is shown as ``PATH``, ``TEXT``, ...; a boolean flag
    shows no value at all (``--dry-run``, ``--force / --no-force``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is not None:
            return self.metavar
        if self.is_flag:
            return None
        shown = type_metavar(self.display_type(ctx))
        return shown + ("..." if self.nargs != 1 else "")


def _conventional(params: list[Any]) -> list[Any]:
    """Re-class typer's own arguments and options (exactly those classes) as ``_Argument``
    and ``_Option``; idempotent, other parameter classes untouched. Returns ``params``."""
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = _Argument
        elif type(param) is TyperOption:
            param.__class__ = _Option
    return params


class ConventionalCommand(TyperCommand):
    """A typer command whose parameters (and help option) are shown the conventional way."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _conventional(super().get_params(ctx))


class ConventionalGroup(TyperGroup):
    """A typer group whose options (and help option) are shown the conventional way."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _conventional(super().get_params(ctx))


class LabTyper(typer.Typer):
    """``typer.Typer`` whose groups and commands follow the conventions above (``-h``,
    upper-case metavars, bare boolean flags). Sub-apps (``scalelab data``) use it too."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", ConventionalGroup)
        kwargs.setdefault("context_settings", {"help_option_names": HELP_OPTION_NAMES})
        kwargs.setdefault("pretty_exceptions_enable", False)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None,
                **kwargs: Any) -> Any:
        """``typer.Typer.command``, with ``ConventionalCommand`` as the default class."""
        return super().command(name, cls=cls or ConventionalCommand, **kwargs)


def version_line() -> str:
    """``scalelab VERSION (commit abc1234)``, ``+dirty`` after the hash when tracked files
    have changes; just ``scalelab VERSION`` outside a git checkout (``git_info``, the
    commit ``meta.json`` records)."""
    import scalelab
    from scalelab.train.meta import git_info  # imports torch: only when asked

    git = git_info()
    if not git.get("commit"):
        return f"scalelab {scalelab.__version__}"
    return f"scalelab {scalelab.__version__} (commit {git['commit'][:7]}{'+dirty' if git['dirty'] else ''})"


def _print_version(value: bool) -> None:
    """``--version``'s callback: print ``version_line()`` and exit 0."""
    if value:
        typer.echo(version_line())
        raise typer.Exit()


app = LabTyper(
    name="scalelab",
    help="A scaling-law lab: sweep -> train -> collect -> fit -> report.",
    no_args_is_help=True,
    add_completion=True,
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the version and git commit, then exit."),
) -> None:
    """The app's own options (``--version``; typer adds the completion ones)."""
