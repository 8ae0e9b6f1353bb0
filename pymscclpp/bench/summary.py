"""Print a short table of the key figures from a directory of benchmark JSON files (gpu.sh's last step)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summarize(outdir: str) -> list[str]:
    """Lines of the summary: one per sweep size, plus the microbenchmarks' headline numbers."""
    lines = [f"{'what':<34} {'pymscclpp':>12} {'NCCL':>12} {'speedup':>8}"]
    for path in sorted(Path(outdir).glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "rows" in data:
            for r in data["rows"]:
                lines.append(f"{r.get('op', 'all_reduce') + ' ' + _size(r['bytes']) + ' us':<34} {r['us']:>12.2f} "
                             f"{r['nccl_us']:>12.2f} {r['speedup']:>7.2f}x")
        elif isinstance(data, dict) and "put_oneway_GBps" in data:
            lines.append(f"{'MemoryChannel put GB/s':<34} {data['put_oneway_GBps']:>12.1f} "
                         f"{data.get('nccl_sendrecv_GBps', float('nan')):>12.1f}")
            lines.append(f"{'signal / LL16 one-way us':<34} {data['signal_oneway_us']:>6.2f} / {data['ll16_oneway_us']:.2f}")
        elif isinstance(data, dict) and "cuda_ipc" in data:
            for transport in ("cuda_ipc", "ethernet_loopback"):
                t = data.get(transport)
                if t:
                    lines.append(f"{'PortChannel ' + transport + ' put GB/s':<34} {t['put_GBps']:>12.1f}")
                    lines.append(f"{'PortChannel ' + transport + ' 1KB us':<34} "
                                 f"{t['put_signal_wait_1KB_oneway_us']:>12.1f}")
    return lines


def _size(nbytes: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes}B"


if __name__ == "__main__":
    print("\n".join(summarize(sys.argv[1] if len(sys.argv) > 1 else ".")))
