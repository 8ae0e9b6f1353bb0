"""The benchmark CLI's pieces that need no GPU: size parsing, the tuner's table, plots, --help."""

import json
import os
import re
import subprocess
import sys

import pytest

from pymscclpp.bench.__main__ import parse_size
from pymscclpp.bench.tune import table_from_winners, tune_collective

from mpiexec_ranks import mpiexec_stdout


@pytest.mark.parametrize("text,value", [("1K", 1024), ("64M", 64 << 20), ("1G", 1 << 30), ("4096", 4096),
                                        ("0.5K", 512)])
def test_sizes_accept_k_m_g_suffixes(text, value):
    assert parse_size(text) == value


def test_tuner_merges_runs_of_one_winner_and_covers_every_larger_size():
    winners = [(1024, "packet"), (4096, "packet"), (65536, "packet_wide"), (1 << 20, "simple"), (1 << 22, "simple")]
    assert table_from_winners(winners) == [[4096, "packet"], [65536, "packet_wide"], [float("inf"), "simple"]]


def test_tuner_table_round_trips_through_the_selector(tmp_path, monkeypatch):
    from pymscclpp.algos import collection
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"all_reduce": table_from_winners([(1024, "packet"), (1 << 20, "simple")])}))
    monkeypatch.setenv("PYMSCCLPP_TUNING_FILE", str(path))
    assert collection.load_table()["all_reduce"] == [(1024.0, "packet"), (float("inf"), "simple")]


def test_bad_tuning_file_is_named_in_the_error(tmp_path, monkeypatch):
    from pymscclpp.algos import collection
    from pymscclpp.errors import InvalidUsageError
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    monkeypatch.setenv("PYMSCCLPP_TUNING_FILE", str(path))
    with pytest.raises(InvalidUsageError, match="bad.json"):
        collection.load_table()


