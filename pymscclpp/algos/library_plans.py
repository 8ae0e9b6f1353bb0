"""The library's DSL programs (``language.programs``) as plan algorithms named by their parameters, such as
``plan:allreduce_rsag/simple/i4/c1``: the tuner searches protocols, instances and chunk factors, and a tuning file
or ``algo=`` naming a winner makes any process rebuild that very plan for its rank count."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

from ..errors import InvalidUsageError
from ..plan.protocols import PACKET, SIMPLE
from .plan_algorithm import PlanAlgorithm

PREFIX = "plan:"
PROTOCOLS = (SIMPLE, PACKET)
INSTANCES = (1, 2, 4, 8)
CHUNK_FACTORS = (1, 2)


def _programs() -> dict:
    from ..language.programs import PROGRAMS  # the DSL loads only when a library plan is asked for
    return PROGRAMS


@dataclass(frozen=True)
class LibraryPlan:
    """One library program with its parameters; ``name`` says them all and ``parse`` reads it back."""

    program: str
    protocol: str = SIMPLE
    instances: int = 1
    chunk_factor: int = 1

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.program}/{self.protocol}/i{self.instances}/c{self.chunk_factor}"

    @classmethod
    def parse(cls, name: str) -> LibraryPlan | None:
        """The plan ``name`` stands for; None for a name without the ``plan:`` prefix; InvalidUsageError for one
        with it that names no library program or malformed parameters."""
        if not name.startswith(PREFIX):
            return None
        parts = name[len(PREFIX):].split("/")
        try:
            program, protocol, inst, chunk = parts
            if not (inst[0] == "i" and chunk[0] == "c"):
                raise ValueError
            spec = cls(program, protocol, int(inst[1:]), int(chunk[1:]))
        except ValueError:
            raise InvalidUsageError(f"algorithm {name!r}: a library plan is named plan:PROGRAM/PROTOCOL/iINSTANCES/"
                                    f"cCHUNK_FACTOR, e.g. plan:allreduce_rsag/simple/i4/c1") from None
        if program not in _programs():
            raise InvalidUsageError(f"algorithm {name!r}: no library program {program!r}: choose from "
                                    f"{sorted(_programs())}")
        if protocol not in spec.protocols():
            raise InvalidUsageError(f"algorithm {name!r}: {program} runs the protocols {spec.protocols()}")
        return spec

    def protocols(self) -> tuple[str, ...]:
        """The protocols the program offers."""
        takes = "protocol" in inspect.signature(_programs()[self.program]).parameters
        return PROTOCOLS if takes else (SIMPLE,)

    def plan(self, nranks: int) -> dict:
        """The program's plan for ``nranks`` ranks (built once per rank count)."""
        return _built(self, nranks)

    def collective(self, nranks: int) -> str:
        """The collective the program's plan serves, by the Collective API's name."""
        return PlanAlgorithm.collective_of(self.plan(nranks))

    def algorithm(self, nranks: int, collective: str) -> PlanAlgorithm:
        """The plan as an algorithm of ``collective``; InvalidUsageError if the program serves another."""
        serves = self.collective(nranks)
        if serves != collective:
            raise InvalidUsageError(f"algorithm {self.name!r} serves {serves}, not {collective}")
        return PlanAlgorithm(self.plan(nranks), self.name, collective)


@functools.lru_cache(maxsize=64)
def _built(spec: LibraryPlan, nranks: int) -> dict:
    build = _programs()[spec.program]
    kwargs = {"instances": spec.instances, "chunk_factor": spec.chunk_factor}
    if "protocol" in inspect.signature(build).parameters:
        kwargs["protocol"] = spec.protocol
    try:
        return build(nranks, **kwargs)
    except ValueError as exc:
        raise InvalidUsageError(f"algorithm {spec.name!r} on {nranks} ranks: {exc}") from None


def search_space(nranks: int, collective: str) -> list[LibraryPlan]:
    """Every library plan of ``collective`` the tuner tries on ``nranks`` ranks: each program of that collective
    with each protocol it offers, instances and chunk factor."""
    out = []
    for program in sorted(_programs()):
        first = LibraryPlan(program)
        if first.collective(nranks) != collective:
            continue
        out += [LibraryPlan(program, proto, inst, chunk) for proto in first.protocols() for inst in INSTANCES
                for chunk in CHUNK_FACTORS]
    return out
