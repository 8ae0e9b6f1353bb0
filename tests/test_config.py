"""pymscclpp.config declares every PYMSCCLPP_* variable: README's table is its table, no module reads the environment
around it, values are read at use and checked, and ``python -m pymscclpp.config`` says where each value came from."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pymscclpp import config
from pymscclpp.errors import InvalidUsageError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pymscclpp"


def test_readme_table_of_environment_variables_is_the_config_modules_table():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Environment variables", 1)[1]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert rows == config.table(), "README's table differs: paste `python -m pymscclpp.config --table` into it"


def test_no_module_reads_a_pymscclpp_variable_around_the_config_module():
    reads = re.compile(r"(os\.environ|getenv|environ\.get)[^\n]*PYMSCCLPP_|PYMSCCLPP_[A-Z_]*[\"']\s*\]?\s*in\s+os\.environ")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in PACKAGE.rglob("*.py") if path.parent.name != "config"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if reads.search(line) and "setdefault" not in line]
    assert not found, f"read PYMSCCLPP_* through pymscclpp.config instead: {found}"


def test_every_pymscclpp_variable_named_in_the_package_is_declared():
    named = {m for path in PACKAGE.rglob("*.py") for m in re.findall(r"PYMSCCLPP_[A-Z_]+[A-Z]", path.read_text())}
    assert named - set(config.VARIABLES) == set()


def test_values_are_read_at_use_not_at_import(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_SIM_THREADS", "7")
    assert config.get("PYMSCCLPP_SIM_THREADS") == 7
    monkeypatch.setenv("PYMSCCLPP_SIM_THREADS", " ")
    assert config.get("PYMSCCLPP_SIM_THREADS") == 4  # empty is unset: the default
    monkeypatch.delenv("PYMSCCLPP_SIM_THREADS")
    assert config.get("PYMSCCLPP_SIM_THREADS") == 4


def test_a_tool_sets_a_variable_checked_and_refuses_a_bad_value(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_GRAPH_ZERO_COPY", "1")  # restored (unset) after the test
    config.set_value("PYMSCCLPP_GRAPH_ZERO_COPY", "0")
    assert config.get("PYMSCCLPP_GRAPH_ZERO_COPY") is False
    with pytest.raises(InvalidUsageError, match="PYMSCCLPP_GRAPH_ZERO_COPY"):
        config.set_value("PYMSCCLPP_GRAPH_ZERO_COPY", "maybe")
    assert config.get("PYMSCCLPP_GRAPH_ZERO_COPY") is False


@pytest.mark.parametrize("name, text, value", [
    ("PYMSCCLPP_TIMEOUT_S", "0", None), ("PYMSCCLPP_TIMEOUT_S", "2.5", 2.5),
    ("PYMSCCLPP_BOOTSTRAP_MAX_MSG", "0x400", 1024), ("PYMSCCLPP_MAX_SCRATCH_BYTES", "4096", 4096),
    ("PYMSCCLPP_LIVENESS", "OFF", False), ("PYMSCCLPP_ASYNC_ERROR_HANDLING", "1", "abort"),
    ("PYMSCCLPP_TRANSPORT", "tcp", "ethernet"), ("PYMSCCLPP_DEBUG", "debug:bootstrap, memory", ("DEBUG", ("bootstrap", "memory"))),
    ("PYMSCCLPP_PROXY_CPUS", "0-3,8", "0-3,8"), ("PYMSCCLPP_JOB_TOKEN", "ab" * 16, bytes([0xab] * 16)),
])
def test_values_parse_to_their_declared_type(name, text, value):
    assert config.get(name, {name: text}) == value


def test_a_bad_value_names_the_variable_and_what_it_accepts():
    with pytest.raises(InvalidUsageError) as info:
        config.get("PYMSCCLPP_MAX_SCRATCH_BYTES", {"PYMSCCLPP_MAX_SCRATCH_BYTES": "-5"})
    assert str(info.value) == "PYMSCCLPP_MAX_SCRATCH_BYTES='-5': expected a positive number of bytes"


def test_an_undeclared_name_is_a_programming_error():
    with pytest.raises(KeyError, match="PYMSCCLPP_NOPE is not a declared pymscclpp variable"):
        config.get("PYMSCCLPP_NOPE")


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYMSCCLPP_")}
    return subprocess.run([sys.executable, "-m", "pymscclpp.config", *args], capture_output=True, text=True,
                          env={**base, "PYMSCCLPP_BACKEND": "sim", **env}, timeout=120)


def test_cli_prints_every_variable_with_its_value_and_source():
    done = _cli(env={"PYMSCCLPP_TIMEOUT_S": "30"})
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("PYMSCCLPP_")}
    assert set(lines) == set(config.VARIABLES)
    assert lines["PYMSCCLPP_TIMEOUT_S"].split()[1:] == ["30", "(environment)"]
    assert lines["PYMSCCLPP_BACKEND"].split()[1:] == ["sim", "(environment)"]
    assert lines["PYMSCCLPP_MAX_SEMAPHORES"].split()[1:] == ["4096", "(default)"]


def test_cli_names_a_refused_value_and_fails():
    done = _cli(env={"PYMSCCLPP_IB_PORT": "first"})
    assert done.returncode == 1
    assert "PYMSCCLPP_IB_PORT='first': expected a port number in [1, 255]" in done.stdout


def test_cli_table_is_the_readme_table():
    done = _cli("--table", env={})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == config.table()
