"""The collectives pymscclpp serves, by the Communicator's names, and the names execution plans give them (the
MSCCL++ plan format's ``allreduce``, ...): the one list every layer reads."""

from __future__ import annotations

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")  # every algorithm family's
# the verbs, served by the exchange algorithms (``algos.exchange``): ``send_recv`` and ``all_to_allv`` are what
# one rank sends one peer
VERBS = ("reduce", "gather", "scatter", "send_recv", "all_to_allv")
CALLS = COLLECTIVES + VERBS  # what a call check's fingerprint names (its codes follow this order)
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
PLAN_NAMES = {name: name.replace("_", "") for name in COLLECTIVES}  # "all_reduce": "allreduce", ...
FROM_PLAN = {plan: name for name, plan in PLAN_NAMES.items()}
