"""More than one process: ``distributed`` (torchrun/srun detection, DDP, data sharding)
and ``fsdp`` (FSDP2 sharding of the model).

The first of ``scalelab.train``'s folders: it imports no other. Re-exports nothing.
"""
