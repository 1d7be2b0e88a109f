"""The pieces of a stochastic-rounding key (``optim.stochastic_rounding``'s module docstring):
a tensor's pair counters q = i // 2 are split into pieces of 2^31, and piece p hashes its
counters with the 32-bit key k_p = (K XOR p·0x9E3779B9) mod 2^32, so tensors past 2^32
elements never reuse a counter. Shared by the torch path and the Triton kernel
(``optim.sr_kernel``), which imports nothing else of the torch path.
"""

from __future__ import annotations

M32 = 0xFFFFFFFF
PIECE_MUL = 0x9E3779B9  # 2^32 / golden ratio: spreads the piece number p over the key
PIECE_BITS = 31  # counters c = q mod 2^31 fit int32 without sign


def as_int32(v):
    """A value in [0, 2^32) as the signed int32 with the same bits (branch-free: under
    torch.compile it is an int64 tensor, ``sr_key_tensor``)."""
    return ((v + 2**31) & M32) - 2**31


def piece_key(key, piece: int):
    """k_p = (K XOR p·0x9E3779B9) mod 2^32, as a signed int32 value; K an int, or a 0-d int64
    tensor (``sr_key_tensor``: then a tensor)."""
    return as_int32((key ^ (piece * PIECE_MUL)) & M32)