def test_plot_writes_a_png_with_both_series(tmp_path):
    pytest.importorskip("matplotlib")
    from pymscclpp.bench.plot import plot_rows
    rows = [{"bytes": 1 << k, "us": 3.0 + k, "nccl_us": 7.0 + k, "busbw": 1.0 * k, "nccl_busbw": 0.5 * k}
            for k in range(10, 20)]
    out = tmp_path / "p.png"
    plot_rows(rows, str(out), "test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_cli_help_lists_every_collective():
    proc = subprocess.run([sys.executable, "-m", "pymscclpp.bench", "--help"], capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert proc.returncode == 0
    for op in ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]:
        assert op in proc.stdout


def test_primitive_microbenchmarks_are_ops_of_the_same_cli():
    for op in ["memory_channel", "port_channel", "sync"]:
        proc = subprocess.run([sys.executable, "-m", "pymscclpp.bench", "--op", op, "--help"], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and "--json" in proc.stdout, proc.stderr
        assert f"usage: python -m pymscclpp.bench --op {op}" in proc.stdout and "python python" not in proc.stdout


def test_summary_lists_sweeps_and_microbenchmarks(tmp_path):
    from pymscclpp.bench.summary import summarize
    (tmp_path / "ar.json").write_text(json.dumps({"rows": [{"op": "all_reduce", "bytes": 1024, "us": 3.0,
                                                            "nccl_us": 7.0, "speedup": 7 / 3}]}))
    (tmp_path / "mc.json").write_text(json.dumps({"put_oneway_GBps": 280.0, "nccl_sendrecv_GBps": 310.0,
                                                  "signal_oneway_us": 1.2, "ll16_oneway_us": 0.7}))
    text = "\n".join(summarize(str(tmp_path)))
    assert "all_reduce 1K us" in text and "2.33x" in text and "MemoryChannel put GB/s" in text


def run_microbenchmark(tmp_path, ranks: int, op: str, *args: str) -> dict:
    """The JSON of ``python -m pymscclpp.bench --op OP ARGS`` on ``ranks`` simulator ranks (mpiexec of the venv)."""
    out = tmp_path / f"{op}.json"
    mpiexec_stdout(ranks, ["-m", "pymscclpp.bench", "--op", op, *args, "--json", str(out)], timeout=300,
                   PYMSCCLPP_CACHE_DIR=str(tmp_path))
    return json.loads(out.read_text())


@pytest.mark.mpi
def test_a_sweep_row_holds_the_median_the_spread_and_the_kernel_and_grid_that_served_it(tmp_path):
    rows = run_microbenchmark(tmp_path, 2, "all_reduce", "-b", "1K", "-e", "1K", "--iters", "1", "--reps", "3",
                              "--check")["rows"]
    assert len(rows) == 1 and rows[0]["wrong"] == 0
    assert 0 < rows[0]["us_fastest"] <= rows[0]["us"] <= rows[0]["us_slowest"]
    assert re.fullmatch(r"packet_one_block: \w+ on 1 block", rows[0]["served"]), rows[0]["served"]


@pytest.mark.mpi
def test_host_benchmark_reports_every_collective_against_a_reference_op(tmp_path):
    rows = run_microbenchmark(tmp_path, 2, "host", "--calls", "2", "--reps", "1")["rows"]
    for c in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        assert rows[f"eager_{c}_us"] > 0 and rows[f"eager_{c}_vs_reference"] > 0 and rows[f"first_{c}_s"] > 0
    assert rows["import_pymscclpp_s"] > 0 and rows["reference_us"] > 0


@pytest.mark.mpi
def test_sync_benchmark_times_a_launch_meetings_on_several_grids_and_a_small_all_reduce_at_three_ranks(tmp_path):
    res = run_microbenchmark(tmp_path, 3, "sync", "--blocks", "1,3")
    assert res["ranks"] == 3 and "meet_1_blocks_us" not in res
    for key in ("empty_us", "empty_with_channels_us", "meet_us", "meet_3_blocks_us", "meet_twice_us",
                "meet_twice_3_blocks_us", "all_reduce_1KB_us", "meet_inside_kernel_us"):
        assert res[key] > 0, key


def test_tuning_file_keyed_by_rank_count_applies_to_its_rank_count_only(tmp_path, monkeypatch):
    from pymscclpp.algos import collection
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"8": {"all_reduce": [[float("inf"), "simple"]]}}))
    monkeypatch.setenv("PYMSCCLPP_TUNING_FILE", str(path))
    assert collection.load_table(8)["all_reduce"] == [(float("inf"), "simple")]
    assert collection.load_table(4)["all_reduce"] == collection.default_table(4)["all_reduce"]


def test_the_tuner_keeps_other_rank_counts_tables_in_its_file(tmp_path):
    from pymscclpp.bench.tune import write_table
    path = tmp_path / "t.json"
    write_table(str(path), 2, {"all_reduce": [[float("inf"), "simple"]]})
    write_table(str(path), 8, {"all_reduce": [[float("inf"), "rsag"]]})
    assert json.loads(path.read_text()) == {"2": {"all_reduce": [[float("inf"), "simple"]]},
                                             "8": {"all_reduce": [[float("inf"), "rsag"]]}}


@pytest.mark.parametrize("nranks,size,collective,name", [
    (2, 1 << 20, "all_reduce", "simple"), (2, 64 << 20, "all_reduce", "rsag"), (4, 1 << 20, "all_reduce", "rsag"),
    (8, 128 << 10, "all_reduce", "rsag_packet"), (8, 256 << 10, "all_reduce", "rsag_packet"),
    (8, 512 << 10, "all_reduce", "rsag"), (4, 128 << 10, "all_reduce", "packet_wide"),
    (8, 32 << 10, "all_reduce", "packet_wide"),
    (2, 2 << 10, "all_reduce", "packet_one_block"), (2, 4 << 10, "all_reduce", "packet"),
    (8, 1 << 10, "all_reduce", "packet"), (2, 1 << 10, "reduce", "packet_one_block"),
    (2, 64 << 10, "reduce", "packet_wide"),
    (2, 1 << 20, "all_gather", "simple"), (8, 1 << 20, "all_gather", "read"),
    (8, 1 << 20, "broadcast", "scatter_gather"), (8, 128 << 10, "broadcast", "scatter_gather_packet"),
    (8, 512 << 10, "broadcast", "scatter_gather_packet"), (8, 64 << 10, "broadcast", "packet"),
    (4, 256 << 10, "broadcast", "scatter_gather"), (8, 1 << 20, "reduce_scatter", "read"),
    (2, 1 << 20, "reduce_scatter", "simple"), (2, 256 << 10, "all_to_allv", "exchange"),
    (2, 1 << 20, "all_to_allv", "simple"), (3, 256 << 10, "all_to_allv", "packet"),
    (8, 16 << 20, "all_to_allv", "simple"),
    (2, 1 << 10, "all_to_all@zero_copy", "simple"), (8, 64 << 10, "all_to_all@zero_copy", "simple")])
