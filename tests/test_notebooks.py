"""The notebooks in notebooks/ run from top to bottom without an error, and are committed
with their outputs (so they read well on a page that does not run them)."""

import os

import pytest

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[notebooks]'")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[notebooks]'")
pytest.importorskip("ipykernel", reason="pip install -e '.[notebooks]'")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(ROOT, "notebooks")
PATHS = sorted(f for f in os.listdir(NOTEBOOKS) if f.endswith(".ipynb"))


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def outputs_text(nb) -> str:
    """What the cells printed and showed.  A cell's stdout is one text: a progress line on
    stderr (a compile past 2 s on a busy machine) splits it into several outputs."""
    parts = []
    for cell in code_cells(nb):
        stdout = "".join(out.get("text", "") for out in cell.outputs
                         if out.output_type == "stream" and out.get("name") == "stdout")
        parts.append(stdout)
        for out in cell.outputs:
            if not (out.output_type == "stream" and out.get("name") == "stdout"):
                parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.parametrize("name", PATHS)
def test_committed_with_outputs(name):
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    cells = code_cells(nb)
    assert cells and all(c.execution_count is not None for c in cells)
    assert not any(out.output_type == "error" for c in cells for out in c.outputs)


# What each notebook must show when run (besides running without an error).
EXPECTED = {
    "01-tour.ipynb": ["graph poly(%x, %a) {", "def poly(x, a):"],
    "02-control-flow-and-closures.ipynb": ["    while abs(x * x - a) > 1e-12 * a:", "3628800 == 3628800"],
    "03-gradients.ipynb": ["972.0 == 972.0", "def grad_f(x, y):", "1296.0 == 1296.0",
                           "d sqrt(a)/da = 0.353553390593   1/(2 sqrt(a)) = 0.353553390593",
                           "%truediv = truediv(%exp, %sum) : f64[4]\n  return %truediv"],
    "04-tvm-targets.ipynb": ["def mlp(x, W1, b1, W2, b2, onehot):", "region1:", "R.dataflow()",
                             "<8 x float>", "__global__", "no such device", "numpy/tvm"],
    "05-models.ipynb": ["dict ['layer0', 'layer1'] Layer", "return {'layer0': ",
                        "Layer (16, 1)", "params = params.copy()",
                        "KeyError: 'layer2' is not a key of `params`"],
    "06-forward-and-mixed-mode.ipynb": ["max |H - (diag(p) - p pᵀ)|", "['__tvm_ffi_vectorized']",
                                        "T.Select", "__global__", "no such device",
                                        "mixed mode (vectorize)"],
}


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.usefixtures("optimizer_on")  # the notebooks show the optimizer's work
def test_notebook_runs(name, monkeypatch):
    # the kernel imports this checkout's myir even where it is not pip-installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    # a cell past 300 s is a hang, not a slow machine: speed is bench/'s to measure
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": NOTEBOOKS}}).execute()
    text = outputs_text(nb)
    for expected in EXPECTED[name]:
        assert expected in text
