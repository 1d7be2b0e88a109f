"""The torch.distributed.checkpoint (DCP) files of a sharded checkpoint, read without running code.

A sharded checkpoint directory (written by ``scalelab.train.checkpoint.training_state``, verified by
``scalelab.train.checkpoint.directory``) holds, next to ``state.pt`` and ``manifest.json``:

    .metadata          DCP's index: which file holds which chunk of which tensor
    __<rank>_0.distcp  one file per rank: its shards of the model and optimizer state

under ``get_state_dict``'s keys: ``model.<param name>``, ``optimizer.state.<param name>.<key>``
and ``optimizer.param_groups.<param name>.<key>``. DCP reshards on load: the files load
into any number of ranks, sharded or not (``load``), or whole into one process
(``read``).

Safety: DCP itself unpickles ``.metadata`` with ``pickle.load`` and its non-tensor items
(the param-group hyperparameters) with ``torch.load(weights_only=False)``; a crafted file
would run code. Here the metadata goes through an allowlisting unpickler (DCP's metadata
dataclasses, ``torch.Size``, dtypes, layouts, paths: ``check_metadata`` names anything
else) and non-tensor items through ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import io
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.default_planner import (
    DefaultLoadPlanner,
    _EmptyStateDictLoadPlanner,
)
from torch.distributed.checkpoint.metadata import StorageMeta
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

from analysis.tables.bounded_read import LIMITS, read_bounded
from scalelab.train.checkpoint.manifest import DCP_METADATA as METADATA_FILE

__all__ = ["METADATA_FILE", "check_metadata", "load", "read", "save"]

_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_ALLOWED = {
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # maps a layout's name to torch.strided etc.
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("pathlib", "Path"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("collections", "OrderedDict"),
}


def _defined_there(module: str, name: str) -> bool:
    """A class defined in ``module`` itself (not a name it imports, such as ``os``)."""
    return getattr(getattr(sys.modules[module], name, None), "__module__", None) == module


class _MetadataUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the globals a DCP ``.metadata`` needs."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = (
            (module, name) in _ALLOWED
            or (module == _METADATA_MODULE and _defined_there(module, name))
            or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype))
        )
        if not allowed:
            raise pickle.UnpicklingError(f"{METADATA_FILE} asks for {module}.{name}")
        return super().find_class(module, name)


def _read_metadata(directory: Path):
    """The checkpoint's ``.metadata``, read through the bounded reader (a regular file of at
    most a sweep table's limit, never a FIFO or a device), then unpickled from those bytes."""
    data = read_bounded(Path(directory) / METADATA_FILE, LIMITS["table"]).data
    return _MetadataUnpickler(io.BytesIO(data)).load()


class _SafeReader(FileSystemReader):
    """``FileSystemReader`` that unpickles ``.metadata`` through ``_MetadataUnpickler``."""

    def read_metadata(self, *args: Any, **kwargs: Any):
        metadata = _read_metadata(Path(self.path))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class _SafeBytes:
    """Planner mixin: non-tensor items load with ``torch.load(weights_only=True)``."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        obj = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


class _SafeLoadPlanner(_SafeBytes, DefaultLoadPlanner):
    pass


class _SafeWholePlanner(_SafeBytes, _EmptyStateDictLoadPlanner):
    pass


def check_metadata(directory: str | Path) -> str | None:
    """Why ``.metadata`` cannot be read safely (one line), or None when it can."""
    try:
        _read_metadata(Path(directory))
    except pickle.UnpicklingError as err:
        return f"{METADATA_FILE}: refused: {err}"
    except Exception as err:  # noqa: BLE001 - truncated, not a pickle: not a checkpoint
        return f"{METADATA_FILE}: does not load: {type(err).__name__}: {err}"
    return None


SETTINGS = "optimizer_settings"
"""The optimizer's result-changing settings (``optim``'s ``settings()``: plain values), saved
beside its state: ``get_state_dict`` keeps only 'state' and 'param_groups', so the
``"settings"`` entry of the optimizer's own state_dict would be lost on this path."""


def _settings(optimizer: torch.optim.Optimizer) -> dict[str, Any] | None:
    get = getattr(optimizer, "settings", None)
    return dict(get()) if callable(get) else None


def save(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Every rank writes its shards of ``model`` and ``optimizer`` (a collective) and the
    optimizer's settings (``SETTINGS``); files are fsynced; rank 0 writes ``.metadata`` last."""
    model_sd, optim_sd = get_state_dict(model, optimizer)
    items: dict[str, Any] = {"model": model_sd, "optimizer": optim_sd}
    if (settings := _settings(optimizer)) is not None:
        items[SETTINGS] = settings
    writer = FileSystemWriter(directory, single_file_per_rank=True, sync_files=True)
    with warnings.catch_warnings():  # one process: "assuming the intent is to save in a single..."
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        dcp.save(items, storage_writer=writer)


def load(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load the checkpoint's model and optimizer state into ``model`` and ``optimizer``
    (sharded or not, any number of ranks; a collective when a process group exists). Saved
    optimizer settings that differ from ``optimizer``'s are refused (ValueError, from
    ``optim``'s own check) before anything is loaded into the model or the optimizer (read on
    their own, in this process: ``read``)."""
    current = _settings(optimizer)
    saved_keys = {key.split(".")[0] for key in _read_metadata(Path(directory)).state_dict_metadata}
    if current is not None and SETTINGS in saved_keys:  # checked before any tensor is loaded
        from optim import check_saved_settings

        check_saved_settings(type(optimizer).__name__, {"settings": read(directory, SETTINGS)}, current)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optimizer": optim_sd}
    with warnings.catch_warnings():  # one process: "assuming the intent is to load in a single..."
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        dcp.load(state, storage_reader=_SafeReader(directory), planner=_SafeLoadPlanner())
    with warnings.catch_warnings():  # checked above (or saved before settings were recorded)
        warnings.filterwarnings("ignore", ".*the state_dict records no settings", UserWarning)
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])


def read(directory: str | Path, key: str = "model") -> Any:
    """The whole ``key`` entry ('model': the model state dict, 'optimizer': the optimizer
    state keyed by parameter name) of a DCP checkpoint as full CPU tensors, read in this
    process only (no collective, whatever process group exists)."""
    state: dict[str, Any] = {}  # filled in place from the metadata (dcp.load would copy it)
    _load_state_dict(state, storage_reader=_SafeReader(Path(directory)),
                     planner=_SafeWholePlanner(keys={key}), no_dist=True)
    return state[key]
