"""Every collective of pymscclpp.Communicator on every rank, checked against NumPy.

Run: ``.venv/bin/mpiexec -n 2 .venv/bin/python examples/collectives_demo.py`` (GPUs, or the CUDA simulator without one).
"""
import numpy as np
from mpi4py import MPI

import pymscclpp
from numba import cuda


def data(rank: int, n: int) -> np.ndarray:
    return np.random.default_rng(rank).integers(-8, 9, n).astype(np.float32)


def main(n_per_rank: int = 1024) -> None:
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    n = n_per_rank * size  # divisible into one slot per rank (reduce_scatter, all_to_all)
    inputs = [data(r, n) for r in range(size)]
    x = cuda.to_device(inputs[rank])

    out = cuda.device_array(n, np.float32)
    comm.all_reduce(x, out)
    checks = {"all_reduce": (out, sum(inputs))}

    gathered = cuda.device_array(n * size, np.float32)
    comm.all_gather(x, gathered)
    checks["all_gather"] = (gathered, np.concatenate(inputs))

    part = cuda.device_array(n // size, np.float32)
    comm.reduce_scatter(x, part, op="max")
    checks["reduce_scatter(max)"] = (part, np.max(inputs, axis=0).reshape(size, -1)[rank])

    swapped = cuda.device_array(n, np.float32)
    comm.all_to_all(x, swapped)
    checks["all_to_all"] = (swapped, np.concatenate([inp.reshape(size, -1)[rank] for inp in inputs]))

    root_buf = cuda.to_device(inputs[rank])
    comm.broadcast(root_buf, root=0)
    checks["broadcast"] = (root_buf, inputs[0])

    cuda.synchronize()
    comm.check_device_errors()
    for name, (got, expected) in checks.items():
        assert np.array_equal(got.copy_to_host(), expected), f"rank {rank}: {name} differs"
    print(f"rank {rank}/{size} ({pymscclpp.BACKEND}): {', '.join(checks)} OK")
    comm.close()


if __name__ == "__main__":
    main()
