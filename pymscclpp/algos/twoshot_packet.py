"""The two-shot all-reduce over LL16 packets (``twoshot_packet_kernels``) on the one-shot packet lanes: for the
middle sizes at many ranks, where one-shot packets move n-1 copies of the buffer and the staged two-shot pays two
barriers."""

from __future__ import annotations

from ..channels import reduce as red
from .algorithm import Call
from .oneshot import PACKET_MAX, AllReduce, lanes_slot_bytes
from . import twoshot_packet_kernels as kp


def shard_lengths(size: int, nranks: int) -> list[int]:
    """Bytes of each rank's shard of a ``size``-byte call (the kernel's ``shard_bytes``, run on the host)."""
    sh = (-(-size // nranks) + 15) // 16 * 16
    return [max(0, min(sh, size - s * sh)) for s in range(nranks)]


class AllReduceTwoShotPacket(AllReduce):
    """Reduce-scatter then all-gather in one launch of packets, no barrier: each rank sends and receives 2N(n-1)/n
    of data where one-shot packets move N(n-1); bit-identical on every rank. Serves what a packet algorithm does
    (up to 1 MB) where a scratch half holds both areas (``nranks`` quarters of a packet slot: 1 MB at 2 ranks)."""

    kernels = {"packet": kp.all_reduce_packet_two_shot_ll}
    params = ("kind", "op")
    ops = frozenset(red.OPS)  # avg too: reduce_packets_ll16 divides the whole sum

    def __init__(self, name: str, blocks: int, threads: int):
        super().__init__(name, "packet", blocks, threads)

    def why_not(self, comm, call: Call) -> str | None:
        largest = min(PACKET_MAX, comm.size * (lanes_slot_bytes(comm, "packet") // 4))
        if call.message_bytes > largest:
            return f"serves messages of up to {largest} bytes on {comm.size} ranks, got {call.message_bytes}"
        return super().why_not(comm, call)

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Our shard p to every peer p, then our reduced shard to every peer; peers send us alike (16 wire bytes
        per 8 data bytes)."""
        lens = shard_lengths(message_bytes, nranks)
        wire = [-(-n // 8) * 16 for n in lens]
        moved = sum(wire) - wire[rank] + (nranks - 1) * wire[rank]
        return moved, moved
