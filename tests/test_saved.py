"""Saved programs (myir/saved.py): a compiled function's program is saved to the disk cache
and loaded by the next compiled function of the same Python function, for the same argument
types, instead of running the pipeline; and never loaded when anything it was compiled from
has changed.  (Every differential test also runs in the `myir-saved` mode: see
tests/programs_check.py.)"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import myir
from bench import workloads
from bench.workloads import programs as W
from frontend.fingerprint import fingerprint
from myir import saved
from tests.programs_check import assert_same


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MYIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MYIR_PROGRAM_CACHE", "on")
    return tmp_path / "cache"


def program_of(compiled) -> myir.Lowered:
    (lowered,) = compiled._by_signature.values()
    return lowered


def compile_twice(make, args):
    """Results and programs of two compiled functions made by `make()`, called in turn."""
    first, second = make(), make()
    return (first(*args), program_of(first)), (second(*args), program_of(second))


CASES = [
    ("logreg", "grad", "tvm"),
    ("blackscholes", "grad", "tvm"),
    ("mlp", "forward", "tvm"),
    ("tree_recursion", "grad", "python"),
    ("newton_sqrt", "grad", "python"),
    ("lstm", "grad", "python"),
]


@pytest.mark.parametrize("workload, mode, backend", CASES)
@pytest.mark.usefixtures("optimizer_on")  # the tvm cases need regions: the optimizer's work
def test_the_second_compiled_function_loads_the_program(cache_dir, workload, mode, backend):
    f = workloads.function(workload)
    args = workloads.make_inputs(workload, 0)

    def make():
        if mode == "grad":
            return myir.grad(f, *workloads.WRT[workload], backend=backend)
        return myir.compile(f, backend=backend)

    before = dict(saved.STATS)
    (r1, p1), (r2, p2) = compile_twice(make, args)
    assert not p1.from_disk and p2.from_disk
    assert saved.STATS["saved"] == before["saved"] + 1
    assert saved.STATS["loaded"] == before["loaded"] + 1
    assert_same(r2, r1)     # the same code: the same bits
    assert p2.source == p1.source
    assert [r.program for r in p2.regions] == [r.program for r in p1.regions]
    assert (backend == "tvm") == bool(p2.regions)
    assert set(p2.timings) == {"load"}


def test_lower_of_a_loaded_program_shows_the_stages(cache_dir):
    compile_twice(lambda: myir.compile(W.logsumexp), workloads.make_inputs("logsumexp", 0))
    again = myir.compile(W.logsumexp)
    again(*workloads.make_inputs("logsumexp", 0))
    assert program_of(again).from_disk
    lowered = again.lower(*workloads.make_inputs("logsumexp", 0))
    assert not lowered.from_disk and "typed" in lowered.stages and lowered.regions


def test_nothing_is_saved_when_saved_programs_are_off(cache_dir, monkeypatch):
    monkeypatch.setenv("MYIR_PROGRAM_CACHE", "off")
    (_, p1), (_, p2) = compile_twice(lambda: myir.compile(W.sincos), (0.5,))
    assert not p1.from_disk and not p2.from_disk
    assert not list(cache_dir.glob("program-*")) if cache_dir.exists() else True


def test_a_program_that_cannot_be_pickled_runs_but_is_not_saved(cache_dir):
    class Local(Exception):     # a class pickle cannot name
        pass

    def f(x):
        if x < 0:
            raise Local("negative")
        return x * 2.0

    before = saved.STATS["not_saved"]
    (r1, p1), (r2, p2) = compile_twice(lambda: myir.compile(f, backend="python"), (1.5,))
    assert r1 == r2 == 3.0 and not p2.from_disk
    assert saved.STATS["not_saved"] == before + 2
    with pytest.raises(Local, match="negative"):
        myir.compile(f, backend="python")(-1.0)


def test_a_program_file_not_signed_by_this_user_is_ignored(cache_dir):
    (_, p1), _ = compile_twice(lambda: myir.compile(W.sincos, backend="python"), (0.5,))
    (program,) = [p for p in cache_dir.glob("program-*") if p.suffix != ".sig"]
    program.write_bytes(b"\x80\x04 not what we wrote")
    fresh = myir.compile(W.sincos, backend="python")
    assert fresh(0.5) == W.sincos(0.5)
    assert not program_of(fresh).from_disk
    again = myir.compile(W.sincos, backend="python")    # the good program was saved again
    assert again(0.5) == W.sincos(0.5) and program_of(again).from_disk


def program_files(cache_dir, fn) -> tuple:
    """The paths of `fn`'s saved program (compiled for one float) and of its signature."""
    name = saved.key(fn, (), "python", {}, (float,))
    return cache_dir / name, cache_dir / f"{name}.sig"


