"""The collectives pymscclpp serves, by the Communicator's names, and the names execution plans give them (the
MSCCL++ plan format's ``allreduce``, ...): the one list every layer reads."""

from __future__ import annotations

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")  # fingerprint codes: order
REDUCING = frozenset({"all_reduce", "reduce_scatter"})
PLAN_NAMES = {name: name.replace("_", "") for name in COLLECTIVES}  # "all_reduce": "allreduce", ...
FROM_PLAN = {plan: name for name, plan in PLAN_NAMES.items()}
