"""The instruction set of MSCCL++ execution plans: for each op code, the role of every buffer it names.

Shared by the plan validator, the interpreter and the DSL's sync analysis, so the three agree on
what each op reads and writes. Roles: ``L`` local plain data, ``R`` remote plain data (reached through a
channel), ``LP``/``RP`` local/remote scratch holding LL packets (data + flag), ``S``/``SP`` the same range of
every rank of a switch (NVLS) channel's group, plain or as packets in scratch (multimem loads and stores).
"""

from __future__ import annotations

from dataclasses import dataclass

L, R, LP, RP, S, SP = "L", "R", "LP", "RP", "S", "SP"
PACKET_ROLES = frozenset({LP, RP, SP})
REMOTE_ROLES = frozenset({R, RP})
SWITCH_ROLES = frozenset({S, SP})


@dataclass(frozen=True)
class Shape:
    """Buffer roles of an op: fixed leading roles, then an optional role repeated any number of times."""

    src_head: tuple[str, ...] = ()
    src_rest: str | None = None
    dst_head: tuple[str, ...] = ()
    dst_rest: str | None = None
    paired: bool = False  # src[i] goes to dst[i] (put/get/ppkt): equal, non-zero lengths
    reduces: bool = False  # combines its sources with reduce_op
    channel_types: frozenset[str] = frozenset()  # allowed channel_type values; empty: none needed


_MEM = frozenset({"memory"})
_PORT = frozenset({"port"})
_ANY = frozenset({"memory", "port"})
_SWITCH = frozenset({"switch"})

DATA_OPS: dict[str, Shape] = {
    "copy": Shape((L,), None, (L,), None),
    "cpkt": Shape((L,), None, (LP,), None),
    "upkt": Shape((LP,), None, (L,), None),
    "re": Shape((L,), L, (L,), None, reduces=True),
    "res": Shape((L,), L, (L,), R, reduces=True, channel_types=_MEM),
    "rre": Shape((L,), R, (L,), None, reduces=True, channel_types=_MEM),
    "rres": Shape((L,), R, (L,), R, reduces=True, channel_types=_MEM),
    "put": Shape((), L, (), R, paired=True, channel_types=_ANY),
    "pws": Shape((), L, (), R, paired=True, channel_types=_PORT),
    "pwsf": Shape((), L, (), R, paired=True, channel_types=_PORT),
    "get": Shape((), R, (), L, paired=True, channel_types=_MEM),
    "ppkt": Shape((), L, (), RP, paired=True, channel_types=_ANY),
    "rppkt": Shape((LP,), None, (), RP, channel_types=_ANY),
    "repkt": Shape((L,), LP, (L,), None, reduces=True),
    "respkt": Shape((L,), LP, (L,), RP, reduces=True, channel_types=_MEM),
    "recpkt": Shape((L,), LP, (L, LP), None, reduces=True),
    "recspkt": Shape((L,), LP, (L, LP), RP, reduces=True, channel_types=_MEM),
    "glre": Shape((S,), None, (L,), None, reduces=True, channel_types=_SWITCH),
    "gstore": Shape((L,), None, (S,), None, channel_types=_SWITCH),
    "gstorepkt": Shape((LP,), None, (SP,), None, channel_types=_SWITCH),
    "glres": Shape((S,), None, (S,), None, reduces=True, channel_types=_SWITCH),
}

SIGNAL_OPS = frozenset({"signal", "rlxsignal"})
WAIT_OPS = frozenset({"wait", "rlxwait"})
CHANNEL_SYNC_OPS = SIGNAL_OPS | WAIT_OPS | {"flush"}
SEMAPHORE_OPS = frozenset({"sem_acquire", "sem_release"})
SYNC_OPS = CHANNEL_SYNC_OPS | SEMAPHORE_OPS | {"nop", "barrier"}
PORT_ASYNC_OPS = frozenset({"put", "pws", "pwsf", "ppkt", "rppkt"})  # through the proxy on port channels
ALL_OPS = frozenset(DATA_OPS) | SYNC_OPS | {"pipeline"}


def roles(name: str, n_src: int, n_dst: int) -> tuple[list[str], list[str]]:
    """Role of each src and dst buffer of op ``name`` with the given list lengths (validated elsewhere)."""
    shape = DATA_OPS[name]
    src = list(shape.src_head) + [shape.src_rest] * (n_src - len(shape.src_head))
    dst = list(shape.dst_head) + [shape.dst_rest] * (n_dst - len(shape.dst_head))
    return src, dst
