"""The protocols the built-in kernels take as a compile-time parameter (as NCCL's primitives take theirs):
``PACKET``, one round of LL16 packets (scratch holds 2 bytes per data byte); ``SIMPLE``, rounds of ``slot_bytes``
per slot, puts and one signal per block and peer; and the simple entry kernels' compile options."""

from __future__ import annotations

from numba import cuda

from ..runtime.backend import IS_SIM

PACKET, SIMPLE = 0, 1
# the simple entry kernels' compile options, and any other's near the limit (the two-step packet broadcast: 123 at 4
# ranks): at most 128 registers, so 512 threads a block always launch (65,536 registers an SM; a two-shot kernel
# compiled on the GPU took more); the simulator's jit takes no such option
SIMPLE_LIMITS = {} if IS_SIM else {"max_registers": 128}


@cuda.jit(device=True)
def rounds(proto, nbytes, slot_bytes):
    """Rounds a call of ``nbytes`` per slot takes: one for packets, else one per ``slot_bytes``."""
    if proto == PACKET:
        return 1
    return (nbytes + slot_bytes - 1) // slot_bytes


@cuda.jit(device=True)
def scale(proto):
    """Scratch bytes per data byte."""
    return 2 if proto == PACKET else 1