def test_the_default_selection_depends_on_the_rank_count(nranks, size, collective, name):
    from pymscclpp.algos import collection
    rows = collection.default_table(nranks)[collective]
    assert next(n for limit, n in rows if size <= limit) == name


@pytest.mark.parametrize("collective,size,name", [("all_reduce", 64 << 10, "packet_wide"),
                                                  ("all_reduce", 1 << 20, "rsag"),
                                                  ("reduce_scatter", 1 << 20, "simple"),
                                                  ("reduce_scatter", 64 << 20, "read")])
def test_two_rank_zero_copy_rows_name_the_two_step_kernels_above_the_packets(collective, size, name):
    from pymscclpp.algos import collection
    rows = collection.default_table(2)[collective + collection.ZERO_COPY]
    assert next(n for limit, n in rows if size <= limit) == name


@pytest.mark.parametrize("size,name", [(32 << 10, "packet_wide"), (128 << 10, "rsag"), (1 << 20, "rsag")])
def test_eight_rank_zero_copy_all_reduces_keep_rsag_above_the_one_shot_packets(size, name):
    from pymscclpp.algos import collection
    rows = collection.default_table(8)["all_reduce" + collection.ZERO_COPY]
    assert next(n for limit, n in rows if size <= limit) == name
    assert "reduce_scatter" + collection.ZERO_COPY not in collection.default_table(8)
    assert "all_reduce" + collection.ZERO_COPY not in collection.default_table(4)


@pytest.mark.parametrize("size,name", [(64 << 10, "packet"), (256 << 10, "scatter_gather"),
                                       (1 << 20, "scatter_gather")])
def test_eight_rank_zero_copy_broadcasts_keep_the_zero_copy_scatter_gather_above_the_one_shot_packets(size, name):
    from pymscclpp.algos import collection
    rows = collection.default_table(8)["broadcast" + collection.ZERO_COPY]
    assert next(n for limit, n in rows if size <= limit) == name
    assert "broadcast" + collection.ZERO_COPY not in collection.default_table(4)


@pytest.mark.parametrize("nranks,size,name", [(3, 1 << 10, "read"), (3, 1 << 20, "read"), (7, 256 << 10, "read"),
                                             (8, 1 << 10, "read"), (8, 64 << 10, "read"), (16, 1 << 20, "read")])
def test_zero_copy_all_to_alls_with_counts_read_at_every_size_from_three_ranks(nranks, size, name):
    from pymscclpp.algos import collection
    rows = collection.default_table(nranks)["all_to_allv" + collection.ZERO_COPY]
    assert next(n for limit, n in rows if size <= limit) == name


def test_a_tuned_collective_drops_the_default_zero_copy_rows(tmp_path, monkeypatch):
    from pymscclpp.algos import collection
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"2": {"all_reduce": [[float("inf"), "simple"]]}}))
    monkeypatch.setenv("PYMSCCLPP_TUNING_FILE", str(path))
    table = collection.load_table(2)
    assert "all_reduce" + collection.ZERO_COPY not in table
    assert table["reduce_scatter" + collection.ZERO_COPY] == collection.default_table(2)["reduce_scatter"
                                                                                        + collection.ZERO_COPY]


def _fake_measure(times: dict, calls: list):
    """A tuner's measure from ``times[(name, size, registered)]`` (missing: cannot serve), noting every call."""
    def measure(name, size, registered):
        calls.append((name, size, registered))
        return times.get((name, size, registered))
    return measure


