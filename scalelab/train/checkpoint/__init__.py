"""Checkpoints, in two layers:

- ``directory``: the on-disk protocol of ``checkpoint/step-N/`` (temporary directory, every
  file fsynced, manifest last, atomic rename, pruning, verify on load and fall back past a
  corrupt one). It knows files and state dicts, not models or ranks.
- ``training_state``: a run's model, optimizer and extras into and out of that directory:
  which rank writes what (one ``state.pt``, or DCP files per rank) and ``restore``.

Beside them: ``manifest`` (the size and sha256 of each file; also the records'
manifest, ``scalelab.train.records.records_manifest``), ``dcp`` (sharded checkpoint files)
and ``rng`` (RNG states). Imports only ``scalelab.train.parallel``. Re-exports nothing.
"""
