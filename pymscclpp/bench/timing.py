"""Timing, median over repetitions: on the GPU with torch events (CUDA-graph replays or eager calls); on the
simulator by the host clock (its kernels finish before their launch returns)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def host_samples(fn: Callable[[], None], reps: int, barrier: Callable[[], None]) -> list[float]:
    """Microseconds of ``fn()`` by the host clock, one sample per run of ``reps``, ranks started together each
    time."""
    samples = []
    for _ in range(reps):
        barrier()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


def time_host(fn: Callable[[], None], reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds of ``fn()`` by the host clock over ``reps`` runs, ranks started together each time."""
    return statistics.median(host_samples(fn, reps, barrier))


def eager_samples(fn: Callable[[], None], iters: int, reps: int, barrier: Callable[[], None]) -> list[float]:
    """Microseconds per call of ``fn`` launched ``iters`` times back to back, one sample per run of ``reps``."""
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
    return samples


def time_eager(fn: Callable[[], None], iters: int, reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds per call of ``fn`` launched ``iters`` times back to back, over ``reps`` runs."""
    return statistics.median(eager_samples(fn, iters, reps, barrier))


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


def graph_samples(graph, iters: int, reps: int, barrier: Callable[[], None]) -> list[float]:
    """Microseconds per captured call of each of ``reps`` replays of a graph of ``iters`` calls."""
    return [t / iters for t in eager_samples(graph.replay, 1, reps, barrier)]


def time_graph(graph, iters: int, reps: int, barrier: Callable[[], None]) -> float:
    """Median microseconds per captured call over ``reps`` replays of a graph of ``iters`` calls."""
    return statistics.median(graph_samples(graph, iters, reps, barrier))
