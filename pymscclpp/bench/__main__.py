"""nccl-tests-style benchmark of pymscclpp collectives with NCCL timed in the same run.

``mpirun -np 2 python -m pymscclpp.bench -b 1K -e 1G -f 4 --dtype bfloat16 --graph --check --compare nccl``
prints size, count, type, redop, time, algbw, busbw, #wrong for pymscclpp and NCCL side by side,
and writes JSON (``--json``). On GPUs it needs torch (tensors, events, NCCL through torch.distributed); on
the CUDA simulator it runs eager on numba arrays at small sizes (default 1K..16K), checked against NumPy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..runtime.backend import IS_SIM
from .verb_cases import VERBS


def parse_size(text: str) -> int:
    """'64K' -> 65536; plain integers are bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


MICRO = {"memory_channel": "memory_channel", "port_channel": "port_channel", "host": "host", "traffic": "traffic",
         "sync": "sync"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) >= 2 and argv[0] == "--op" and argv[1] in MICRO:  # Primitive API microbenchmarks
        import importlib
        importlib.import_module(f".{MICRO[argv[1]]}", __package__).main(argv[2:])
        return 0
    ap = argparse.ArgumentParser(prog="python -m pymscclpp.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="all_reduce",
                    choices=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", *VERBS, *MICRO],
                    help="a collective (send_recv: a ring of grouped send/recv; all_to_allv: all-to-all with uneven "
                         "counts, the even one's total bytes; reduce, gather, scatter: root 0), or a Primitive API microbenchmark (memory_channel: put/get bandwidth, "
                         "signal and LL packet ping-pong; port_channel: proxy put bandwidth and latency; traffic: "
                         "bytes moved per rank against the lower bound, on the simulator), which "
                         "takes its own options after --op NAME")
    ap.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("16K" if IS_SIM else "64M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32", "int32", "uint8"])
    ap.add_argument("--redop", default="sum", choices=["sum", "min", "max"])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--graph", dest="graph", action="store_true", default=True, help="CUDA-graph replays (default)")
    mode.add_argument("--eager", dest="graph", action="store_false", help="one launch per call")
    ap.add_argument("--iters", type=int, default=2 if IS_SIM else 50,
                    help="calls per timed run (captured in one graph)")
    ap.add_argument("--reps", type=int, default=3 if IS_SIM else 20, help="timed runs; the median is reported")
    ap.add_argument("--warmup", type=int, default=1 if IS_SIM else 5)
    ap.add_argument("--check", action="store_true", help="random data, verified at every size")
    ap.add_argument("--compare", choices=["nccl", "floor", "none"], default="nccl",
                    help="time NCCL in the same run, or the memory floor (one local torch op moving the same bytes "
                         "on every rank: the reference on one GPU shared by ranks, where NCCL cannot run)")
    ap.add_argument("--algo", help="force one pymscclpp algorithm")
    ap.add_argument("--register", action="store_true",
                    help="register the collective's buffers with the communicator first (zero-copy all-reduce, "
                         "reduce-scatter, ...; send_recv and all_to_allv: the send buffer)")
    ap.add_argument("--json", help="write the results here (rank 0)")
    ap.add_argument("--plot", help="write a PNG of latency and busbw against size here (rank 0)")
    ap.add_argument("--profile", action="store_true", help="print where the host time of eager calls goes (rank 0)")
    args = ap.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared hosts
    if IS_SIM:
        from .sim_sweep import run_sim_sweep
        rows = run_sim_sweep(args)
    else:
        from .sweep import run_sweep
        rows = run_sweep(args)
    if rows is not None and args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    if rows and args.plot:
        from .plot import plot_rows
        plot_rows(rows, args.plot, f"{args.op} {args.dtype} ({'CUDA graph' if args.graph else 'eager'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
