"""PyTorch integration: ``import pymscclpp.torch`` registers the ``"mscclpp"`` torch.distributed backend.

Needs the optional extra ``pip install pymscclpp[torch]``; the core package never imports torch.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401 (absolute: the real torch, not this package)
except ImportError as _exc:
    raise ImportError("pymscclpp.torch needs PyTorch: pip install 'pymscclpp[torch]'") from _exc

from pymscclpp.torch.backend import FORWARDED, SERVED, MscclppProcessGroup, communicator_from_store, register
from pymscclpp.torch.engines import CustomAllreduce, PyMscclppCommunicator, communicator_from_group
from pymscclpp.torch.ops import reduce_op_name

register()

__all__ = ["FORWARDED", "SERVED", "CustomAllreduce", "MscclppProcessGroup", "PyMscclppCommunicator",
           "communicator_from_group", "communicator_from_store", "reduce_op_name", "register"]