def test_a_program_copied_under_another_functions_name_is_not_loaded(cache_dir):
    """A file's name is its key: one function's program and signature copied over another's
    pair must not verify, or the second function would run the first one's code."""
    def double(x):
        return x * 2.0

    def cube(x):
        return x * x * x

    for f in (double, cube):
        assert myir.compile(f, backend="python")(3.0) == f(3.0)
    for source, target in zip(program_files(cache_dir, double), program_files(cache_dir, cube)):
        target.write_bytes(source.read_bytes())
    fresh = myir.compile(cube, backend="python")
    assert fresh(3.0) == cube(3.0) == 27.0
    assert not program_of(fresh).from_disk
    again = myir.compile(cube, backend="python")     # its own program was saved again
    assert again(3.0) == 27.0 and program_of(again).from_disk


# -------------------------------------------------------------------------------------------
# What a key covers: a change to anything the parser reads gives another key


def module_from(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


HELPERS = """
    import numpy as np

    SCALE = 2.0
    WEIGHTS = np.array([1.0, 2.0])

    def helper(x, k=3):
        return x * SCALE + k

    def f(x):
        return helper(x) + np.sum(WEIGHTS)
"""


def test_a_changed_global_constant_is_compiled_again(cache_dir, tmp_path):
    m = module_from(tmp_path, "saved_constant", HELPERS)
    (r1, _), (r2, p2) = compile_twice(lambda: myir.compile(m.f, backend="python"), (1.0,))
    assert r1 == r2 == 8.0 and p2.from_disk
    m.SCALE = 10.0
    fresh = myir.compile(m.f, backend="python")
    assert fresh(1.0) == m.f(1.0) == 16.0 and not program_of(fresh).from_disk


@pytest.mark.parametrize("change", [
    "global constant", "array contents", "default", "helper rebound", "source text",
])
def test_the_fingerprint_follows_what_the_parser_reads(tmp_path, change):
    m = module_from(tmp_path, f"saved_{change.replace(' ', '_')}", HELPERS)
    before = fingerprint(m.f)
    assert fingerprint(m.f) == before
    if change == "global constant":
        m.SCALE = 2.5
    elif change == "array contents":
        m.WEIGHTS[1] = 3.0      # in place: the same object, other numbers
    elif change == "default":
        m.helper.__defaults__ = (4,)
    elif change == "helper rebound":
        m.helper = lambda x, k=3: x
    else:   # an edit to the file, not yet re-imported: the parser reads the new text
        path = tmp_path / f"{m.__name__}.py"
        path.write_text(path.read_text().replace("x * SCALE + k", "x * SCALE - k"))
        os.utime(path, ns=(1, 1))
    assert fingerprint(m.f) != before


def test_the_fingerprint_tells_apart_lambdas_on_one_line(tmp_path):
    """Same file, same line, same bytecode (only a constant differs): other keys."""
    m = module_from(tmp_path, "saved_lambdas", """
        fs = (lambda x: x + 1.0, lambda x: x + 2.0, lambda x: (lambda y: y + 3.0)(x))
    """)
    assert len({fingerprint(f) for f in m.fs}) == 3
    assert fingerprint(m.fs[0]) == fingerprint(m.fs[0])


def test_lambdas_on_one_line_are_saved_apart(cache_dir, tmp_path):
    m = module_from(tmp_path, "saved_lambdas_run", """
        fs = (lambda x: x + 1.0, lambda x: x + 2.0)
    """)
    for f, want in zip(m.fs, (3.0, 4.0)):
        (r1, _), (r2, p2) = compile_twice(lambda: myir.compile(f, backend="python"), (2.0,))
        assert r1 == r2 == want and p2.from_disk


def test_the_fingerprint_follows_closures_and_other_modules(tmp_path):
    other = module_from(tmp_path, "saved_other", """
        def g(x):
            return x + 1.0
    """)
    m = module_from(tmp_path, "saved_user", """
        import saved_other

        def make(c):
            def f(x):
                return saved_other.g(x) * c
            return f
    """)
    two, three = m.make(2.0), m.make(3.0)
    assert fingerprint(two) != fingerprint(three)
    assert fingerprint(two) == fingerprint(m.make(2.0))
    before = fingerprint(two)
    other.g = lambda x: x
    assert fingerprint(two) != before


def test_the_key_covers_transforms_backend_options_and_signature(cache_dir):
    def key(transforms=(), backend="python", options=None, signature=(float,)):
        return saved.key(W.sincos, transforms, backend, options or {}, signature)

    grad_x = myir.grad(W.sincos).__myir_transforms__
    keys = [key(), key(transforms=grad_x), key(backend="tvm"),
            key(options={"optimize": False}), key(signature=(int,))]
    assert len(set(keys)) == len(keys)


# -------------------------------------------------------------------------------------------
# A second process


SECOND_PROCESS = """
import json, sys
sys.path.insert(0, %r)
import numpy as np
import myir
from bench.workloads import programs as W
f = myir.grad(W.mlp, *W.WRT["mlp"])
result = f(*W.make_inputs("mlp", 0))
(program,) = f._by_signature.values()
print(json.dumps({"from_disk": program.from_disk, "regions": len(program.regions),
                  "result": [np.asarray(r).tolist() for r in result]}))
"""


def test_a_second_process_loads_the_program_and_its_regions(tmp_path):
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MYIR_PROGRAM_CACHE")
    script = SECOND_PROCESS % os.getcwd()
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    assert [r["from_disk"] for r in runs] == [False, True]
    assert runs[0]["regions"] == runs[1]["regions"] > 0
    assert runs[0]["result"] == runs[1]["result"]
    mode = os.stat(tmp_path / "cache").st_mode & 0o777
    assert mode == 0o700


def test_the_cli_shows_and_clears_the_cache(cache_dir, capsys):
    from myir.cli import main

    myir.compile(W.logsumexp)(*workloads.make_inputs("logsumexp", 0))
    assert main(["cache"]) == 0
    shown = capsys.readouterr().out
    assert str(cache_dir) in shown and "programs: 1 " in shown and "regions: " in shown
    assert main(["cache", "--clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert main(["cache"]) == 0
    assert "programs: 0 " in capsys.readouterr().out


@pytest.mark.parametrize("unusable", ["under a file", "writable by others"])
def test_an_unusable_cache_directory_is_not_used_and_said_once(tmp_path, monkeypatch, capsys,
                                                                unusable):
    from myir.cli import main

    if unusable == "under a file":
        (tmp_path / "file").write_text("")
        where = tmp_path / "file" / "cache"
    else:
        where = tmp_path / "shared"
        where.mkdir()
        where.chmod(0o777)
    monkeypatch.setenv("MYIR_CACHE_DIR", str(where))
    monkeypatch.setenv("MYIR_PROGRAM_CACHE", "on")
    with pytest.warns(RuntimeWarning, match=f"the disk cache at {where} cannot be used") as seen:
        (r1, p1), (r2, p2) = compile_twice(lambda: myir.compile(W.sincos, backend="python"),
                                           (0.5,))
    assert r1 == r2 == W.sincos(0.5) and not p1.from_disk and not p2.from_disk
    assert len([w for w in seen if "disk cache" in str(w.message)]) == 1
    assert main(["cache"]) == 1
    error = capsys.readouterr().err
    assert f"the disk cache at {where} cannot be used: " in error
    assert ("Not a directory" if unusable == "under a file" else "writable by others") in error


def test_the_cache_keeps_under_its_limit_dropping_the_least_recently_used(tmp_path, monkeypatch):
    from myir.cache import DiskCache

    monkeypatch.setenv("MYIR_CACHE_LIMIT_MB", "1")
    disk = DiskCache(tmp_path / "c")
    block = b"x" * (300 << 10)
    for name in ("a", "b", "c"):
        disk.write(name, block)
        os.utime(disk.path(name), ns=(0, {"a": 1, "b": 2, "c": 3}[name] * 10**9))
    assert disk.read("a") == block          # a is used now: b is the oldest
    disk.write("d", block)                  # 1.2 MiB > 1 MiB: trimmed to <= 0.75 MiB
    assert [n for n in "abcd" if disk.read(n) is not None] == ["a", "d"]
    assert (tmp_path / "c" / "secret").exists()
