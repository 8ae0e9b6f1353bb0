"""Generated kernel source, the compile cache, plan loading and message layout (no rank processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from executor.programs import allgather_scattered
from ptx.counts import script_output
from pymscclpp.executor import ExecutionPlan
from pymscclpp.executor.cache import kernel_key, load_module
from pymscclpp.executor.codegen import KernelSpec, _lookup, _template_classes
from pymscclpp.executor.layout import message_layout
from pymscclpp.language.programs import PROGRAMS

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def spec(name: str = "allreduce_allpairs", n: int = 2, rank: int = 0, size_class: int = 0, sim_threads: int = 0,
         checked: bool = False, **kwargs) -> KernelSpec:
    return KernelSpec(ExecutionPlan.from_plan(PROGRAMS[name](n, **kwargs)), rank, 0, 0, 4, size_class, sim_threads,
                      checked)


@pytest.fixture(scope="module")
def ptx_lines():
    out = {}
    for line in script_output("compile_kernels.py").splitlines():
        name, n, _, dtype, size_class, _, *counts = line.split()
        out[name, int(n), dtype] = {k: int(v) for k, v in (c.split("=") for c in counts)}
    return out


def test_every_generated_kernel_compiles_to_ptx(ptx_lines):
    assert len(ptx_lines) >= 14


def test_simple_plans_copy_with_16_byte_vectors_and_signal_with_release(ptx_lines):
    simple = ptx_lines["allreduce_allpairs", 2, "float32"]
    assert simple["ld.global.v4.u32"] > 0 and simple["st.global.v4.u32"] > 0
    assert simple["red.release.sys.global.add"] > 0 and simple["ld.acquire.sys.global"] > 0


def test_a_checked_kernel_stores_the_fingerprint_packet_its_simple_plan_has_none_of(ptx_lines):
    assert ptx_lines["allgather", 2, "float32"]["st.volatile.global.v4.u32"] == 0
    assert ptx_lines["allgather_checked", 2, "float32"]["st.volatile.global.v4.u32"] == 1


def test_ll_plans_store_each_packet_with_one_volatile_16_byte_store(ptx_lines):
    assert ptx_lines["allreduce_allpairs_packet", 2, "float16"]["st.volatile.global.v4.u32"] > 0
    assert ptx_lines["allreduce_allpairs_packet", 2, "float16"]["red.release.sys.global.add"] == 0


def test_kernel_is_straight_line_calls_per_thread_block():
    source = spec(n=3).source()
    assert "def tb_class0(" in source and "# ops[4] put" in source and "P.copy_bytes(" in source
    assert "S.signal(sem2, 0)" in source
    assert "for op in" not in source and "if name ==" not in source  # no op interpreter on the device


def test_instance_replicas_share_one_function_with_offsets_affine_in_the_block_index():
    source = spec(instances=4).source()
    assert source.count("def tb_class") == 1 and "    i = g\n" in source
    assert "S.signal(sem1, i)" in source and "# ops[" not in source


def test_blocks_alike_up_to_unordered_constants_look_them_up_in_tables_once():
    source = KernelSpec(ExecutionPlan.from_plan(allgather_scattered(3)), 1, 0, 0, 4, 0, 0).source()
    assert source.count("def tb_class") == 2 and "elif c == 1:" in source
    assert "    i = (0, 1, 2, 3, 0)[g]\n" in source and "    c = (0, 0, 0, 0, 1)[g]\n" in source
    assert source.count("(2, 0, 3, 1)[i]") == 1 and source.count("(6, 4, 7, 5)[i]") == 1


def test_small_chunks_are_built_into_the_kernel_and_large_ones_are_an_argument():
    small, large = spec(size_class=256), spec()
    assert "CHUNK = 256" in small.source() and "chunk" not in small.arg_names
    assert "CHUNK =" not in large.source() and large.arg_names[-1] == "chunk"


def test_simulator_variant_plays_thread_blocks_with_thread_groups_of_one_block():
    gpu, sim = spec(instances=3), spec(instances=3, sim_threads=4)
    assert gpu.launch_dims == (3, 1024) and sim.launch_dims == (1, 12)
    assert "cuda.syncthreads()" not in sim.source() and "D.group_sync(" in sim.source()


def test_a_checked_kernel_runs_the_call_check_before_any_op_and_takes_its_handle_and_fingerprint():
    plain, checked = spec(size_class=256), spec(size_class=256, checked=True)
    assert plain.arg_names + ["call_check", "fingerprint"] == checked.arg_names
    source = checked.source()
    check = source.index("    if not checked_call(call_check, fingerprint, RANK, NRANKS, OP_CALLCHECK):\n"
                         "        return\n")
    assert check < source.index("    tb_class0(") and "NRANKS = 2" in source
    assert "checked_call" not in plain.source() and "call_check" not in source.split("def tb_class0(")[1].split(")")[0]


def test_cache_key_depends_on_plan_rank_dtype_op_size_class_and_the_call_check():
    base = spec()
    keys = {kernel_key(base), kernel_key(spec(rank=1)), kernel_key(spec(size_class=512)), kernel_key(spec(instances=2)),
            kernel_key(KernelSpec(base.xplan, 0, 2, 0, 2, 0, 0)), kernel_key(KernelSpec(base.xplan, 0, 0, 1, 4, 0, 0)),
            kernel_key(spec(checked=True))}
    assert len(keys) == 7 and kernel_key(spec()) == kernel_key(base)


def test_a_second_process_finds_the_generated_source_in_the_disk_cache(tmp_path):
    code = ("import sys; sys.path.insert(0, 'tests'); from executor.test_executor_codegen import spec;"
            "from pymscclpp.executor.cache import load_module, kernel_key;"
            "m, t = load_module(spec(size_class=128, sim_threads=2)); print(m.__file__, kernel_key(spec(size_class=128, sim_threads=2)))")
    env = {**os.environ, "PYMSCCLPP_CACHE_DIR": str(tmp_path), "PYMSCCLPP_BACKEND": "sim"}
    first = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    path = Path(first.stdout.split()[0])
    stamp = path.stat().st_mtime_ns
    second = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert second.stdout == first.stdout and path.stat().st_mtime_ns == stamp
    assert path.parent == tmp_path / "executor"


def test_in_process_cache_returns_the_same_module(tmp_path, monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_CACHE_DIR", str(tmp_path))
    s = spec(size_class=64, sim_threads=3)
    first, _ = load_module(s)
    again, seconds = load_module(s)
    assert again is first and seconds == 0.0


def test_plan_from_file_and_from_json_have_the_same_hash(tmp_path):
    plan = PROGRAMS["allgather"](3, protocol="packet")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    a, b = ExecutionPlan.from_file(path), ExecutionPlan.from_json(json.dumps(plan, indent=2))
    assert a.key == b.key and a.uses_packets and not a.reduces
    assert ExecutionPlan.from_plan(PROGRAMS["allgather"](3)).key != a.key


def test_odd_element_counts_pad_each_part_to_whole_chunks():
    xplan = ExecutionPlan.from_plan(PROGRAMS["allgather"](2, chunk_factor=2))
    odd = message_layout(xplan, 0, 7 * 2, 14 * 2, 2)  # 7 float16 per rank
    assert (odd.chunk, odd.part, odd.padded_part, odd.exact) == (16, 14, 32, False)
    assert odd.out_slots() == [(0, 0), (14, 32)]
    exact = message_layout(xplan, 1, 64, 128, 4)
    assert exact.exact and exact.chunk == 32 and exact.size_class == 32


@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=40))
def test_block_constant_lookup_expression_gives_every_members_value(values):
    expr = _lookup(values, "g")
    assert all(eval(expr, {"g": k}) == v for k, v in enumerate(values))  # noqa: S307 (generated from ints only)
    if len(set(values)) == 1:
        assert expr == str(values[0])


def _run_body(lines: list[str], i: int) -> dict:
    """Execute generated body lines (4-space indented) as a function of ``i``; its local variables."""
    scope: dict = {}
    exec("def body(i, c):\n" + "\n".join(lines) + "\n    return {k: v for k, v in locals().items() if k[0] == 'v'}",
         scope)  # noqa: S102 (lines built from ints by this test)
    return scope["body"](i, 7)


@given(st.lists(st.lists(st.integers(0, 50), min_size=3, max_size=3), min_size=1, max_size=6),
       st.integers(1, 5))
def test_each_member_of_a_template_class_computes_what_its_own_code_did(rows, nblocks):
    # blocks alike up to integer constants: line j is "v{j} = a * c + b"; block t perturbs some constants
    blocks = []
    for t in range(nblocks):
        lines = [f"    v{j} = {a + (t * t if flip % 2 else 0)} * c + {b + (t if flip % 3 == 0 else 0)}"
                 for j, (a, b, flip) in enumerate(rows)]
        blocks.append((t, lines))
    classes = _template_classes(blocks)
    assert len(classes) == 1 and classes[0][1] == list(range(nblocks))
    template = classes[0][0]
    for t, lines in blocks:
        assert _run_body(template, t) == _run_body(lines, t)


def test_affine_constants_keep_their_place_in_operator_precedence():
    blocks = [(t, [f"    v0 = 2 ** {2 * t} * c", f"    v1 = c * 1000 // {4 * t + 1} % {3 * t + 7}"]) for t in range(3)]
    (template, members), = _template_classes(blocks)
    assert members == [0, 1, 2] and "2 ** (2 * i) * c" in template[0]
    for t, lines in blocks:
        assert _run_body(template, t) == _run_body(lines, t)
