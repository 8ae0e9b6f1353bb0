"""The command lines: ``python -m pymscclpp.language.verify`` and ``python -m pymscclpp.language.programs``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pymscclpp.language.programs import allgather
from pymscclpp.language.programs.__main__ import main as programs_main
from pymscclpp.language.verify import main as verify_main

from .conftest import names, without_op


def _module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def test_programs_command_prints_a_plan_that_verify_accepts(tmp_path):
    made = _module("pymscclpp.language.programs", "allreduce_allpairs", "--ranks", "3", "--protocol", "packet")
    assert made.returncode == 0, made.stderr
    plan = json.loads(made.stdout)
    assert plan["protocol"] == "LL" and len(plan["gpus"]) == 3
    path = tmp_path / "plan.json"
    path.write_text(made.stdout)
    checked = _module("pymscclpp.language.verify", str(path), "--dtype", "float16", "--seed", "7")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("\n") == 1
    assert checked.stdout.startswith("OK: plan 'allreduce_allpairs_packet' computes allreduce on 3 ranks "
                                     "(packet, float16")


def test_verify_exits_nonzero_with_the_race(tmp_path, capsys):
    plan = allgather(2)
    last = len(names(plan, 1, 0)) - 1
    path = tmp_path / "racy.json"
    path.write_text(json.dumps(without_op(plan, 1, 0, last)))
    assert verify_main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("FAIL: RaceError: race on rank 1 output chunk 0")


def test_verify_reports_a_deadlock(tmp_path, capsys):
    plan = allgather(2)
    path = tmp_path / "stuck.json"
    path.write_text(json.dumps(without_op(plan, 0, 0, names(plan, 0, 0).index("signal"))))
    assert verify_main([str(path)]) == 1
    assert "FAIL: DeadlockError: deadlock" in capsys.readouterr().err


def test_verify_reports_an_invalid_plan_by_field(tmp_path, capsys):
    plan = allgather(2)
    plan["gpus"][0]["threadblocks"][0]["ops"][0]["name"] = "teleport"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(plan))
    assert verify_main([str(path)]) == 1
    assert "FAIL: invalid plan: gpus[0].threadblocks[0].ops[0].name: unknown op 'teleport'" in capsys.readouterr().err


def test_verify_size_and_rank_lines(tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(allgather(2, chunk_factor=2)))
    assert verify_main([str(path), "--size", "512", "--ranks-check", "--executions", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "512 bytes, 3 executions" in out[0]
    assert out[1:] == [f"  rank {r}: 2 thread blocks, 20 ops, 2/4/0 input/output/scratch chunks: OK" for r in range(2)]
    assert verify_main([str(path), "--size", "100"]) == 1
    assert verify_main([str(tmp_path / "missing.json")]) == 1


def test_programs_command_rejects_options_a_program_lacks(capsys):
    with pytest.raises(SystemExit):
        programs_main(["alltoall", "--ranks", "2", "--protocol", "packet"])
    assert "alltoall has no --protocol option" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        programs_main(["allgather", "--ranks", "1"])
