"""`python -m myir show|run`: each command in a subprocess, as a user runs it."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from myir import viz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTIONS = "examples/functions.py"


def myir_cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "myir", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def ok(*args, **kw):
    done = myir_cli(*args, **kw)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fails(*args):
    """A clear one-line error on stderr, exit status 1, no traceback."""
    done = myir_cli(*args)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ")
    return done.stderr


def test_show_fastmath_gradient():
    """--fastmath: the logsumexp gradient's tie term (eq, where) cancels; softmax is left."""
    args = ("show", f"{FUNCTIONS}:logsumexp", "[1.0, 3.0, 2.0]", "--grad", "z",
            "--stage", "typed")
    assert "where(" in ok(*args)
    fast = ok(*args, "--fastmath")
    assert "where(" not in fast and "= truediv(%exp, %sum)" in fast
    ran = ok("run", f"{FUNCTIONS}:logsumexp", "[0.0, 0.0]", "--grad", "z", "--fastmath")
    assert ran.strip() == "[0.5 0.5]"


def test_show_parsed_text():
    out = ok("show", f"{FUNCTIONS}:poly", "--stage", "parsed")
    assert out.startswith("graph poly(%x, %a) {")
    assert "%y = mul(" in out


@pytest.mark.usefixtures("optimizer_on")
def test_show_typed_stage_is_the_final_graph():
    """The typed stage is what the backend compiles: types shown, the gradient's checks of
    its input and seed gone once types prove them."""
    optimized = ok("show", f"{FUNCTIONS}:f", "--grad", "x", "--stage", "optimized", "2.0", "3.0")
    typed = ok("show", f"{FUNCTIONS}:f", "--grad", "x", "--stage", "typed", "2.0", "3.0")
    assert "grad_check_input" in optimized and "grad_check_input" not in typed
    assert "float" in typed


def test_show_gradient_stages():
    expanded = ok("show", f"{FUNCTIONS}:f", "--grad", "x,y", "--stage", "expanded")
    assert "graph J_f(" in expanded and "graph bprop_f(" in expanded
    source = ok("show", f"{FUNCTIONS}:f", "--grad", "0", "--stage", "source", "2.0", "3.0")
    assert source.startswith("def grad_f(x, y):")


def test_show_dot_with_options():
    dot = ok("show", f"{FUNCTIONS}:f", "--grad", "x", "--stage", "expanded", "--format", "dot",
             "--graph", "J_f", "--no-callees", "--collapse")
    assert dot.startswith("digraph myir {")
    assert 'label="J_f(x, y)"' in dot and "bprop_f(dout)" in dot and "(collapsed)" in dot
    assert "J_mul(" not in dot                         # a callee, left out


@pytest.mark.skipif(viz.renderer() is None, reason="no Graphviz dot or graphviz-pure")
def test_show_svg_to_a_file(tmp_path):
    out = tmp_path / "newton.svg"
    done = myir_cli("show", f"{FUNCTIONS}:newton_sqrt", "--stage", "parsed", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "wrote" in done.stderr
    root = ET.parse(out).getroot()
    assert "newton_sqrt(a)" in {t.text for t in root.iter() if t.tag.endswith("text")}


def test_run_prints_the_result():
    assert ok("run", f"{FUNCTIONS}:f", "2.0", "3.0").strip() == "648.0"
    assert ok("run", f"{FUNCTIONS}:f", "2.0", "3.0", "--grad", "x,y").strip() == \
        "(972.0, 864.0)"
    assert ok("run", f"{FUNCTIONS}:softmax", "[0.0, 0.0]").strip() == "[0.5 0.5]"


def test_run_from_another_directory(tmp_path):
    (tmp_path / "m.py").write_text("def double(x):\n    return 2 * x\n")
    assert ok("run", "m.py:double", "21", cwd=tmp_path).strip() == "42"


def test_run_on_a_tvm_target():
    assert ok("run", f"{FUNCTIONS}:softmax", "[0.0, 0.0]", "--target", "llvm").strip() == \
        "[0.5 0.5]"


def test_bad_target_is_a_clear_error():
    assert "unknown target kind 'tpu'" in fails("run", f"{FUNCTIONS}:f", "2.0", "3.0",
                                                "--target", "tpu")
    error = fails("run", f"{FUNCTIONS}:f", "2.0", "3.0", "--target", "llvm -mcpu=notacpu")
    assert "LLVM knows no CPU 'notacpu'" in error and "x86-64, " in error


@pytest.mark.parametrize("args, message", [
    (("run", "nowhere.py:f", "1.0"), "no such file: nowhere.py"),
    (("run", FUNCTIONS, "1.0"), "expected FILE.py:FUNCTION"),
    (("run", f"{FUNCTIONS}:nope", "1.0"), "has no function 'nope' (functions there: f, "),
    (("run", f"{FUNCTIONS}:f", "two", "3.0"), "argument 'two' is not a Python literal"),
    (("run", f"{FUNCTIONS}:softmax", "[[1.0], [2.0, 3.0]]"),
     "argument '[[1.0], [2.0, 3.0]]' is not an array: its lists must have the same length"),
    (("run", f"{FUNCTIONS}:softmax", "[1.0, None]"),
     "argument '[1.0, None]' is not an array of numbers"),
    (("run", f"{FUNCTIONS}:f", "2.0", "3.0", "--grad", ","), "--grad needs parameter names"),
    (("show", f"{FUNCTIONS}:f", "--stage", "expanded"), "add --grad"),
    (("show", f"{FUNCTIONS}:f", "--stage", "source", "--format", "dot"), "only the text format"),
    (("show", f"{FUNCTIONS}:f", "--format", "dot", "--graph", "nope"), "no graph named 'nope'"),
    (("run", f"{FUNCTIONS}:newton_sqrt", "-1.0"), "functions.py:"),   # raised by the program
    (("run", f"{FUNCTIONS}:f", "2.0", "3.0", "--grad", "z"), "z"),    # a myir error
], ids=["file", "spec", "function", "literal", "ragged", "not-numbers", "grad", "stage", "format", "graph", "raises",
        "myir-error"])
def test_mistakes_are_one_clear_error(args, message):
    assert message in fails(*args)


def test_a_broken_file_says_where(tmp_path):
    (tmp_path / "broken.py").write_text("x = 1\ndef f(:\n")
    done = myir_cli("run", f"{tmp_path}/broken.py:f", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "broken.py:2: SyntaxError" in done.stderr


def test_help_explains_each_flag():
    top = ok("--help")
    assert all(cmd in top for cmd in ("show", "run", "demo"))
    show = ok("show", "--help")
    for flag in ("--grad", "--stage", "--format", "-o", "--graph", "--collapse", "--no-callees"):
        assert flag in show
    assert "backpropagator" in show                    # --stage says what each stage is
    assert "--target" in ok("run", "--help")


@pytest.mark.parametrize("args", [(), ("nonsense",)], ids=["no-command", "unknown-command"])
def test_usage_without_a_command(args):
    done = myir_cli(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert "usage: python -m myir" in done.stderr
