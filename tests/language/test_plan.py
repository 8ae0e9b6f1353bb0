"""Loading and validating execution plans: MSCCL++'s JSON format, errors that name the bad field."""

from __future__ import annotations

import copy
import json

import pytest

from pymscclpp.plan import PlanError, load_plan
from pymscclpp.language.programs import allreduce_allpairs


@pytest.fixture(scope="module")
def plan_dict() -> dict:
    return allreduce_allpairs(3)


def test_library_plan_loads_with_every_rank_threadblock_and_channel(plan_dict):
    plan = load_plan(json.dumps(plan_dict))
    assert plan.num_ranks == 3 and plan.collective == "allreduce" and plan.protocol == "simple"
    assert [g.input_chunks for g in plan.gpus] == [3, 3, 3]
    assert plan.gpus[0].channels["memory"] == [1, 2]
    assert plan.gpus[0].threadblocks[0].ops[0].name == "signal"


def test_plan_round_trips_through_to_dict(plan_dict):
    assert load_plan(plan_dict).to_dict() == load_plan(load_plan(plan_dict).to_dict()).to_dict()
    assert load_plan(load_plan(plan_dict).to_json()).to_dict() == load_plan(plan_dict).to_dict()


def test_plan_loads_from_a_file_path(plan_dict, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_dict))
    assert load_plan(path).name == plan_dict["name"]
    assert load_plan(str(path)).name == plan_dict["name"]


def test_paired_channel_is_the_kth_channel_back():
    plan = load_plan(allreduce_allpairs(3, chunk_factor=2))
    # rank 0 has memory channels [1, 2, 1, 2] (lane 0 then lane 1); rank 2 has [0, 1, 0, 1]
    assert plan.gpus[0].channels["memory"] == [1, 2, 1, 2]
    assert plan.paired_channel(0, "memory", 3) == (2, 2)
    assert plan.paired_channel(2, "memory", 0) == (0, 1)


def test_remote_buffer_resolves_through_the_threadblock_refs(plan_dict):
    plan = load_plan(plan_dict)
    put = next(op for op in plan.gpus[0].threadblocks[0].ops if op.name == "put")
    targets = [plan.remote_buffer(0, 0, "memory", ref.buffer_id) for ref in put.dst_buff]
    assert [(rb.rank, rb.type) for rb in targets] == [(1, "s"), (2, "s")]


def _expect(plan_dict: dict, edit, path: str, words: str) -> None:
    bad = copy.deepcopy(plan_dict)
    edit(bad)
    with pytest.raises(PlanError) as info:
        load_plan(bad)
    message = str(info.value)
    assert message.startswith(path + ":"), message
    assert words in message, message


def _put_index(d: dict) -> int:
    return next(i for i, op in enumerate(d["gpus"][1]["threadblocks"][0]["ops"]) if op["name"] == "put")


@pytest.mark.parametrize("edit, path, words", [
    (lambda d: d.pop("protocol"), "protocol", "missing"),
    (lambda d: d.update(protocol="LL128"), "protocol", "'Simple' or 'LL'"),
    (lambda d: d.update(inplace="no"), "inplace", "expected bool"),
    (lambda d: d["gpus"][1].update(id=7), "gpus[1].id", "must equal its position 1"),
    (lambda d: d["gpus"][2].update(scratch_chunks=-1), "gpus[2].scratch_chunks", ">= 0"),
    (lambda d: d["gpus"][0]["channels"][0]["connected_to"].append(9), "gpus[0].channels[0].connected_to[2]", "rank in [0, 3)"),
    (lambda d: d["gpus"][0]["channels"][0]["connected_to"].append(0), "gpus[0].channels[0].connected_to[2]", "itself"),
    (lambda d: d["gpus"][0]["channels"][0].update(channel_type="switch"), "gpus[0].channels[0].buffer_type", "missing"),
    (lambda d: d["gpus"][0]["channels"][0].update(channel_type="nvlink"), "gpus[0].channels[0].channel_type", "one of"),
    (lambda d: d["gpus"][0]["remote_buffers"][0].update(type="x"), "gpus[0].remote_buffers[0].type", "one of"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][0].update(name="fly"), "gpus[1].threadblocks[0].ops[0].name", "unknown op 'fly'"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][0].update(channel_ids=[5]), "gpus[1].threadblocks[0].ops[0].channel_ids[0]", "no channel 5"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)]["dst_buff"][0].update(index=2),
     f"gpus[1].threadblocks[0].ops[4].dst_buff[0].index", "chunks [2, 3) exceed the 2 's' chunks of rank 0"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)]["src_buff"][0].update(size=0),
     "gpus[1].threadblocks[0].ops[4].src_buff[0].size", ">= 1"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)]["dst_buff"][0].update(buffer_id=9),
     "gpus[1].threadblocks[0].ops[4].dst_buff[0].buffer_id", "no buffer 9"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)]["dst_buff"][0].pop("buffer_id"),
     "gpus[1].threadblocks[0].ops[4].dst_buff[0]", "needs 'type'"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)].pop("channel_type"),
     "gpus[1].threadblocks[0].ops[4].channel_type", "needs channel_type"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)]["dst_buff"].pop(),
     "gpus[1].threadblocks[0].ops[4].dst_buff", "as many dst as src"),
    (lambda d: d["gpus"][1]["threadblocks"][0]["ops"][_put_index(d)].update(tbg_info={"tb_id": 2, "tbg_size": 2}),
     "gpus[1].threadblocks[0].ops[4].tbg_info.tb_id", "not below tbg_size"),
    (lambda d: d["gpus"][1]["threadblocks"][0].update(id=3), "gpus[1].threadblocks[0].id", "must equal its position 0"),
])
def test_invalid_field_is_named_by_its_json_path(plan_dict, edit, path, words):
    _expect(plan_dict, edit, path, words)


def test_invalid_json_text_is_a_plan_error():
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plan("{not json")


def test_packet_buffers_must_be_scratch():
    from pymscclpp.language.programs import allgather
    d = allgather(2, protocol="packet")
    tb = d["gpus"][0]["threadblocks"][0]["ops"]
    i = next(i for i, op in enumerate(tb) if op["name"] == "upkt")
    tb[i]["src_buff"][0]["type"] = "i"
    with pytest.raises(PlanError, match=rf"gpus\[0\]\.threadblocks\[0\]\.ops\[{i}\]\.src_buff\[0\]: upkt keeps packets here"):
        load_plan(d)
