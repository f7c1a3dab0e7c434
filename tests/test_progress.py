"""The progress line of long compiles (myir/progress.py): after a threshold (2 s; lowered
here) it names the stage running, on the command line and where MYIR_PROGRESS=1; a fast
compile and a plain library call show nothing."""

from __future__ import annotations

import io
import time

import pytest

import myir
from myir import cli, pipeline, progress
from tests.programs_grad import poly_xy


@pytest.fixture
def slow_infer(monkeypatch):
    """Type inference that takes 0.3 s: a long compile."""
    infer = pipeline.infer

    def slow(*args):
        time.sleep(0.3)
        return infer(*args)

    monkeypatch.setattr(pipeline, "infer", slow)


def _compile_with(report):
    return pipeline.run_pipeline(poly_xy, (1.5, 0.5), "python", {}, report=report)


@pytest.mark.usefixtures("slow_infer")
def test_a_long_compile_names_its_stage():
    out = io.StringIO()
    lowered = _compile_with(progress.Progress("poly_xy", stream=out, after=0.1, in_place=False))
    assert lowered.entry(1.5, 0.5) == poly_xy(1.5, 0.5)
    lines = out.getvalue().splitlines()
    assert lines and lines[0].startswith("myir: compiling poly_xy: infer (")
    assert [line.split(": ")[2].split(" (")[0] for line in lines][-1] == "codegen"


@pytest.mark.usefixtures("slow_infer")
def test_on_a_terminal_the_line_is_rewritten_and_cleared_at_the_end():
    out = io.StringIO()
    _compile_with(progress.Progress("poly_xy", stream=out, after=0.1, in_place=True))
    text = out.getvalue()
    assert "\n" not in text and text.startswith("\rmyir: compiling poly_xy: infer (")
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""


def test_a_fast_compile_shows_nothing():
    out = io.StringIO()
    _compile_with(progress.Progress("poly_xy", stream=out, after=30.0, in_place=False))
    assert out.getvalue() == ""


def test_where_it_is_on(monkeypatch):
    monkeypatch.delenv("MYIR_PROGRESS", raising=False)
    assert isinstance(progress.for_compile("f"), progress.Silent)   # a library call
    with progress.shown():
        assert isinstance(progress.for_compile("f"), progress.Progress)
        monkeypatch.setenv("MYIR_PROGRESS", "0")
        assert isinstance(progress.for_compile("f"), progress.Silent)
    monkeypatch.setenv("MYIR_PROGRESS", "1")
    assert isinstance(progress.for_compile("f"), progress.Progress)


@pytest.mark.usefixtures("slow_infer")
def test_the_command_line_shows_the_stage_of_a_long_compile(monkeypatch, capsys):
    monkeypatch.delenv("MYIR_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "AFTER_S", 0.1)
    path = poly_xy.__code__.co_filename
    assert cli.main(["run", f"{path}:poly_xy", "1.5", "0.5", "--grad", "x"]) == 0
    out, err = capsys.readouterr()
    assert float(out) == pytest.approx(myir.grad(poly_xy)(1.5, 0.5))
    assert "myir: compiling grad(poly_xy): infer (" in err
