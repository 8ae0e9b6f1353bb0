"""Thread-block groups: several thread blocks sharing one data op, each taking its slice (MSCCL++ ``ThreadBlockGroup``)."""

from __future__ import annotations

from typing import Sequence


class ThreadBlockGroup:
    """An ordered set of thread block ids; an op given ``tb_group=`` runs on each, split evenly among them."""

    def __init__(self, tb_list: Sequence[int]):
        self.tb_list: list[int] = list(tb_list)
        self._ids = {tb: i for i, tb in enumerate(self.tb_list)}
        if len(self._ids) != len(self.tb_list):
            raise ValueError(f"thread block group {self.tb_list} repeats a thread block")
        if not self.tb_list:
            raise ValueError("a thread block group needs at least one thread block")

    def get_internal_id(self, tb: int) -> int:
        """Position of thread block ``tb`` in the group."""
        if tb not in self._ids:
            raise ValueError(f"thread block {tb} is not in group {self.tb_list}")
        return self._ids[tb]

    def numtb(self) -> int:
        return len(self.tb_list)

    def __len__(self) -> int:
        return len(self.tb_list)


def placements(tb: int | None, tb_group: ThreadBlockGroup | None) -> list[tuple[int, tuple[int, int] | None]]:
    """(thread block, (index in group, group size) or None) for each thread block an op runs on."""
    if tb is not None:
        return [(tb, None)]
    if tb_group is not None:
        return [(t, (i, len(tb_group))) for i, t in enumerate(tb_group.tb_list)]
    raise RuntimeError("either 'tb' (thread block id) or 'tb_group' (ThreadBlockGroup) must be given")
