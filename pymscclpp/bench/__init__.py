"""Benchmarks: ``python -m pymscclpp.bench`` (nccl-tests-style sweeps against NCCL)."""
