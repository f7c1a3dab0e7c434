"""`python -m myir demo` runs and agrees with CPython; `python -m myir` alone prints usage."""

import os
import subprocess
import sys

import pytest

from myir import demo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_myir(*args):
    return subprocess.run([sys.executable, "-m", "myir", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def demo_run():
    return run_myir("demo")


def case_rows(stdout):
    """The table rows: {function name: the row's columns}."""
    lines = stdout.splitlines()
    header = next(i for i, l in enumerate(lines) if "== CPython" in l)
    rows = {}
    for line in lines[header + 1:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line
    return lines[header], rows


def test_demo_exits_zero(demo_run):
    assert demo_run.returncode == 0, demo_run.stderr
    assert "Traceback" not in demo_run.stderr


def test_demo_every_case_agrees_with_cpython(demo_run):
    header, rows = case_rows(demo_run.stdout)
    assert set(rows) == {fn.__name__ for fn, _ in demo.CASES}
    column = header.index("== CPython")
    for name, row in rows.items():
        assert row[column:].split()[0] == "True", row
    assert "MISMATCH" not in demo_run.stdout


def test_demo_shows_graph_and_generated_source(demo_run):
    out = demo_run.stdout
    assert "graph newton_sqrt(%a) {" in out
    assert "def newton_sqrt(a):" in out
    assert "while True:" in out           # the loop graph became a loop


@pytest.mark.parametrize("args", [(), ("nonsense",)], ids=["no-args", "unknown-command"])
def test_usage_without_a_command(args):
    done = run_myir(*args)
    assert done.returncode == 2
    assert "usage" in done.stderr.lower()
    assert "demo" in done.stderr
    assert done.stdout == ""
