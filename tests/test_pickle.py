"""Compiled functions travel: `pickle` and `cloudpickle` carry a compiled function (its Python
function, transforms, backend, options, the source it is read from and the programs compiled
so far) to another process, which runs the shipped programs without compiling and compiles
new signatures from the shipped source; the programs never enter that process's signed disk
cache.  And the disk cache's key of myir's own code is its contents: a copy of the package
elsewhere loads what the first one saved."""

import concurrent.futures
import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import cloudpickle
import numpy as np
import pytest

import myir
from myir.demo import init_params, loss, spirals
from tests.programs_check import assert_same

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def demo_batch(n=40, hidden=8):
    rng = np.random.default_rng(0)
    x, labels = spirals(n, 1.0, 0.04, rng)
    return init_params(hidden, rng), x, np.eye(2)[labels]


def cube_plus(x, y):
    return x * x * x + np.sin(y) * x


def cubes(x):
    return np.sum(x * x * x) + x[0] * x[1]


MAKERS = {
    "compile": lambda: myir.compile(loss),
    "grad": lambda: myir.grad(loss),
    "value_and_grad": lambda: myir.value_and_grad(loss),
    "grad of two, python": lambda: myir.grad(cube_plus, 0, 1, backend="python"),
    "jacrev, python": lambda: myir.jacrev(cubes, backend="python"),
    "hessian, python": lambda: myir.hessian(cubes, backend="python"),
    "vectorize, python": lambda: myir.vectorize(cube_plus, backend="python"),
}


def args_for(name):
    if name.startswith(("jac", "hessian")):
        return (np.array([0.5, -1.0, 2.0]),)
    if name.startswith("vectorize"):
        return np.linspace(0, 1, 4), np.linspace(-1, 1, 4)
    return (1.5, 0.25) if "two" in name else demo_batch()


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
@pytest.mark.parametrize("called", [False, True], ids=["fresh", "called"])
@pytest.mark.parametrize("name", MAKERS)
def test_a_compiled_function_round_trips(name, called, dumps):
    f, args = MAKERS[name](), args_for(name)
    expected = f(*args) if called else MAKERS[name]()(*args)
    g = pickle.loads(dumps(f))
    assert type(g).__mro__[-2] is myir.CompiledFunction
    assert (g.fn, g.backend, g.options) == (f.fn, f.backend, f.options)
    assert repr(g.__myir_transforms__) == repr(f.__myir_transforms__)
    assert len(g._by_signature) == int(called)
    if called:   # the shipped program, not a recompiled one
        (program,) = g._by_signature.values()
        assert set(program.timings) == {"load"}
    assert_same(g(*args), expected)
    assert_same(pickle.loads(dumps(g))(*args), expected)     # and again, once called


def grads_of(seed):
    params, x, onehot = demo_batch()
    params = tuple(p + 0.01 * seed for p in params)
    return params, x, onehot


def test_a_process_pool_maps_a_compiled_gradient_in_order():
    g = myir.grad(loss)
    inputs = [grads_of(seed) for seed in range(6)]
    serial = [g(*a) for a in inputs]
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        try:
            parallel = list(pool.map(g, *zip(*inputs), timeout=120))
        except concurrent.futures.TimeoutError:     # a hung worker: end it, and fail
            for child in multiprocessing.active_children():
                child.terminate()
            raise
    assert len(parallel) == len(serial)
    for p, s in zip(parallel, serial):
        assert_same(p, s)


USER_MODULE = '''
import numpy as np

def energy(w, x):
    return np.sum(np.tanh(x @ w) ** 2)
'''

FRESH_PROCESS = r'''
import json, os, pickle, sys
import numpy as np
sys.path.insert(0, %r)
with open(sys.argv[1], "rb") as f:
    g = pickle.load(f)
from backends.tvm.region import STATS as regions
from myir import saved
w, x = np.linspace(-1, 1, 6).reshape(3, 2), np.linspace(0, 1, 12).reshape(4, 3)
shipped = g(w, x)
(program,) = g._by_signature.values()
timings = sorted(program.timings)
other = g(w[:2], x[:, :2])      # a new signature: compiled here, from the shipped source
cache = os.environ["MYIR_CACHE_DIR"]
print(json.dumps({"shipped": shipped.tolist(), "timings": timings,
                  "regions": dict(regions), "saved": dict(saved.STATS),
                  "other": other.tolist(), "signatures": len(g._by_signature),
                  "programs": sorted(n for n in os.listdir(cache) if n.startswith("program-") and not n.endswith(".sig"))
                              if os.path.isdir(cache) else []}))
'''


