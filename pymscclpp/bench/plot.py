"""Latency and bus-bandwidth plots of a sweep, pymscclpp beside NCCL (matplotlib, PNG)."""

from __future__ import annotations


def plot_rows(rows: list[dict], path: str, title: str) -> None:
    """Write a two-panel PNG (time and busbw against size, log scales) of sweep ``rows`` to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = [r["bytes"] for r in rows]
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("us", "pymscclpp"), ("nccl_us", "NCCL")):
        lat.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    for key, label in (("busbw", "pymscclpp"), ("nccl_busbw", "NCCL")):
        bw.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    for ax, ylabel in ((lat, "time per call (µs)"), (bw, "bus bandwidth (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    lat.set_yscale("log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
