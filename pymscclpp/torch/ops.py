"""Whether pymscclpp itself reduces a torch dtype with a torch ReduceOp: the one place the backend and the engine
classes ask, so a public predicate on the Communicator can replace it in one edit."""

from __future__ import annotations

import torch
import torch.distributed as dist

from pymscclpp.channels.reduce import DTYPE_KINDS

_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: "sum", _R.MIN: "min", _R.MAX: "max", _R.PRODUCT: "prod"}
UNREDUCED = f"pymscclpp reduces only SUM, MIN, MAX, PRODUCT of {', '.join(DTYPE_KINDS)}"


def reduce_op_name(dtype: torch.dtype, op) -> str | None:
    """pymscclpp's name for ``op`` (a ReduceOp, its RedOpType, or None for SUM) when it reduces ``dtype``, else None."""
    if str(dtype).removeprefix("torch.") not in DTYPE_KINDS:
        return None
    kind = _R.SUM if op is None else getattr(op, "op", op)
    return _OPS.get(kind)
