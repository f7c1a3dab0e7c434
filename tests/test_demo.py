"""`python -m myir demo`: trains the spiral classifier with a compiled step that takes its
gradient inside compiled code, agrees with the hand-written numpy step, and draws the graph."""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from myir import viz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The short run's accuracy on the training set (the README and --help state "over 95%").
SHORT_RUN_ACCURACY = 0.95


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    svg = tmp_path_factory.mktemp("demo") / "step.svg"
    done = subprocess.run([sys.executable, "-m", "myir", "demo", "--short", "--svg", str(svg)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done, svg


def test_demo_exits_zero(demo_run):
    done, _ = demo_run
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_demo_runs_on_tvm_for_the_cpu_by_default(demo_run):
    target = os.environ.get("MYIR_TARGET") or "llvm"
    assert demo_run[0].stdout.splitlines()[0].endswith(
        f"steps of gradient descent, TVM, target {target}")


def test_demo_reaches_the_stated_accuracy(demo_run):
    out = demo_run[0].stdout
    accuracy = float(re.search(r"accuracy ([\d.]+)%", out).group(1)) / 100
    assert accuracy >= SHORT_RUN_ACCURACY
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", out)]
    assert len(losses) >= 3 and losses[-1] < losses[0] / 2     # the progress bar's loss falls


def test_demo_checks_against_numpy_and_times_both(demo_run):
    out = demo_run[0].stdout
    assert "compiled step == hand-written numpy step: True" in out
    m = re.search(r"time per step: myir ([\d.]+) ms, hand-written numpy ([\d.]+) ms", out)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0


@pytest.mark.skipif(viz.renderer() is None, reason="no Graphviz dot or graphviz-pure")
def test_demo_draws_the_training_step(demo_run):
    done, svg = demo_run
    assert f"wrote {svg}" in done.stdout
    texts = {t.text for t in ET.parse(svg).getroot().iter() if t.tag.endswith("text")}
    assert "train_step(params, x, onehot, lr)" in texts


def test_demo_help():
    done = subprocess.run([sys.executable, "-m", "myir", "demo", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for flag in ("--short", "--steps", "--target", "--svg"):
        assert flag in done.stdout
