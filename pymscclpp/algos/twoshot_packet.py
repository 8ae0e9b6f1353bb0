"""Two-step collectives over LL16 packets (``twoshot_packet_kernels``) on the one-shot packet lanes: for the middle
sizes at many ranks, where one-shot packets move n-1 copies of the buffer and the staged two-step kernels pay a
barrier a step."""

from __future__ import annotations

from ..channels import reduce as red
from .algorithm import Call
from .oneshot import PACKET_MAX, AllReduce, OneShot, lanes_slot_bytes
from . import twoshot_packet_kernels as kp


def shard_wire(size: int, nranks: int) -> list[int]:
    """Packet bytes of each rank's shard of a ``size``-byte call (the kernels' ``shard_bytes``, run on the host; 16
    on the wire per 8 data bytes)."""
    sh = (-(-size // nranks) + 15) // 16 * 16
    return [-(-max(0, min(sh, size - s * sh)) // 8) * 16 for s in range(nranks)]


class PacketTwoStep(OneShot):
    """A two-step kernel over packets: serves what a packet algorithm does (up to 1 MB) where a scratch half holds
    an input and a result area of ``nranks`` shards each (``nranks`` quarters of a packet slot: 1 MB at 2 ranks)."""

    def __init__(self, name: str, blocks: int, threads: int):
        super().__init__(name, "packet", blocks, threads)

    def why_not(self, comm, call: Call) -> str | None:
        largest = min(PACKET_MAX, comm.size * (lanes_slot_bytes(comm, "packet") // 4))
        if call.message_bytes > largest:
            return f"serves messages of up to {largest} bytes on {comm.size} ranks, got {call.message_bytes}"
        return super().why_not(comm, call)


class AllReduceTwoShotPacket(PacketTwoStep, AllReduce):
    """Reduce-scatter then all-gather in one launch of packets, no barrier: each rank sends and receives 2N(n-1)/n
    of data where one-shot packets move N(n-1); bit-identical on every rank."""

    kernels = {"packet": kp.all_reduce_packet_two_shot_ll}
    params = ("kind", "op")
    ops = frozenset(red.OPS)  # avg too: reduce_packets_ll16 divides the whole sum

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Our shard p to every peer p, then our reduced shard to every peer; peers send us alike (16 wire bytes
        per 8 data bytes)."""
        wire = shard_wire(message_bytes, nranks)
        moved = sum(wire) - wire[rank] + (nranks - 1) * wire[rank]
        return moved, moved


class BroadcastTwoStepPacket(PacketTwoStep):
    """Broadcast as a scatter and an all-gather in one launch of packets, no barrier: the root sends about
    2N(n-1)/n of data where one-shot packets send N(n-1), each other rank passes its shard on to the others."""

    collective = "broadcast"
    kernels = {"packet": kp.broadcast_packet_two_step_ll}
    params = ("root",)

    def param_values(self, call: Call) -> tuple:
        return (call.root,)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The root sends shard p to rank p and its own to every peer; rank r passes shard r to the n - 2 other
        non-roots and receives every shard (16 wire bytes per 8 data bytes)."""
        wire = shard_wire(message_bytes, nranks)
        if rank == root:
            return sum(wire) - wire[rank] + (nranks - 1) * wire[rank], 0
        return (nranks - 2) * wire[rank], sum(wire)
