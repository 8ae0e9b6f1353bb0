"""Whether pymscclpp itself reduces a torch dtype with a torch ReduceOp, for the backend and the engine classes:
torch's names mapped onto ``pymscclpp.communicator.serves_reduction``, the Communicator's own predicate."""

from __future__ import annotations

import torch
import torch.distributed as dist

from pymscclpp.channels.reduce import DTYPE_KINDS
from pymscclpp.communicator import serves_reduction

_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: "sum", _R.MIN: "min", _R.MAX: "max", _R.PRODUCT: "prod"}
UNREDUCED = f"pymscclpp reduces only SUM, MIN, MAX, PRODUCT of {', '.join(DTYPE_KINDS)}"


def reduce_op_name(dtype: torch.dtype, op) -> str | None:
    """pymscclpp's name for ``op`` (a ReduceOp, its RedOpType, or None for SUM) when it reduces ``dtype``, else None."""
    key = (dtype, _R.SUM if op is None else getattr(op, "op", op))
    try:
        return _SERVED[key]
    except KeyError:
        name = _OPS.get(key[1])
        served = _SERVED[key] = name if name is not None and \
            serves_reduction(str(dtype).removeprefix("torch."), name) else None
        return served


_SERVED: dict = {}  # (torch dtype, RedOpType) -> reduce_op_name's answer: asked on every eager call
