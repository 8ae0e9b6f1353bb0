"""Library of DSL programs; each function builds a program for any rank count >= 2 and returns its plan dict.

``python -m pymscclpp.language.programs NAME --ranks N [--protocol packet] [--instances I] [--chunk-factor C]``
prints the plan as JSON.
"""

from typing import Callable

from .allreduce import allreduce_allpairs, allreduce_rsag
from .collectives import allgather, alltoall, reducescatter

PROGRAMS: dict[str, Callable[..., dict]] = {
    "allreduce_allpairs": allreduce_allpairs,
    "allreduce_rsag": allreduce_rsag,
    "allgather": allgather,
    "reducescatter": reducescatter,
    "alltoall": alltoall,
}

__all__ = ["PROGRAMS", "allgather", "allreduce_allpairs", "allreduce_rsag", "alltoall", "reducescatter"]
