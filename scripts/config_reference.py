"""Print the run-config reference (docs/reference.md) from scalelab/config.py, and
the launcher reference (its second table) from scalelab/sweep/spec/sections.py.

Each field's documentation is the string literal right under its declaration, and its
range the one it declares (``strict.bounded``), so the references are generated from the
code and cannot drift: tests/test_readme.py checks that
docs/reference.md holds exactly this output between each pair of markers.

    python scripts/config_reference.py            # print
    python scripts/config_reference.py --write    # rewrite docs/reference.md between the markers
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- config-reference:begin -->", "<!-- config-reference:end -->"
SECTIONS = {
    "RunConfig": "",
    "ModelConfig": "model.",
    "DataConfig": "data.",
    "OptimConfig": "optim.",
    "TrainConfig": "train.",
    "DistillConfig": "distill.",
}
LAUNCHER = ("<!-- launcher-reference:begin -->", "<!-- launcher-reference:end -->",
            "scalelab/sweep/spec/sections.py", {"LauncherConfig": "launcher."})
"""Markers, source file and class of the launcher reference."""


def reference(source: str = "scalelab/config.py", sections: dict[str, str] = SECTIONS) -> str:
    """The markdown table of every field of ``sections`` (class name -> key prefix)."""
    tree = ast.parse((ROOT / source).read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    lines = ["| key | type | default | range | meaning |", "|---|---|---|---|---|"]
    for cls_name, prefix in sections.items():
        cls = classes.get(cls_name)
        if cls is None:
            continue
        ranges = _ranges(source, cls_name)
        body = cls.body
        for i, node in enumerate(body):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = ast.unparse(node.annotation)
            if ann.endswith("Config"):
                continue  # nested section, listed under its own prefix
            default = _default(node.value)
            doc = ""
            if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr):
                value = body[i + 1].value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    doc = " ".join(value.value.split())
            rng = ranges.get(node.target.id, "")
            cells = [f"`{prefix}{node.target.id}`", f"`{ann}`", f"`{default}`", rng, doc]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def _ranges(source: str, cls_name: str) -> dict[str, str]:
    """Field name -> its declared range in words (``scalelab.strict.Range``)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from scalelab.strict import RANGE

    cls = getattr(importlib.import_module(source.removesuffix(".py").replace("/", ".")), cls_name)
    return {f.name: str(f.metadata[RANGE]) for f in dataclasses.fields(cls) if RANGE in f.metadata}


def _default(value: ast.expr | None) -> str:
    if value is None:
        return "required"
    if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("bounded"):
        return ast.unparse(value.args[0])  # strict.bounded(default, ...): its range has a column
    if isinstance(value, ast.Call) and any(k.arg == "default_factory" for k in value.keywords):
        factory = next(k.value for k in value.keywords if k.arg == "default_factory")
        return {"dict": "{}", "list": "[]", "tuple": "()"}.get(ast.unparse(factory), "…")
    return ast.unparse(value)


def launcher_reference() -> str:
    return reference(*LAUNCHER[2:])


def write_reference() -> None:
    path = ROOT / "docs" / "reference.md"
    text = path.read_text()
    for begin, end, table in ((BEGIN, END, reference()), (*LAUNCHER[:2], launcher_reference())):
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{table}\n{end}{tail}"
    path.write_text(text)


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_reference()
    else:
        print(reference())
        print()
        print(launcher_reference())
