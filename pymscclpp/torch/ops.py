"""Whether pymscclpp itself reduces a torch dtype with a torch ReduceOp, for the backend and the engine classes:
torch's names mapped onto ``pymscclpp.communicator.serves_reduction``, the Communicator's own predicate."""

from __future__ import annotations

import torch
import torch.distributed as dist

from pymscclpp.channels.reduce import DTYPE_KINDS
from pymscclpp.communicator import serves_reduction

_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: "sum", _R.MIN: "min", _R.MAX: "max", _R.PRODUCT: "prod", _R.AVG: "avg"}
UNREDUCED = f"pymscclpp reduces only SUM, MIN, MAX, PRODUCT, AVG of {', '.join(DTYPE_KINDS)}"


def reduce_op_name(dtype: torch.dtype, op) -> str | None:
    """pymscclpp's name for ``op`` (a ReduceOp, its RedOpType, or None for SUM) when it reduces ``dtype``, else None."""
    key = (dtype, hash(op) if type(op) is _REDUCE_OP else op)
    try:
        return _SERVED[key]
    except KeyError:
        served = _SERVED[key] = _name(dtype, op)
        return served
    except TypeError:  # an unhashable op (a ReduceOp of an older torch)
        return _name(dtype, op)


def _name(dtype: torch.dtype, op) -> str | None:
    name = _OPS.get(_R.SUM if op is None else getattr(op, "op", op))
    return name if name is not None and serves_reduction(str(dtype).removeprefix("torch."), name) else None


def _hash_names_op() -> bool:
    """Whether a ReduceOp hashes as the value of its RedOpType (torch 2.11, 2.13): then its hash is its cache key,
    a quarter of the cost of comparing the new ReduceOp torch makes for each call with a kept one."""
    try:
        return all(hash(dist.ReduceOp(t)) == int(t) for t in (_R.SUM, _R.PRODUCT, _R.MIN, _R.MAX, _R.AVG, _R.BAND))
    except TypeError:
        return False


_REDUCE_OP = dist.ReduceOp if _hash_names_op() else None  # whose objects are cached by their hash
_SERVED: dict = {}  # (torch dtype, op or its hash) -> reduce_op_name's answer: asked on every eager call
