"""The committed numpy coverage page is the one the tables generate (myir/coverage.py)."""

from myir import coverage


def test_committed_page_is_generated():
    assert coverage.PAGE.read_text() == coverage.page(), \
        "docs/numpy.md is out of date: run `python -m myir.coverage`"


def test_page_lists_primitives_and_compositions():
    text = coverage.page()
    assert "| `numpy.exp` | primitive `exp` | rule | lowered |" in text
    assert "| `numpy.var` | composition |" in text