@pytest.mark.usefixtures("optimizer_on")    # a TVM region to ship: the optimizer's work
def test_a_fresh_process_with_an_empty_cache_runs_the_shipped_program_without_compiling(
        tmp_path):
    """The function's file is gone on the receiving side (cloudpickle copies the function,
    the pickle carries its source): the shipped signature loads, a new one compiles."""
    module_dir = tmp_path / "user"
    module_dir.mkdir()
    (module_dir / "user_energy.py").write_text(USER_MODULE)
    sys.path.insert(0, str(module_dir))
    try:
        import user_energy

        cloudpickle.register_pickle_by_value(user_energy)
        g = myir.grad(user_energy.energy)
        w, x = np.linspace(-1, 1, 6).reshape(3, 2), np.linspace(0, 1, 12).reshape(4, 3)
        expected, other = g(w, x), g(w[:2], x[:, :2])
        g = myir.grad(user_energy.energy)
        g(w, x)
        assert g._by_signature[next(iter(g._by_signature))].regions
        (tmp_path / "g.pkl").write_bytes(cloudpickle.dumps(g))
        cloudpickle.unregister_pickle_by_value(user_energy)
    finally:
        sys.path.remove(str(module_dir))
        sys.modules.pop("user_energy", None)
    shutil.rmtree(module_dir)
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "empty-cache"),
           "MYIR_PROGRAM_CACHE": "on"}
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS % ROOT, str(tmp_path / "g.pkl")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout.splitlines()[-1])
    assert run["shipped"] == expected.tolist()
    assert run["timings"] == ["load"]
    assert run["regions"]["shipped"] >= 1
    assert run["other"] == other.tolist() and run["signatures"] == 2
    # only the program this process compiled itself is in its cache, not the shipped one
    assert run["saved"]["saved"] == 1 and len(run["programs"]) == 1


def test_programs_from_another_myir_are_not_used(monkeypatch):
    from myir import saved

    f = myir.grad(cube_plus, 0, 1, backend="python")
    f(1.5, 0.25)
    data = pickle.dumps(f)
    monkeypatch.setattr(saved, "runtime", lambda: "another myir")
    g = pickle.loads(data)
    assert not g._by_signature
    assert_same(g(1.5, 0.25), f(1.5, 0.25))


SAVE_OR_LOAD = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import myir
from myir import saved
import user_square
assert myir.__file__.startswith(sys.argv[1]), myir.__file__
print(myir.grad(user_square.square, backend="python")(3.0))
print(json.dumps(saved.STATS))
'''


def test_two_copies_of_myir_share_saved_programs(tmp_path):
    """The key of myir's own code is its contents: a copy made later (other paths, other
    times) loads the program the first copy saved."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "user_square.py").write_text("def square(x):\n    return x * x * x\n")
    copies = []
    for name in ("one", "two"):
        copy = tmp_path / name
        for package in ("myir", "frontend", "passes", "backends"):
            shutil.copytree(os.path.join(ROOT, package), copy / package,
                            ignore=shutil.ignore_patterns("__pycache__"), copy_function=shutil.copy)
        copies.append(copy)
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache"), "MYIR_PROGRAM_CACHE": "on",
           "PYTHONPATH": str(user)}
    stats = []
    for copy in copies:
        out = subprocess.run([sys.executable, "-c", SAVE_OR_LOAD, str(copy)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        result, counts = out.stdout.splitlines()[-2:]
        assert float(result) == 27.0
        stats.append(json.loads(counts))
    assert (stats[0]["saved"], stats[0]["loaded"]) == (1, 0)
    assert (stats[1]["saved"], stats[1]["loaded"]) == (0, 1)