def test_the_tuner_writes_zero_copy_rows_from_calls_timed_on_registered_buffers():
    # 'read' serves zero-copy calls only; 'packet' has no zero-copy kernel, 'exchange' has one
    times = {("packet", 1, False): 1.0, ("exchange", 1, False): 2.0, ("packet", 1, True): 1.0,
             ("exchange", 1, True): 1.5, ("read", 1, True): 1.2,
             ("packet", 2, False): 3.0, ("exchange", 2, False): 2.0, ("exchange", 2, True): 1.9,
             ("read", 2, True): 0.5, ("packet", 2, True): 0.1}
    calls = []
    rows = tune_collective([1, 2], ["packet", "exchange", "read"], _fake_measure(times, calls),
                           lambda name: name in ("exchange", "read"))
    assert rows == {"staged": [[1, "packet"], [float("inf"), "exchange"]],
                    "zero_copy": [[1, "packet"], [float("inf"), "read"]]}
    # a staged kernel that is not the staged winner is not a zero-copy candidate: it would not serve such a call
    assert ("packet", 2, True) not in calls and ("read", 1, False) in calls


def test_the_tuner_writes_no_zero_copy_rows_where_no_algorithm_runs_zero_copy():
    calls = []
    rows = tune_collective([1, 4], ["packet", "simple"], _fake_measure({("packet", 1, False): 1.0,
                                                                        ("simple", 1, False): 2.0,
                                                                        ("simple", 4, False): 2.0}, calls),
                           lambda name: False)
    assert rows == {"staged": [[1, "packet"], [float("inf"), "simple"]], "zero_copy": None}
    assert not any(registered for _, _, registered in calls)


class _ThreadWorld:
    """What ``tune.slowest_times`` takes of an MPI communicator, for threads standing for ranks: ``allreduce`` (of
    the largest value: the only op it is asked for)."""

    def __init__(self, shared: list, barrier, rank: int):
        self.shared, self.barrier, self.rank = shared, barrier, rank

    def allreduce(self, value, op):
        self.shared[self.rank] = value
        self.barrier.wait()
        largest = max(self.shared)
        self.barrier.wait()
        return largest


def test_ranks_whose_own_timings_differ_time_the_same_calls_and_write_the_same_rows():
    # rank 0 finds 'packet' (no zero-copy kernel) fastest staged, rank 1 'simple' (one): by its own times each
    # would time other calls on registered buffers, which the call check refuses (seen on 8 ranks of one H100)
    import threading
    from pymscclpp.bench.tune import slowest_times
    times = [{("packet", 1, False): 1.0, ("simple", 1, False): 2.0, ("simple", 1, True): 1.5},
             {("packet", 1, False): 3.0, ("simple", 1, False): 2.0, ("simple", 1, True): 1.0}]
    own = [[], []]
    for rank in range(2):
        tune_collective([1], ["packet", "simple"], _fake_measure(times[rank], own[rank]), lambda n: n == "simple")
    assert own[0] != own[1]  # what each rank's own winner would have it time
    shared, barrier, calls, rows = [None, None], threading.Barrier(2), [[], []], [None, None]

    def tune(rank):
        rows[rank] = tune_collective([1], ["packet", "simple"], _fake_measure(times[rank], calls[rank]),
                                     lambda n: n == "simple", agree=slowest_times(_ThreadWorld(shared, barrier, rank)))

    threads = [threading.Thread(target=tune, args=(rank,)) for rank in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert calls[0] == calls[1] == [("packet", 1, False), ("simple", 1, False), ("simple", 1, True)]
    assert rows[0] == rows[1] == {"staged": [[float("inf"), "simple"]], "zero_copy": [[float("inf"), "simple"]]}


def test_the_tuner_refuses_a_collective_it_cannot_tune():
    from pymscclpp.bench.tune import main
    with pytest.raises(SystemExit) as err:
        main(["--out", "t.json", "--ops", "all_reduce,send_recv"])
    assert err.value.code == 2
