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
    try:
        return _SERVED[dtype, op]  # a ReduceOp hashes and compares as its RedOpType: a third of hashing that
    except KeyError:
        served = _SERVED[dtype, op] = _name(dtype, op)
        return served
    except TypeError:  # an unhashable op (a ReduceOp before torch 2.6)
        return _name(dtype, op)


def _name(dtype: torch.dtype, op) -> str | None:
    name = _OPS.get(_R.SUM if op is None else getattr(op, "op", op))
    return name if name is not None and serves_reduction(str(dtype).removeprefix("torch."), name) else None


_SERVED: dict = {}  # (torch dtype, op as given) -> reduce_op_name's answer: asked on every eager call
