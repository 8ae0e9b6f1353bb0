"""Device code compiles for the GPU (sm_90 PTX) with the memory-ordering instructions it relies on."""

import pytest

from ptx.counts import ptx_counts as _ptx_counts


@pytest.fixture(scope="module")
def ptx_counts():
    return _ptx_counts("compile_all.py")


def test_put_uses_16_byte_vector_loads_and_stores(ptx_counts):
    assert ptx_counts["put", "ld.global.v4.u32"] > 0 and ptx_counts["put", "st.global.v4.u32"] > 0


def test_signal_is_a_release_system_scope_add_and_wait_an_acquire_load(ptx_counts):
    assert ptx_counts["ring_pingpong", "red.release.sys.global.add"] == 1
    assert ptx_counts["ring_pingpong", "ld.acquire.sys.global"] > 0


def test_wait_loops_are_bounded_by_the_global_timer(ptx_counts):
    assert ptx_counts["ring_pingpong", "%globaltimer"] > 0
    assert ptx_counts["packets", "%globaltimer"] > 0


def test_semaphore_and_packet_waits_also_read_the_hosts_abort_word(ptx_counts):
    for kernel in ("ring_pingpong", "packets", "reduce_ll_2ranks", "reduce_ll", "reduce_simple", "exchange_ll",
                   "exchange_simple", "broadcast_ll", "broadcast_simple"):
        assert ptx_counts[kernel, "ld.relaxed.sys.global.b64"] > 0, kernel


def test_packet_entry_kernels_carry_no_simple_protocol_code(ptx_counts):
    # the protocol is fixed at compile time: the packet kernels never signal a semaphore, the simple ones do;
    # the simple ones' only packet store is the call check's fingerprint
    for family in ("reduce", "exchange"):
        assert ptx_counts[f"{family}_ll", "red.release.sys.global.add"] == 0, family
        assert ptx_counts[f"{family}_simple", "red.release.sys.global.add"] > 0, family
        assert ptx_counts[f"{family}_ll", "st.volatile.global.v4.u32"] > 1, family
        assert ptx_counts[f"{family}_simple", "st.volatile.global.v4.u32"] == 1, family


def test_the_check_kernel_sends_one_fingerprint_packet_and_its_waits_are_bounded_and_abortable(ptx_counts):
    assert ptx_counts["check_kernel", "st.volatile.global.v4.u32"] == 1
    assert ptx_counts["check_kernel", "%globaltimer"] > 0  # bounded
    assert ptx_counts["check_kernel", "ld.relaxed.sys.global.b64"] > 0  # and it reads the host's abort word
    assert ptx_counts["copy_if_agreed", "ld.global.v4.u32"] > 0 and ptx_counts["copy_if_agreed", "st.global.v4.u32"] > 0


def test_only_the_reducing_exchange_kernel_holds_the_reductions(ptx_counts):
    # the verbs that move bytes (send/recv, all-to-all, gather, scatter) run kernels without any reduction's code:
    # with it, the kernel was 374 KB of machine code at 8 ranks, without it 158 KB
    assert ptx_counts["peer_reduce_simple", "add.rn.f16x2"] > 0
    for kernel in ("peer_exchange_simple", "peer_read_simple"):
        assert ptx_counts[kernel, "add.rn.f16x2"] == 0, kernel
    assert ptx_counts["peer_exchange_simple", "lines"] < 0.5 * ptx_counts["peer_reduce_simple", "lines"]  # 0.40 at 4 ranks


def test_the_exchange_kernels_code_grows_little_with_the_rank_count(ptx_counts):
    # a table read at a runtime index compiled to a branch tree at every read: 2.9x the code at 8 ranks as at 2
    assert ptx_counts["peer_read_simple_8ranks", "lines"] < 1.8 * ptx_counts["peer_read_simple_2ranks", "lines"]


def test_ll16_and_ll8_packets_are_single_volatile_stores(ptx_counts):
    assert ptx_counts["packets", "st.volatile.global.v4.u32"] == 1
    assert ptx_counts["packets", "st.volatile.global.v2.u32"] == 1
    assert ptx_counts["packets", "ld.volatile.global.v4.u32"] > 0


def test_kernels_that_only_read_peers_memory_signal_it_without_a_release(ptx_counts):
    # a system-scope release waits until every earlier write of the block is visible (the output it just filled,
    # 4-6 us a call at 1 MB and 8 ranks on an H100): a pull writes nothing of a peer's, so its "done reading"
    # signal (the last meeting of the zero-copy pulls, the exchange kernel's credit) orders no writes
    for kernel in ("exchange_zero_copy_simple", "reduce_scatter_zero_copy_simple", "peer_read_simple",
                   "peer_exchange_simple"):
        assert ptx_counts[kernel, "red.relaxed.sys"] > 0, kernel
    assert ptx_counts["peer_read_simple", "red.release.sys.global.add"] == 0  # it writes no peer's memory
    assert ptx_counts["broadcast_ll", "red.release.sys.global.add"] == 0  # its one signal: a receiver's credit
    assert ptx_counts["broadcast_ll", "red.relaxed.sys"] > 0
    # the kernels that write into peers' memory still release their writes
    for kernel in ("all_reduce_zero_copy_simple", "exchange_push_zero_copy_simple", "peer_exchange_simple",
                   "broadcast_zero_copy_simple"):  # the broadcast writes each shard into the others' outputs
        assert ptx_counts[kernel, "red.release.sys.global.add"] > 0, kernel
    assert ptx_counts["exchange_push_zero_copy_simple", "red.relaxed.sys"] == 0
