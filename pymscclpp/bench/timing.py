"""Timing, median over repetitions: on the GPU with torch events (CUDA-graph replays or eager calls); on the
simulator by the host clock (its kernels finish before their launch returns)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def time_host(fn: Callable[[], None], reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds of ``fn()`` by the host clock over ``reps`` runs, ranks started together each time."""
    samples = []
    for _ in range(reps):
        barrier()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def time_eager(fn: Callable[[], None], iters: int, reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds per call of ``fn`` launched ``iters`` times back to back, over ``reps`` runs."""
    import torch
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        barrier()
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / iters)
    return statistics.median(samples)


def capture(fn: Callable[[], None], iters: int):
    """A CUDA graph holding ``iters`` calls of ``fn`` (warm it up first: nothing may compile inside)."""
    import torch
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def time_graph(graph, iters: int, reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds per captured call over ``reps`` replays of a graph of ``iters`` calls."""
    return time_eager(graph.replay, 1, reps, barrier) / iters
