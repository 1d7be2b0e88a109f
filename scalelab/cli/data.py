"""``scalelab data prepare|info``: make and inspect token directories (scalelab.data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scalelab.cli.app import LabTyper, app

data_app = LabTyper(help="Token datasets: prepare text files, inspect a token directory.",
                    no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("prepare")
def prepare_cmd(
    inputs: Annotated[
        list[str], typer.Argument(help="Files, directories or globs ('**' recursive).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Token directory to create.")],
    tokenizer: Annotated[str, typer.Option(help="'bytes' or a tokenizers JSON file.")] = "bytes",
    force: Annotated[bool, typer.Option(help="Replace an existing token directory.")] = False,
) -> None:
    """Tokenize text files into OUT (tokens.bin + meta.json); use it as data.dataset=OUT."""
    from scalelab.data.format import read_token_dir
    from scalelab.data.prepare import prepare

    path = prepare(inputs, out, tokenizer=tokenizer, force=force)
    meta = read_token_dir(path).meta
    typer.echo(
        f"{path}: {meta['n_tokens']:,} tokens ({meta['dtype']}), {meta['n_documents']} documents, "
        f"vocab {meta['vocab_size']}, tokenizer {meta['tokenizer_id']}"
    )


@data_app.command("info")
def info_cmd(
    directory: Annotated[str, typer.Argument(metavar="DIR", help="A token directory, or 'default'.")],
    verify: Annotated[bool, typer.Option(help="Re-hash tokens.bin against the header.")] = False,
) -> None:
    """Print a token directory's header (DIR 'default' builds the embedded corpus)."""
    from scalelab.data.corpus import default_corpus
    from scalelab.data.format import read_token_dir

    path = default_corpus() if directory == "default" else Path(directory)
    meta = read_token_dir(path, verify=verify).meta
    typer.echo(f"path: {path}")
    for key, value in meta.items():
        if key == "sources":
            shown = ", ".join(value[:3]) + (
                f", ... ({len(value)} in all)" if len(value) > 3 else ""
            )
            typer.echo(f"sources: {shown}")
        else:
            typer.echo(f"{key}: {value}")
    if verify:
        typer.echo("sha256: verified")
