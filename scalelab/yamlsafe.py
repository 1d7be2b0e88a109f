"""The one YAML reader of the project: safe, bounded, strict, with one-line errors.

Every YAML the project reads (run configs, sweep specs, a sweep's spec.yaml copy,
override values) goes through :func:`compose`/:func:`construct` (or :func:`load`, both in
one), which wrap PyYAML's safe loader (libyaml's ``CSafeLoader`` when present) and add:

- **Alias limits.** An alias (``*name``, also ``<<: *name``) makes the composed node graph
  share one node; whoever walks the data afterwards (line indexing, strict coercion, the
  run identity) walks every alias expanded, so nine aliases on each of eight levels (the
  "billion laughs" shape) is 9**8 = 43M nodes from a 400-byte file. A document is refused,
  before anything expands it, when it holds more than :data:`MAX_ALIASES` alias events
  (counted on the parser's flat event stream) or expands to more than :data:`MAX_NODES`
  nodes (counted on the composed graph with memoisation by node identity). Both checks
  cost O(file size) time and memory, however large the expansion would be. A recursive
  alias (``&a [*a]``) is refused too. Real configs use a handful of aliases (or none) and
  a few hundred nodes; the largest sweep specs of this repository have under 1,000.
  Few aliases of a large scalar amplify too (99 references to a 10 MB string are 1 GB to
  whoever walks them), so the same walk adds up the characters of every scalar with
  aliases expanded and refuses a document whose expansion exceeds
  max(:data:`MAX_EXPANSION` × its own length, :data:`MIN_EXPANDED_CHARS`): memory
  downstream stays within a fixed multiple of the file size.
- **Nesting limit.** libyaml's composer recurses in C and kills the process (SIGSEGV) on
  some 50,000 nested brackets; more than :data:`MAX_DEPTH` levels are refused on the event
  stream, before composing. Real configs nest under 10 levels.
- **Duplicate keys.** PyYAML silently keeps the last of two equal keys of one mapping; here
  that is an error naming the line and the key path.
- **Errors.** Everything wrong with the text is a one-line :class:`UserError` naming
  ``file:line`` (syntax errors are the subclass :class:`YamlSyntaxError`, which callers
  parsing a value that may be a plain string can tell apart). :func:`read_text` makes
  unreadable and non-UTF-8 files one-line errors as well.

Key paths use the spelling of ``scalelab.strict``: ``a.b`` for mappings, ``a[0]`` for list
items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scalelab.errors import UserError
from scalelab.store.small_file import Unreadable, read_small

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_EXPANSION", "MAX_NODES", "MIN_EXPANDED_CHARS",
           "YamlSyntaxError", "compose", "construct", "load", "read_text"]

MAX_ALIASES = 100
"""Most alias references (``*name``) in one document; legit configs use a handful."""
MAX_NODES = 100_000
"""Most nodes of one document with every alias expanded (scalars, lists and mappings;
a mapping entry is two: key and value). About 1 MB of alias-free YAML."""
MAX_DEPTH = 100
"""Most levels of lists and mappings nested in each other."""
MAX_EXPANSION = 4
"""Most characters of scalars, with aliases expanded, per character of the document
(without aliases the scalars hold at most the document's characters)."""
MIN_EXPANDED_CHARS = 1 << 20
"""Expanded scalar characters always allowed (1 Mi), however short the document."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it (about 10x faster; the same nodes and marks)."""


class YamlSyntaxError(UserError):
    """Text that is not YAML at all (as opposed to YAML refused by the limits above)."""


MAX_FILE_BYTES = 64 << 20
"""The largest YAML file read (64 MiB): a spec or config is kilobytes; a device
(``/dev/zero``), a FIFO or a huge file is refused before it fills memory or blocks."""


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path``; unreadable, oversized (``MAX_FILE_BYTES``), non-regular
    or non-UTF-8 files are one-line UserErrors."""
    try:
        data = read_small(str(path), MAX_FILE_BYTES).data
    except FileNotFoundError:
        raise UserError("no such file", file=str(path)) from None
    except NotADirectoryError:
        raise UserError("no such file (a part of the path is a file, not a directory)",
                        file=str(path)) from None
    except Unreadable as err:
        raise UserError(f"cannot read file ({err})", file=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start} "
                        f"cannot be decoded)", file=str(path)) from None


def load(text: str, *, file: str) -> Any:
    """``yaml.safe_load(text)`` with the limits and checks above (None for no document)."""
    node = compose(text, file=file)
    return None if node is None else construct(node, file=file)


def compose(text: str, *, file: str) -> yaml.Node | None:
    """Parse ``text`` into its node graph (None for an empty document), checked for the
    limits and duplicate keys; nothing is expanded or constructed yet."""
    _scan(text, file)
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as err:
        raise _syntax_error(err, file) from None
    except RecursionError:
        raise YamlSyntaxError("invalid YAML: nesting too deep", file=file) from None
    finally:
        loader.dispose()
    if node is not None:
        try:
            _Check(file, max(MAX_EXPANSION * len(text), MIN_EXPANDED_CHARS)).visit(node, "")
        except RecursionError:
            raise YamlSyntaxError("invalid YAML: nesting too deep", file=file) from None
    return node


def construct(node: yaml.Node, *, file: str) -> Any:
    """Plain Python data (SafeLoader types) from a node graph that :func:`compose` checked."""
    loader = _LOADER("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise _syntax_error(err, file) from None
    except RecursionError:
        raise YamlSyntaxError("invalid YAML: nesting too deep", file=file) from None
    finally:
        loader.dispose()


def _scan(text: str, file: str) -> None:
    """Alias count and nesting depth from the parser's flat event stream (no recursion,
    nothing composed)."""
    loader = _LOADER(text)
    depth = aliases = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _refused(f"more than {MAX_DEPTH} levels of nesting", event, file)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise _refused(f"more than {MAX_ALIASES} aliases in one document", event, file)
    except yaml.YAMLError as err:
        raise _syntax_error(err, file) from None
    finally:
        loader.dispose()


def _refused(what: str, event: yaml.Event, file: str) -> UserError:
    return UserError(f"refused: {what}", file=f"{file}:{event.start_mark.line + 1}")


class _Check:
    """One walk over a composed graph: expanded-node count, expanded scalar characters,
    recursive aliases, duplicate keys."""

    def __init__(self, file: str, max_chars: int):
        self.file, self.max_chars = file, max_chars
        self.sizes: dict[int, tuple[int, int]] = {}
        """id(node) -> its (nodes, scalar characters) with aliases expanded (each node is
        walked once)."""
        self.open: set[int] = set()
        """Nodes being walked (a node met again while open is a recursive alias)."""

    def visit(self, node: yaml.Node, path: str) -> tuple[int, int]:
        key = id(node)
        if key in self.sizes:  # a second reference to a node: an alias, counted already
            return self.sizes[key]
        if key in self.open:
            raise self._error("refused: recursive alias (the node contains itself)", node, path)
        self.open.add(key)
        size = (1, 0)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None
                sub = f"{path}.{name}" if path else str(name)
                if name is not None:
                    if name in seen:
                        raise self._error("duplicate key (YAML would silently keep the last one)",
                                          key_node, sub)
                    seen.add(name)
                size = self._add(size, self.visit(key_node, sub), node, path)
                size = self._add(size, self.visit(value_node, sub), node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                size = self._add(size, self.visit(item, f"{path}[{i}]"), node, path)
        else:
            size = (1, len(node.value))
        self.open.discard(key)
        self.sizes[key] = size
        return size

    def _add(self, size: tuple[int, int], sub: tuple[int, int], node: yaml.Node,
             path: str) -> tuple[int, int]:
        """``size`` + ``sub``, refused past the bounds."""
        nodes, chars = size[0] + sub[0], size[1] + sub[1]
        if nodes > MAX_NODES:
            raise self._error(f"refused: more than {MAX_NODES:,} YAML nodes with aliases expanded",
                              node, path)
        if chars > self.max_chars:
            raise self._error(
                f"refused: aliases expand its scalars to more than {self.max_chars:,} characters "
                f"({MAX_EXPANSION}x the file's length, at least {MIN_EXPANDED_CHARS:,})",
                node, path)
        return nodes, chars

    def _error(self, message: str, node: yaml.Node, path: str) -> UserError:
        return UserError(message, file=f"{self.file}:{node.start_mark.line + 1}", key=path or None)


def _syntax_error(err: yaml.YAMLError, file: str) -> YamlSyntaxError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or getattr(err, "context", None)
    if problem is None:  # e.g. ReaderError (control characters): no marks, just a message
        problem = getattr(err, "reason", None) or str(err)
    where = f"{file}:{mark.line + 1}" if mark is not None else file
    return YamlSyntaxError(f"invalid YAML: {' '.join(str(problem).split())}", file=where)
