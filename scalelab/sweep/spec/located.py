"""Safe YAML loading that remembers the line of every mapping key and list item.

Errors in a sweep spec name the file, the key path and the line (``scalelab.sweep.spec.load``). The
composed node graph (``scalelab.yamlsafe``: limits and duplicate keys checked there)
carries marks; we walk it once to index ``key path -> line`` and then construct plain
Python data from the same nodes (SafeLoader: no arbitrary objects).
Key paths use the same spelling as ``scalelab.strict``: ``a.b`` for mappings and
``a[0]`` for list items, e.g. ``zip[0].optim.lr`` or ``grid.optim.lr[2]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scalelab import yamlsafe
from scalelab.errors import UserError

__all__ = ["Located", "load_located", "parse_located"]


@dataclass(frozen=True)
class Located:
    """Parsed YAML data plus where each key path sits in the file."""

    data: Any
    file: str
    lines: dict[str, int] = field(default_factory=dict)
    """Key path -> 1-based line of the key (mappings) or of the item (lists)."""
    text: str = field(default="", repr=False)
    """The YAML text as read."""

    def line(self, key: str | None) -> int | None:
        """Line of ``key`` or of its closest ancestor that has one."""
        while key:
            if key in self.lines:
                return self.lines[key]
            cut = max(key.rfind("."), key.rfind("["))
            key = key[:cut] if cut > 0 else ""
        return None

    def where(self, key: str | None) -> str:
        """``file:line`` for ``key`` (just ``file`` when no line is known)."""
        line = self.line(key)
        return f"{self.file}:{line}" if line else self.file

    def error(self, message: str, key: str | None) -> UserError:
        """A one-line UserError naming file, line and key path."""
        return UserError(message, file=self.where(key), key=key)

    def relocate(self, err: UserError) -> UserError:
        """Re-issue an error raised without line information (e.g. by ``strict.build``)."""
        return self.error(err.detail, err.key)


def load_located(path: str | Path) -> Located:
    """Read and parse ``path``; unreadable or non-UTF-8 files and bad YAML are UserErrors."""
    return parse_located(yamlsafe.read_text(path), file=str(path))


def parse_located(text: str, *, file: str) -> Located:
    """Parse YAML text (``scalelab.yamlsafe``: safe, alias-bounded, no duplicate keys) and
    index the line of every key path."""
    node = yamlsafe.compose(text, file=file)
    lines: dict[str, int] = {}
    if node is not None:
        _index(node, "", lines)
    data = None if node is None else yamlsafe.construct(node, file=file)
    return Located(data=data, file=file, lines=lines, text=text)


def _index(node: yaml.Node, path: str, lines: dict[str, int]) -> None:
    """Key path -> line, walking the graph with aliases expanded (bounded by yamlsafe's
    node and nesting limits, checked before)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "<complex>"
            sub = f"{path}.{key}" if path else key
            lines[sub] = key_node.start_mark.line + 1
            _index(value_node, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            lines[sub] = item.start_mark.line + 1
            _index(item, sub, lines)
