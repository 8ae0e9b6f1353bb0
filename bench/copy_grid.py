"""The copy primitive (``prim.copy_bytes``) against torch's copy of the same bytes on one whole GPU, by grid and
register cap: how many blocks, threads and registers a copy needs to reach the memory's bandwidth.

``python bench/copy_grid.py [--sizes 16M,256M] [--reps 20]`` (one process, one GPU) prints, per size, torch's time
and each grid's time and ratio to it. Each time is the median of ``reps`` CUDA-graph replays of 10 copies.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch
from numba import cuda

from pymscclpp.channels import primitives as prim

GRIDS = [(132, 512), (264, 512), (132, 1024), (528, 256), (264, 256)]  # (blocks, threads); SMs = 132
CAPS = (128, 64, 0)  # the kernel's register cap (0: none)


def _kernel(cap: int):
    @cuda.jit(**({"max_registers": cap} if cap else {}))
    def copy(dst, src, nbytes):
        b, nb = cuda.blockIdx.x, cuda.gridDim.x
        per = ((nbytes + nb - 1) // nb + 15) // 16 * 16
        lo = min(b * per, nbytes)
        prim.copy_bytes(dst, lo, src, lo, min(per, nbytes - lo), cuda.threadIdx.x, cuda.blockDim.x)
    return copy


def _time(fn, reps: int) -> float:
    """Median microseconds of one call: ``reps`` replays of a graph of 10 calls."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(10):
                fn()
    times = []
    for _ in range(reps + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 100.0)  # ms per 10 calls -> us per call
    return statistics.median(times[2:])


def _size(text: str) -> int:
    return int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16M,256M")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    kernels = {cap: _kernel(cap) for cap in CAPS}
    for nbytes in (_size(s) for s in args.sizes.split(",")):
        src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
        dst = torch.zeros_like(src)
        ref = _time(lambda: dst.copy_(src), args.reps)
        print(f"{nbytes >> 20} MB: torch copy {ref:.1f} us ({2 * nbytes / ref / 1e3:.0f} GB/s)", flush=True)
        d, s = cuda.as_cuda_array(dst), cuda.as_cuda_array(src)
        for cap, kernel in kernels.items():
            for blocks, threads in GRIDS:
                dst.zero_()
                call = lambda: kernel[blocks, threads, cuda.external_stream(torch.cuda.current_stream().cuda_stream)](  # noqa: E731
                    d, s, np.int64(nbytes))
                t = _time(call, args.reps)
                ok = torch.equal(dst, src)
                print(f"  copy_bytes {blocks:4d} x {threads:4d}, regs {cap or 'any':>3}: {t:8.1f} us "
                      f"({t / ref:.2f}x){'' if ok else '  WRONG'}", flush=True)


if __name__ == "__main__":
    main()
