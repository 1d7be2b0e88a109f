"""Helpers shared by the YAML fuzz tests: walk to a key's parent, dump a tree as block YAML."""

from __future__ import annotations

from typing import Any

import yaml


def parent_of(tree: Any, path: tuple) -> Any:
    """The mapping or list that holds the last element of ``path``."""
    for part in path[:-1]:
        tree = tree[part]
    return tree


def dump(tree: Any) -> str:
    return yaml.safe_dump(tree, sort_keys=False, default_flow_style=False)


def paths(tree: Any, prefix: tuple = ()):
    """(path, value) for every node of a tree of mappings and lists; list items get integer
    path parts."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for k, v in items:
        yield prefix + (k,), v
        if isinstance(v, (dict, list)):
            yield from paths(v, prefix + (k,))
