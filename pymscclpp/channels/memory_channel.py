"""MemoryChannel, device side: one-sided access to a peer's memory through the plain-data handle that
``runtime.memory_channel.MemoryChannel.device_handle()`` gives. Offsets are in bytes; ``tid`` and ``nthreads``
spread a copy over cooperating threads. Under the simulator every copy checks its byte ranges against the
channel's buffers (``bounds``).
"""

from __future__ import annotations

from numba import cuda

from . import bounds
from . import primitives as prim
from . import semaphore as sem
from .device_errors import OP_PACKET


@cuda.jit(device=True)
def _packet_bytes(nbytes, data_per_packet):
    """Bytes of the packets carrying ``nbytes`` (each packet twice its data)."""
    return (nbytes + data_per_packet - 1) // data_per_packet * 2 * data_per_packet


@cuda.jit(device=True)
def put(ch, dst_off, src_off, nbytes, tid, nthreads):
    """Copy ``nbytes`` from our ``src[src_off:]`` to the peer's ``dst[dst_off:]``."""
    bounds.check(ch, bounds.PUT, bounds.SRC, ch.src, src_off, nbytes)
    bounds.check(ch, bounds.PUT, bounds.DST, ch.dst, dst_off, nbytes)
    prim.copy_bytes(ch.dst, dst_off, ch.src, src_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def get(ch, src_off, dst_off, nbytes, tid, nthreads):
    """Copy ``nbytes`` from the peer's ``dst[dst_off:]`` into our ``src[src_off:]``."""
    bounds.check(ch, bounds.GET, bounds.DST, ch.dst, dst_off, nbytes)
    bounds.check(ch, bounds.GET, bounds.SRC, ch.src, src_off, nbytes)
    prim.copy_bytes(ch.src, src_off, ch.dst, dst_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def read(ch, out, out_off, dst_off, nbytes, tid, nthreads):
    """Copy ``nbytes`` from the peer's ``dst[dst_off:]`` into any local uint8 array ``out[out_off:]``."""
    bounds.check(ch, bounds.READ, bounds.DST, ch.dst, dst_off, nbytes)
    bounds.check(ch, bounds.READ, bounds.LOCAL, out, out_off, nbytes)
    prim.copy_bytes(out, out_off, ch.dst, dst_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def write(ch, dst_off, inp, in_off, nbytes, tid, nthreads):
    """Copy ``nbytes`` from any local uint8 array ``inp[in_off:]`` to the peer's ``dst[dst_off:]``."""
    bounds.check(ch, bounds.WRITE, bounds.LOCAL, inp, in_off, nbytes)
    bounds.check(ch, bounds.WRITE, bounds.DST, ch.dst, dst_off, nbytes)
    prim.copy_bytes(ch.dst, dst_off, inp, in_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def signal(ch, idx=0):
    """Tell the peer our earlier writes are visible (release, system scope). One thread calls it."""
    sem.signal(ch, idx)


@cuda.jit(device=True)
def relaxed_signal(ch, idx=0):
    """Signal without ordering earlier writes."""
    sem.relaxed_signal(ch, idx)


@cuda.jit(device=True)
def signal_as(ch, idx, release):
    """``signal`` when ``release`` (after writing the peer's memory), else ``relaxed_signal`` (after only reading
    it: a credit, with no writes to wait for)."""
    if release:
        sem.signal(ch, idx)
    else:
        sem.relaxed_signal(ch, idx)


@cuda.jit(device=True)
def wait(ch, idx=0):
    """Wait for the peer's next signal (acquire); False if the budget ran out (error recorded)."""
    return sem.wait(ch, idx)


@cuda.jit(device=True)
def poll(ch, idx=0):
    """True if the peer's next signal has arrived; never blocks."""
    return sem.poll(ch, idx)


@cuda.jit(device=True)
def put_packets(ch, dst_off, src_off, nbytes, tid, nthreads, flag):
    """Send ``nbytes`` of our ``src`` as LL16 packets into the peer's inbox at ``dst_off`` (2x bytes)."""
    bounds.check(ch, bounds.PUT_PACKETS, bounds.SRC, ch.src, src_off, nbytes)
    bounds.check(ch, bounds.PUT_PACKETS, bounds.DST, ch.dst, dst_off, _packet_bytes(nbytes, prim.LL16_DATA))
    prim.put_packets_ll16(ch.dst, dst_off, ch.src, src_off, nbytes, tid, nthreads, flag)


@cuda.jit(device=True)
def unpack_packets(ch, src_off, pkt_off, nbytes, tid, nthreads, flag):
    """Wait for LL16 packets in our inbox at ``pkt_off`` and write their data to our ``src[src_off:]``."""
    bounds.check(ch, bounds.UNPACK_PACKETS, bounds.PKT, ch.pkt, pkt_off, _packet_bytes(nbytes, prim.LL16_DATA))
    bounds.check(ch, bounds.UNPACK_PACKETS, bounds.SRC, ch.src, src_off, nbytes)
    return prim.unpack_packets_ll16(ch.src, src_off, ch.pkt, pkt_off, nbytes, tid, nthreads, flag, ch, OP_PACKET)


@cuda.jit(device=True)
def put_packets_ll8(ch, dst_off, src_off, nbytes, tid, nthreads, flag):
    """LL8 variant of put_packets (4 data bytes per 8-byte packet)."""
    bounds.check(ch, bounds.PUT_PACKETS_LL8, bounds.SRC, ch.src, src_off, nbytes)
    bounds.check(ch, bounds.PUT_PACKETS_LL8, bounds.DST, ch.dst, dst_off, _packet_bytes(nbytes, prim.LL8_DATA))
    prim.put_packets_ll8(ch.dst, dst_off, ch.src, src_off, nbytes, tid, nthreads, flag)


@cuda.jit(device=True)
def unpack_packets_ll8(ch, src_off, pkt_off, nbytes, tid, nthreads, flag):
    """LL8 variant of unpack_packets."""
    bounds.check(ch, bounds.UNPACK_PACKETS_LL8, bounds.PKT, ch.pkt, pkt_off, _packet_bytes(nbytes, prim.LL8_DATA))
    bounds.check(ch, bounds.UNPACK_PACKETS_LL8, bounds.SRC, ch.src, src_off, nbytes)
    return prim.unpack_packets_ll8(ch.src, src_off, ch.pkt, pkt_off, nbytes, tid, nthreads, flag, ch, OP_PACKET)


@cuda.jit(device=True)
def packet_flag_begin(flags):
    """This launch's packet flag for the calling block: the one after its last launch's (``primitives.next_flag``)."""
    return prim.next_flag(flags[cuda.blockIdx.x])


@cuda.jit(device=True)
def packet_flag_end(flags, flag):
    """Store the block's flag after all its threads are done with it (call after syncthreads)."""
    if cuda.threadIdx.x == 0:
        flags[cuda.blockIdx.x] = flag
