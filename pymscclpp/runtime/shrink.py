"""Who carries on: the survivors' agreement of ``Communicator.shrink`` and the groups of ``Communicator.split``,
each ending in the members (old ranks, in new-rank order) and the unique id of their new bootstrap.

Shrink, over the old bootstrap's connections to survivors only: every survivor sends the ranks it counts as gone
to the lowest rank it counts as alive (the new root); the root adds the ranks it could not hear from, makes a new
unique id (listening where its peers already reach it) and answers every survivor with the members and that id.
A survivor that loses the root (it died too) counts it as gone and turns to the next lowest rank, so a second
death during the agreement still ends in one. Messages go under bootstrap-reserved tags, one per agreement and
root, so rounds never mix. Nothing received is unpickled: rank lists are fixed-width integers, checked.
"""

from __future__ import annotations

import struct
import weakref

from ..errors import BootstrapError, InvalidUsageError, PeerDisconnectedError
from .bootstrap.base import Bootstrap
from .bootstrap.tcp import UniqueId, get_unique_id
from .bootstrap.wire import TAG_LIMIT
from .deadline import Deadline

_TAG = TAG_LIMIT + (1 << 62)  # the k-th agreement of a bootstrap with root r: _TAG + (k << 32) + r
_RANK = struct.Struct("!I")
_SPLIT = struct.Struct("<qq")  # color (-1: none), key
_AGREEMENTS: "weakref.WeakKeyDictionary[Bootstrap, int]" = weakref.WeakKeyDictionary()


def _pack_ranks(ranks) -> bytes:
    ranks = sorted(ranks)
    return _RANK.pack(len(ranks)) + b"".join(_RANK.pack(r) for r in ranks)


def _unpack_ranks(data: bytes, size: int, what: str) -> tuple[list[int], bytes]:
    """(the sorted distinct ranks < ``size`` at the head of ``data``, the rest); else BootstrapError."""
    if len(data) < _RANK.size:
        raise BootstrapError(f"{what}: a message of {len(data)} bytes is too short")
    (count,) = _RANK.unpack_from(data)
    end = _RANK.size * (count + 1)
    if count > size or len(data) < end:
        raise BootstrapError(f"{what}: a list of {count} ranks in {len(data)} bytes, for {size} ranks")
    ranks = [_RANK.unpack_from(data, _RANK.size * (i + 1))[0] for i in range(count)]
    if ranks != sorted(set(ranks)) or (ranks and ranks[-1] >= size):
        raise BootstrapError(f"{what}: ranks {ranks} are not distinct ranks of 0..{size - 1} in order")
    return ranks, data[end:]


def agree_survivors(bootstrap: Bootstrap, gone: set[int]) -> tuple[list[int], UniqueId]:
    """(the surviving old ranks, in order; their new bootstrap's unique id), agreed with every survivor; ``gone``:
    the ranks this one counts as dead or excluded. Waits share the bootstrap's budget."""
    rank, size = bootstrap.rank, bootstrap.size
    k = _AGREEMENTS.get(bootstrap, 0)
    _AGREEMENTS[bootstrap] = k + 1
    gone = set(gone)
    deadline = Deadline(bootstrap.timeout)
    while True:
        members = [r for r in range(size) if r not in gone]
        if rank not in members:
            raise InvalidUsageError(f"rank {rank}: shrink: this rank is among the excluded {sorted(gone)}")
        root, tag = members[0], _TAG + (k << 32) + members[0]
        if root == rank:
            return _decide(bootstrap, members[1:], gone, tag, deadline)
        what = f"shrink: the survivors from the new root, rank {root}"
        try:
            bootstrap.send_reserved(_pack_ranks(gone), root, tag, deadline, f"shrink: our dead ranks to rank {root}")
            reply = bootstrap.recv_reserved(root, tag, deadline, what)
        except PeerDisconnectedError:
            gone.add(root)  # the root died too: the next lowest survivor takes over
            continue
        survivors, uid = _unpack_ranks(reply, size, f"rank {rank}: {what}")
        if rank not in survivors:
            raise PeerDisconnectedError(f"rank {rank}: shrink: the survivors {survivors} count this rank as dead")
        return survivors, UniqueId.from_bytes(uid)


def _decide(bootstrap: Bootstrap, peers: list[int], gone: set[int], tag: int,
            deadline: Deadline) -> tuple[list[int], UniqueId]:
    """The root's side: hear every peer (one that is gone is counted so), then answer the ones heard."""
    heard = []
    for peer in peers:
        what = f"shrink: the dead ranks of rank {peer}"
        try:
            theirs, _ = _unpack_ranks(bootstrap.recv_reserved(peer, tag, deadline, what), bootstrap.size,
                                      f"rank {bootstrap.rank}: {what}")
        except PeerDisconnectedError:
            gone.add(peer)
            continue
        gone.update(theirs)
        heard.append(peer)
    survivors = [r for r in range(bootstrap.size) if r not in gone]
    uid = _new_id(bootstrap)
    answer = _pack_ranks(survivors) + uid.to_bytes()
    for peer in heard:
        try:
            bootstrap.send_reserved(answer, peer, tag, deadline, f"shrink: the survivors to rank {peer}")
        except PeerDisconnectedError:
            pass  # it died since: the new bootstrap's set-up reports it
    return survivors, uid


def split_groups(bootstrap: Bootstrap, color: int | None, key: int) -> tuple[list[int], UniqueId] | None:
    """(the old ranks of this rank's color, ordered by key then old rank; their new bootstrap's unique id), or None
    for color None; collective over every rank (two all-gathers: colors and keys, then each group's unique id)."""
    rank, size = bootstrap.rank, bootstrap.size
    entries = []
    for r, blob in enumerate(bootstrap.all_gather(_SPLIT.pack(-1 if color is None else color, key),
                                                       what="split: colors and keys")):
        if len(blob) != _SPLIT.size:
            raise BootstrapError(f"rank {rank}: split: rank {r} sent {len(blob)} bytes for its color and key")
        entries.append(_SPLIT.unpack(blob))
    mine = entries[rank][0]
    members = sorted((r for r in range(size) if mine >= 0 and entries[r][0] == mine), key=lambda r: (entries[r][1], r))
    leader = bool(members) and members[0] == rank
    uids = bootstrap.all_gather(_new_id(bootstrap).to_bytes() if leader else b"", what="split: the groups' unique ids")
    return None if not members else (members, UniqueId.from_bytes(uids[members[0]]))


def _new_id(bootstrap: Bootstrap) -> UniqueId:
    """A unique id whose root listens in this process, where the peers already reach this rank (TCP), else at
    the default address."""
    return get_unique_id(addr=bootstrap.host) if bootstrap.host else get_unique_id()
