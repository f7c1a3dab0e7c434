"""The TVM backend's parts, tested without the rest of the pipeline: every lowering rule
against the python backend's implementation, argument conversion (misaligned and
non-contiguous arrays, scalars), the in-memory and on-disk caches, target selection, and
CUDA code generation (which needs no GPU).  End-to-end tests of compiled programs on the tvm
backend are the differential tests run with MYIR_TEST_BACKENDS=tvm (see programs_check.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from backends.python.impls import IMPLS, SYNTAX, callable_of  # noqa: E402
from backends.tvm import cache, region, schedule  # noqa: E402
from backends.tvm.lowering import KEPT_IN_NUMPY, KEPT_ON_CPU, LOWERINGS  # noqa: E402
from backends.tvm import program as program_module  # noqa: E402
from backends.tvm.program import Op, Program, Ref, Spec, evaluate, parts  # noqa: E402
from backends.tvm.region import Region, compile_program  # noqa: E402
from backends.tvm.regions import LONE_OP_MIN_ELEMENTS  # noqa: E402
from backends.tvm.target import resolve  # noqa: E402
from myir.cache import DiskCache  # noqa: E402
from myir.errors import MyirError  # noqa: E402
from tests.programs_check import module_from_source  # noqa: E402

CPU = resolve("llvm")
rng = np.random.default_rng(0)


def spec(value) -> Spec:
    if isinstance(value, np.ndarray):
        return Spec(value.dtype, value.shape)
    return Spec(np.dtype(type(value)), (), type(value))


def run_one(prim, args, static=()):
    """Apply `prim` to `args` through a one-op region; args at `static` positions are
    compile-time constants, the others region inputs.  Returns (TVM result, numpy result)."""
    want = callable_of(prim)(*args)
    inputs, refs, values = [], [], []
    for i, a in enumerate(args):
        if i in static or i in LOWERINGS[prim].static:
            refs.append(Ref("const", value=a))
        elif i in LOWERINGS[prim].shape_only:
            refs.append(Ref("shape", value=spec(a)))
        else:
            refs.append(Ref("in", len(inputs)))
            inputs.append(spec(a))
            values.append(a)
    program = Program(tuple(inputs), (Op(prim, tuple(refs), spec(want)),), (0,))
    got = Region(f"r_{prim}", program, CPU)(*values)
    return got, want


def assert_close(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if np.asarray(want).dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


F = rng.uniform(0.1, 0.9, (4, 8))          # inside every function's domain
F32 = F.astype(np.float32)
I = rng.integers(-5, 5, (4, 8))
V = rng.uniform(0.1, 0.9, 8)

CASES = {
    **{p: [(F, F), (F32, 2.0), (I, F), (F32, V)] for p in ("add", "sub", "mul", "gadd")},
    "truediv": [(F, F + 1), (I, I * 0 + 3), (F32, 3)],
    # numpy's arithmetic ufuncs (np.add, ...): on arrays, what the operators do
    **{p: [(F, F), (F32, 2.0), (I, F), (F32, V)] for p in ("np_subtract", "np_multiply")},
    "np_add": [(F, F), (F32, 2.0), (I, F)],
    "np_divide": [(F, F + 1), (I, I * 0 + 3), (F32, 3)],
    "pow": [(F, 2), (F32, 0.5)], "power": [(F, F)], "arctan2": [(F, V)],
    # the gradient rules' division and power: on arrays, numpy's (inf where x / 0)
    "ieee_truediv": [(F, F + 1), (F32, np.where(F32 > 0.5, F32, 0))],
    "ieee_pow": [(F, -0.5), (np.where(F32 > 0.5, F32, 0), -0.5)],
    # the rules' strong zero: 0 where the sensitivity is, even over inf and nan
    "strong_zero": [(np.where(F > 0.5, F, 0), np.where(F > 0.3, np.nan, np.inf)),
                    (np.where(F32 > 0.5, F32, 0), np.full_like(F32, np.inf)),
                    (np.where(V > 0.5, V, 0), F)],
    **{p: [(F,), (F32,)] for p in ("exp log sqrt sin cos tan arcsin arccos arctan "
                                   "tanh floor ceil log1p reciprocal sign").split()},
    # numpy's ufuncs beyond the basics: float32, ints and broadcasting here; float64 in
    # test_numpy_ufuncs_accuracy
    **{p: [(F32,)] for p in "log2 log10 exp2 arcsinh arctanh cbrt".split()},
    "arccosh": [(F32 + 1,)], "rint": [(I,)], "trunc": [(F32 * 9 - 4,)],
    "hypot": [(I, V)], "logaddexp": [(F32, 0.5)], "logaddexp2": [(F, V)],
    **{p: [(F,), (I,)] for p in ("neg", "negative", "abs", "builtin_abs", "square", "pos")},
    **{p: [(F, V), (I, 0), (F32, 0.5)] for p in ("lt", "le", "gt", "ge", "eq", "ne")},
    "maximum": [(F, 0.5), (I, I[::-1])], "minimum": [(F, V), (F32, 0.5)],
    "where": [(F > 0.5, F, 0.0), (I, F32, F32 * 2)],
    "clip": [(F, 0.2, 0.7), (I, -1, 2)],
    **{p: [(F, None, False), (F, 1, True), (F32, (0, 1), False), (I, 0, False)]
       for p in ("sum", "mean", "prod", "max", "min")},
    "reshape": [(F, (8, 4)), (F, (-1,))], "transpose": [(F, None), (F[None], (1, 0, 2))],
    "swapaxes": [(F, 0, 1)], "expand_dims": [(F, 1)], "squeeze": [(F[None], 0)],
    "broadcast_to": [(V, (4, 8))], "astype": [(F, np.float32), (I, np.float64)],
    "getitem": [(F, 1), (F, (slice(1, 3), slice(None, None, 2))), (F, (Ellipsis, 2)),
                (F, (None, 1))],
    "grad_zeros": [(F,)], "zeros_like": [(F, None)], "ones_like": [(I, None)],
    "sum_to_like": [(F, V), (F, F[:1]), (F, F)], "broadcast_to_like": [(V, F)],
    "reduce_grad": [(V[:4], F, 1, False), (F[:, :1], F, 1, True)],
    "getitem_grad": [(F, (slice(1, 3), 2), F[1:3, 2]), (F, slice(None, None, 3), F[::3])],
    "grad_seed": [(np.ones(()),)], "grad_check_input": [(F, "x")],
    "matmul": [(F, V)], "dot": [(F, V)],
}


def test_every_lowering_has_cases():
    assert sorted(CASES) == sorted(LOWERINGS)


@pytest.mark.parametrize("prim", sorted(CASES))
def test_lowering_matches_numpy(prim):
    for args in CASES[prim]:
        if LOWERINGS[prim].gpu_only:
            assert prim in KEPT_ON_CPU   # matmul: BLAS is faster on the CPU (lowering.py)
            continue
        got, want = run_one(prim, args)
        assert_close(got, want)


def test_kept_in_numpy_primitives_have_python_impls():
    for name in KEPT_IN_NUMPY:
        assert name in IMPLS or name in SYNTAX or callable_of(name)


def test_nan_propagates_like_numpy():
    x = F.copy()
    x[1, 3] = np.nan
    for prim, args in (("max", (x, None, False)), ("min", (x, 1, False)),
                       ("maximum", (x, 0.5)), ("minimum", (0.5, x)), ("clip", (x, 0.2, 0.3))):
        got, want = run_one(prim, args)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def elementwise_region(n=1 << 12, dtype="float64", unary="exp"):
    a = Spec(np.dtype(dtype), (n,))
    return Program((a, a, Spec(np.dtype("float64"), (), float)), (
        Op("mul", (Ref("in", 0), Ref("in", 1)), a),
        Op("add", (Ref("op", 0), Ref("in", 2)), a),
        Op(unary, (Ref("op", 1),), a),
        Op("sum", (Ref("op", 2), Ref("const", value=None), Ref("const", value=False)),
           Spec(np.dtype(dtype), (), np.dtype(dtype).type)),
    ), (2, 3))


def reference(x, y, s):
    e = np.exp(x * y + s)
    return e, np.sum(e)


def test_multiple_outputs_and_scalar_result_types():
    r = Region("r", elementwise_region(), CPU)
    x, y = rng.random(1 << 12), rng.random(1 << 12)
    e, total = r(x, y, 0.25)
    want_e, want_total = reference(x, y, 0.25)
    assert type(total) is np.float64
    np.testing.assert_allclose(e, want_e, rtol=1e-14)
    np.testing.assert_allclose(total, want_total, rtol=1e-12)


def test_misaligned_and_noncontiguous_inputs_are_copied_not_crashed():
    # Kernels for AVX2 assume 64-byte alignment and segfault on anything less; the region
    # must copy such arrays (a segfault would kill this test process).
    r = Region("r", elementwise_region(), CPU)
    n = 1 << 12
    raw = np.empty(n + 1)
    misaligned = raw[1:]                  # 8 bytes past numpy's (16-byte aligned) buffer
    misaligned[:] = rng.random(n)
    strided = np.repeat(rng.random(n), 2)[::2]
    assert not strided.flags.c_contiguous
    for x in (misaligned, strided, np.asfortranarray(rng.random(n))):
        e, total = r(x, x, 1.0)
        np.testing.assert_allclose(e, reference(x, x, 1.0)[0], rtol=1e-14)


def test_results_are_fresh_arrays():
    r = Region("r", elementwise_region(), CPU)
    x = rng.random(1 << 12)
    first, _ = r(x, x, 0.0)
    kept = first.copy()
    r(x * 2, x, 0.0)
    np.testing.assert_array_equal(first, kept)


def test_a_region_in_parts_gives_the_whole_programs_values(monkeypatch):
    """A large region is one Relax function per part (program.parts: TVM's compile then
    stays linear in the region's size).  Here parts of 3 ops: values flow from each part to
    later ones (not only the next), every part reads the region's inputs (misaligned here:
    kernels in every part take them unaligned), and a value leaving the region comes from
    the first part.  Each distinct operation is legalized once (region._Legalized), and its
    TIR function called wherever it recurs."""
    monkeypatch.setattr(program_module, "PART_OPS", 3)
    monkeypatch.setattr(region, "LEGALIZE_ONCE_MIN", 1)
    a = Spec(np.dtype("float64"), (256,))
    ops = [Op("mul", (Ref("in", 0), Ref("in", 1)), a), Op("add", (Ref("op", 0), Ref("in", 2)), a)]
    for k in range(2, 10):      # each reads the two values before it, and an input
        prim = ("cos", "mul", "sub")[k % 3]
        args = (Ref("op", k - 1),) if prim == "cos" else (Ref("op", k - 1), Ref("op", k - 2))
        ops.append(Op(prim, args, a) if prim != "sub" else
                   Op("sub", (Ref("op", k - 1), Ref("in", k % 2)), a))
    ops.append(Op("sum", (Ref("op", 9), Ref("const", value=None), Ref("const", value=False)),
                  Spec(np.dtype("float64"), (), np.float64)))
    program = Program((a, a, Spec(np.dtype("float64"), (), float)), tuple(ops), (1, 10))
    assert len(parts(program)) == 4
    x, y = (np.empty(257)[1:] for _ in range(2))    # 8 bytes past numpy's alignment
    x[:], y[:] = rng.random(256), rng.random(256)
    got = Region("parts", program, CPU)(x, y, 0.5)
    want = evaluate(program, x, y, 0.5)
    assert type(got[1]) is np.float64
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_operations_legalized_once_keep_fast_math_in_float32(monkeypatch):
    """An operation legalized alone (region._Legalized) goes through the passes before
    LegalizeOps too: float32 tanh is then TVM's fast tanh, where its default float32 tanh
    gives tanh(1e-8) = 0."""
    monkeypatch.setattr(region, "LEGALIZE_ONCE_MIN", 1)
    a = Spec(np.dtype("float32"), (64,))
    program = Program((a,), (Op("tanh", (Ref("in", 0),), a),
                             Op("mul", (Ref("op", 0), Ref("const", value=2.0)), a)), (1,))
    x = np.full(64, 1e-8, np.float32)
    np.testing.assert_allclose(Region("fast", program, CPU)(x), 2 * x, rtol=1e-6)


def test_memory_cache_hits_for_the_same_program_and_misses_for_new_shapes():
    before = dict(region.STATS)
    a = compile_program(elementwise_region(1 << 10), CPU)
    b = compile_program(elementwise_region(1 << 10), CPU)
    c = compile_program(elementwise_region(1 << 11), CPU)
    assert a is b and c is not a
    assert region.STATS["memory_hits"] >= before["memory_hits"] + 1


def test_a_second_process_loads_the_region_from_the_disk_cache(tmp_path):
    script = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, %r)
        from tests.test_tvm import elementwise_region
        from backends.tvm.region import compile_program
        from backends.tvm.target import resolve
        c = compile_program(elementwise_region(1 << 9), resolve("llvm"))
        print(json.dumps({"from_disk": c.from_disk, "seconds": c.compile_seconds,
                          "source": c.source}))
    """) % os.getcwd()
    env = {**os.environ, "MYIR_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True) for _ in range(2)]
    import json
    first, second = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert not first["from_disk"] and second["from_disk"]
    assert "define" in second["source"] and second["source"] == first["source"]
    assert second["seconds"] < first["seconds"]
    mode = os.stat(tmp_path / "cache").st_mode & 0o777
    assert mode == 0o700


def test_disk_cache_ignores_libraries_it_did_not_sign(tmp_path):
    disk = DiskCache(tmp_path / "c")
    assert cache.load(disk, "nothing") == (None, None)
    (tmp_path / "c" / "planted.so").write_bytes(b"\x7fELF not ours")
    (tmp_path / "c" / "planted.so.sig").write_text("0" * 64)
    assert cache.load(disk, "planted") == (None, None)


def test_a_library_copied_under_another_regions_name_is_not_loaded(tmp_path, monkeypatch):
    """A library's name is its key: one region's library and signature copied over another's
    must not verify, or the second region would run the first one's kernel."""
    monkeypatch.setenv("MYIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(region, "_compiled", {})
    exp_program, tanh_program = (elementwise_region(1 << 9, unary=u) for u in ("exp", "tanh"))
    for program in (exp_program, tanh_program):
        assert not compile_program(program, CPU).from_disk
    exp_name, tanh_name = (cache.key(p.key, CPU, tvm.__version__)
                           for p in (exp_program, tanh_program))
    for suffix in (".so", ".so.sig"):
        (tmp_path / "cache" / f"{tanh_name}{suffix}").write_bytes(
            (tmp_path / "cache" / f"{exp_name}{suffix}").read_bytes())
    monkeypatch.setattr(region, "_compiled", {})    # as in a fresh process
    r = Region("r", tanh_program, CPU)
    assert not r.compiled.from_disk
    x, y = rng.random(1 << 9), rng.random(1 << 9)
    e, total = r(x, y, 0.5)
    np.testing.assert_allclose(e, np.tanh(x * y + 0.5), rtol=1e-14)
    np.testing.assert_allclose(total, np.sum(np.tanh(x * y + 0.5)), rtol=1e-12)


def test_a_region_runs_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("MYIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(region, "_compiled", {})
    compile_program(elementwise_region(1 << 9), CPU)     # the cache is open
    shutil.rmtree(tmp_path / "cache")                    # and then gone
    compiled = compile_program(elementwise_region(1 << 9, unary="tanh"), CPU)
    assert not (tmp_path / "cache").exists()
    x, y = rng.random(1 << 9), rng.random(1 << 9)
    e, _ = Region("r", compiled.program, CPU)(x, y, 0.5)
    np.testing.assert_allclose(e, np.tanh(x * y + 0.5), rtol=1e-14)


def test_disk_cache_refuses_a_directory_others_can_write(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(PermissionError):
        DiskCache(d)


@pytest.mark.parametrize("spec, kind, attr", [
    ("llvm", "llvm", ("mcpu", tvm.target.codegen.llvm_get_system_cpu())),
    ("native", "llvm", ("mcpu", tvm.target.codegen.llvm_get_system_cpu())),
    ("llvm -mcpu=x86-64", "llvm", ("mcpu", "x86-64")),
    ({"kind": "llvm", "mcpu": "znver3"}, "llvm", ("mcpu", "znver3")),
    ("cuda -arch=sm_80", "cuda", ("arch", "sm_80")),
    ({"kind": "cuda", "arch": "sm_90"}, "cuda", ("arch", "sm_90")),
    ("nvidia/nvidia-h100", "cuda", ("arch", "sm_90a")),
])
def test_target_spellings(spec, kind, attr):
    target = resolve(spec)
    assert target.kind.name == kind
    assert str(target.attrs[attr[0]]) == attr[1]
    if kind == "cuda":
        assert target.host is not None


@pytest.mark.parametrize("spec, words", [
    ("bogus", "bogus"), ("opencl", "opencl"), ("llvm mcpu", "-key=value"),
    (42, "string or a dict"), ({"kind": "vulkan"}, "llvm and cuda"),
])
def test_bad_targets_say_what_is_accepted(spec, words):
    with pytest.raises(MyirError) as info:
        resolve(spec)
    assert words in str(info.value) and "accepted" in str(info.value)


def test_environment_variable_sets_the_default_target(monkeypatch):
    monkeypatch.setenv("MYIR_TARGET", "llvm -mcpu=x86-64")
    assert resolve(None).attrs["mcpu"] == "x86-64"


HOST_CPU = str(tvm.target.codegen.llvm_get_system_cpu())


@pytest.mark.parametrize("spec", [
    "llvm -mcpu=notacpu", {"kind": "llvm", "mcpu": "notacpu"},
    tvm.target.Target({"kind": "llvm", "mcpu": "notacpu"}), "environment",
], ids=["flags", "dict", "Target", "MYIR_TARGET"])
def test_a_cpu_llvm_does_not_know_is_an_error_at_compile(spec, monkeypatch):
    """TVM itself takes any -mcpu, notes on stderr that it is not valid and compiles for a
    generic CPU: slower kernels, no error."""
    if spec == "environment":
        monkeypatch.setenv("MYIR_TARGET", "llvm -mcpu=notacpu")
        spec = None
    with pytest.raises(MyirError) as info:
        tvm_compile(elementwise_chain, target=spec)
    text = str(info.value)
    assert "LLVM knows no CPU 'notacpu'" in text
    assert f"this machine's CPU is {HOST_CPU!r}" in text and "x86-64, " in text
    assert text.startswith("MYIR_TARGET: ") == (spec is None)


def test_a_misspelt_cpu_gets_the_names_close_to_it():
    with pytest.raises(MyirError, match="did you mean 'znver4'"):
        tvm_compile(elementwise_chain, target="llvm -mcpu=znvr4")


@pytest.mark.parametrize("mattr, message", [
    ("+avx3", "did you mean +avx"), ("avx2", "LLVM knows no CPU feature 'avx2'"),
    ("+avx2,+notafeature", "LLVM knows no CPU feature '+notafeature'"),
])
def test_a_cpu_feature_llvm_does_not_know_is_an_error_at_compile(mattr, message):
    """LLVM notes an unknown -mattr on stderr and ignores it; a feature needs its sign."""
    with pytest.raises(MyirError, match=re.escape(message)):
        tvm_compile(elementwise_chain, target=f"llvm -mattr={mattr}")


def test_known_cpu_features_are_accepted():
    x, y = np.linspace(-1.0, 1.0, 64), np.linspace(0.5, 2.0, 64)
    got = tvm_compile(elementwise_chain, target="llvm -mcpu=x86-64 -mattr=+avx2,-fma")(x, y)
    np.testing.assert_allclose(got, elementwise_chain(x, y), rtol=1e-12)


def test_a_triple_llvm_does_not_know_is_an_error_at_compile():
    with pytest.raises(MyirError, match="LLVM knows no target triple 'notarch-linux-gnu'") as info:
        tvm_compile(elementwise_chain, target="llvm -mtriple=notarch-linux-gnu")
    assert "aarch64, " in str(info.value)


@pytest.mark.parametrize("spec, cpu", [
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "cortex-a72"),
    ("llvm -mtriple=arm64-apple-macos", None),      # LLVM's alias of aarch64
])
def test_other_machines_triples_and_cpus_are_accepted(spec, cpu):
    """Cross-compiling: a foreign triple without a CPU gets LLVM's generic one, not this
    machine's."""
    tvm_compile(elementwise_chain, target=spec)
    target = resolve(spec)
    assert target.attrs.get("mcpu") == cpu


def test_a_triple_of_this_machines_architecture_gets_its_cpu():
    target = resolve({"kind": "llvm", "mtriple": "x86_64-pc-linux-gnu"})
    assert str(target.attrs["mcpu"]) == HOST_CPU


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_a_blank_target_variable_means_the_default(blank, monkeypatch):
    monkeypatch.setenv("MYIR_TARGET", blank)
    assert str(resolve(None).attrs["mcpu"]) == HOST_CPU
    got = tvm_compile(elementwise_chain)(BIG, BIG)
    np.testing.assert_allclose(got, elementwise_chain(BIG, BIG), rtol=1e-12)


def test_cuda_region_compiles_to_one_fused_kernel_without_a_gpu():
    compiled = compile_program(elementwise_region(1 << 12, "float32"), resolve("cuda -arch=sm_90"))
    source = compiled.source
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source))
    # mul, add, exp fuse into one kernel; the sum is a reduction kernel of its own
    assert len(kernels) == 2, kernels
    assert any("multiply" in k and "add" in k and "exp" in k for k in kernels), kernels
    assert "R.exp" in compiled.ir


def test_cuda_lowers_matmul():
    a, b = Spec(np.dtype("float32"), (64, 32)), Spec(np.dtype("float32"), (32, 16))
    program = Program((a, b), (Op("matmul", (Ref("in", 0), Ref("in", 1)),
                                  Spec(np.dtype("float32"), (64, 16))),), (0,))
    assert "__global__" in compile_program(program, resolve("cuda -arch=sm_90")).source


@pytest.mark.skipif(not tvm.cuda(0).exist, reason="needs an NVIDIA GPU")
def test_cuda_region_runs_on_the_gpu():
    r = Region("r", elementwise_region(1 << 12, "float32"), resolve("cuda"), on_device=[False, False])
    x = rng.random(1 << 12).astype(np.float32)
    e, total = r(x, x, 0.5)
    np.testing.assert_allclose(e, np.exp(x * x + np.float32(0.5)), rtol=1e-5)
    np.testing.assert_allclose(total, np.sum(np.exp(x * x + np.float32(0.5))), rtol=1e-4)


# --------------------------------------------------------------------------------------------
# Region splitting, through the whole pipeline

import myir  # noqa: E402


def tvm_compile(f, **options):
    return myir.compile(f, backend="tvm", **options)


def elementwise_chain(x, y):
    z = np.exp(x * y + 1.0)
    return np.sum(z * z) + 2.0


def with_matmul(x, w, b):
    h = np.tanh(x @ w + b)
    return np.sum(h * h)


def with_loop(x, n):
    i = 0
    while i < n:
        x = np.tanh(x * 0.5 + 0.25) * 2.0
        i = i + 1
    return x


def scalar_code(x):
    return np.sin(np.cos(x)) * 2.0 + 1.0


BIG = rng.random(1 << 13)


def test_a_fused_elementwise_function_is_one_region():
    lowered = tvm_compile(elementwise_chain).lower(BIG, BIG)
    assert len(lowered.regions) == 1
    (r,) = lowered.regions
    assert r.inputs == ["x", "y"]
    # the numpy scalar `np.sum(...) + 2.0` is computed in the region too
    assert [op.prim for op in r.program.ops] == ["mul", "add", "exp", "mul", "sum", "add"]
    assert "R.exp" in r.ir and "R.sum" in r.ir
    got = tvm_compile(elementwise_chain)(BIG, BIG)
    assert type(got) is np.float64
    np.testing.assert_allclose(got, elementwise_chain(BIG, BIG), rtol=1e-12)


def test_matmul_splits_regions_on_the_cpu_and_stays_in_numpy():
    x, w, b = rng.random((64, 128)), rng.random((128, 64)), rng.random(64)
    lowered = tvm_compile(with_matmul).lower(x, w, b)
    prims = [op.prim for r in lowered.regions for op in r.program.ops]
    assert "matmul" not in prims and "tanh" in prims
    assert "@" in lowered.source           # the matmul is numpy's, in the generated Python
    np.testing.assert_allclose(tvm_compile(with_matmul)(x, w, b), with_matmul(x, w, b),
                               rtol=1e-12)


def test_loop_bodies_get_their_own_regions():
    lowered = tvm_compile(with_loop).lower(BIG, 3)
    assert len(lowered.regions) == 1
    assert [op.prim for op in lowered.regions[0].program.ops] == ["mul", "add", "tanh", "mul"]
    np.testing.assert_allclose(tvm_compile(with_loop)(BIG, 3), with_loop(BIG, 3), rtol=1e-12)


def test_scalar_code_has_no_regions_and_runs_the_python_backends_code():
    compiled = tvm_compile(scalar_code)
    lowered = compiled.lower(0.3)
    assert lowered.regions == []
    assert compiled(0.3) == scalar_code(0.3)


def test_small_arrays_with_few_operations_stay_in_numpy():
    # cost rule: one op on 8 elements is cheaper as one numpy call than as a region call
    def one_op(x):
        return x * 2.0
    assert tvm_compile(one_op).lower(np.ones(8)).regions == []


def test_one_operation_is_a_region_only_on_large_arrays():
    """Cost rule (regions.LONE_OP_MIN_ELEMENTS): one op fuses nothing, so it leaves numpy
    only where TVM's threads beat numpy's single pass (an lstm gradient's lone adds of 4,096
    and 16,384 floats were slower as region calls)."""
    def one_add(x, y):
        return x + y
    small, large = rng.random(1 << 14), rng.random(LONE_OP_MIN_ELEMENTS)
    assert tvm_compile(one_add).lower(small, small).regions == []
    (r,) = tvm_compile(one_add).lower(large, large).regions
    assert [op.prim for op in r.program.ops] == ["add"]
    np.testing.assert_array_equal(tvm_compile(one_add)(large, large), large + large)


def test_strided_inputs_are_copied_by_numpy_and_passed_through_dlpack():
    """A slice of the columns of a matrix (an lstm's gates) is not contiguous: the region
    gets a contiguous copy, and the caller's array is neither changed nor needed after."""
    z = rng.random((64, 512))
    gate = z[:, 128:256]
    assert not gate.flags.c_contiguous
    got = tvm_compile(elementwise_chain)(gate, gate)
    np.testing.assert_allclose(got, elementwise_chain(gate, gate), rtol=1e-12)
    readonly = np.ascontiguousarray(gate)
    readonly.flags.writeable = False
    np.testing.assert_allclose(tvm_compile(elementwise_chain)(readonly, readonly), got,
                               rtol=1e-12)


def test_regions_are_specialised_per_shape():
    compiled = tvm_compile(elementwise_chain)
    a = compiled.lower(BIG, BIG).regions[0]
    b = compiled.lower(BIG[:4096], BIG[:4096]).regions[0]
    assert a.program.inputs[0].shape == (8192,) and b.program.inputs[0].shape == (4096,)
    np.testing.assert_allclose(compiled(BIG[:4096], BIG[:4096]),
                               elementwise_chain(BIG[:4096], BIG[:4096]), rtol=1e-12)


def test_gradient_regions_on_the_tvm_backend():
    def loss(S, sigma):
        d = np.log(S) / sigma + 0.5 * sigma
        return np.sum(S * np.tanh(d))
    S, sigma = rng.uniform(1, 2, 5000), rng.uniform(0.1, 0.5, 5000)
    g = myir.grad(loss, "S", "sigma", backend="tvm")
    ref = myir.grad(loss, "S", "sigma", backend="python")
    assert g.lower(S, sigma).regions
    for a, b in zip(g(S, sigma), ref(S, sigma)):
        # libm's tanh/log differ from numpy's in the last bit; sums of terms of opposite
        # signs keep that error absolute, relative to the terms' size
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.max(np.abs(b)))


def test_cuda_target_compiles_regions_and_reports_their_source():
    compiled = tvm_compile(elementwise_chain, target="cuda -arch=sm_80")
    (r,) = compiled.lower(BIG.astype(np.float32), BIG.astype(np.float32)).regions
    assert "__global__" in r.source and r.target.kind.name == "cuda"
    if not tvm.cuda(0).exist:
        with pytest.raises(MyirError, match="no such device"):
            compiled(BIG.astype(np.float32), BIG.astype(np.float32))


def two_regions(x):
    a = np.exp(x) * 2.0 + 1.0
    b = np.tanh(a) * 3.0 - 1.0
    c = np.sinh(b)     # kept in numpy (lowering.KEPT_IN_NUMPY): a region before, one after
    return np.sum(a * c + a)           # a: from the first region to the second only


def test_cuda_values_only_regions_use_stay_on_the_device():
    x = BIG.astype(np.float32)
    first, second = tvm_compile(two_regions, target="cuda -arch=sm_90").lower(x).regions
    assert dict(zip(first.outputs, first.on_device)) == {"a": True, "b": False}
    assert second.on_device == [False]      # the function's result comes back to the host


@pytest.mark.skipif(not tvm.cuda(0).exist, reason="needs an NVIDIA GPU")
def test_cuda_regions_hand_device_values_to_each_other():
    x = BIG.astype(np.float32)
    compiled = tvm_compile(two_regions, target="cuda")
    first, _ = compiled.lower(x).regions
    a, b = first(x)
    assert isinstance(a, tvm.runtime.Tensor) and a.device.dlpack_device_type() == 2  # on the GPU
    assert isinstance(b, np.ndarray)
    np.testing.assert_allclose(compiled(x), two_regions(x), rtol=1e-5)


def test_target_flag_errors_when_compile_is_called():
    with pytest.raises(MyirError, match="unknown target kind"):
        tvm_compile(elementwise_chain, target="tpu")
    with pytest.raises(MyirError, match="has no targets"):
        myir.compile(elementwise_chain, backend="python", target="llvm")


def test_fast_math_error():
    """float32 regions use TVM's fast exp/tanh (schedule.py): within 3 ulp of the exact value."""
    n = 1 << 16
    x = np.linspace(-20, 20, n, dtype=np.float32)
    a = Spec(np.dtype("float32"), (n,))
    for prim, exact in (("exp", np.exp), ("tanh", np.tanh)):
        got = Region("r", Program((a,), (Op(prim, (Ref("in", 0),), a),), (0,)), CPU)(x)
        want = exact(x.astype(np.float64))
        rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
        assert rel.max() < 3.6e-7, (prim, rel.max())     # 3 ulp of float32


def _ulps(got, want):
    return np.abs(got - want) / np.spacing(np.abs(want))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 709.78, 709.79, -745.13,
                    -745.14, -708.4, 5e-324, 1e-310, 2.2250738585072014e-308, 1.7e308, 0.5,
                    np.sqrt(2), np.sqrt(0.5), -5.0, 1 + 2e-16, 1 - 1e-16])


@pytest.mark.parametrize("prim, points, bound", [
    ("exp", np.linspace(-745, 710, 1 << 16), 1),
    ("log", np.exp(np.linspace(np.log(1e-310), np.log(1e300), 1 << 16)), 2),
    ("tanh", np.concatenate([np.geomspace(1e-300, 1e3, 1 << 15), -np.geomspace(1e-300, 1e3, 1 << 15),
                             np.linspace(-20, 20, 1 << 14)]), 3),
])
def test_vector_math_accuracy(prim, points, bound):
    """float64 exp/log/tanh are vmath.py's vectorized versions: within `bound` ulp of numpy on
    the CPU, and numpy's exact value at every special point (0, ±inf, NaN, subnormals,
    overflow and underflow thresholds, negatives)."""
    x = np.concatenate([points, SPECIAL])
    a = Spec(np.dtype("float64"), x.shape)
    region = Region("r", Program((a,), (Op(prim, (Ref("in", 0),), a),), (0,)), CPU)
    got = region(x)
    with np.errstate(all="ignore"):
        want = getattr(np, prim)(x)
    finite = np.isfinite(want) & (want != 0)
    assert _ulps(got[finite], want[finite]).max() <= bound
    np.testing.assert_array_equal(got[~finite], want[~finite])
    assert "llvm.exp." not in region.source and "llvm.log." not in region.source  # libm calls


NUMPY_UFUNCS = ("log2", "log10", "exp2", "arcsinh", "arccosh", "arctanh", "cbrt", "rint",
                "trunc", "hypot", "logaddexp", "logaddexp2")


def test_numpy_ufuncs_accuracy():
    """numpy's ufuncs beyond the basics, lowered to TIR intrinsics, libm calls and numpy's
    own formula (logaddexp), in one region: within 3 ulp of numpy over the float64 range,
    numpy's value at every special point, and ties of logaddexp exactly numpy's."""
    big = np.geomspace(1e-300, 1e300, 1 << 12)
    x = np.concatenate([big, -big, np.linspace(-5, 5, 1 << 12), SPECIAL, [2.5, -3.5, 1e-17]])
    operands = {1: (Ref("in", 0),), 2: (Ref("in", 0), Ref("in", 1)), 0: (Ref("in", 0),) * 2}
    a = Spec(np.dtype("float64"), x.shape)
    ops, wants = [], []
    for prim in NUMPY_UFUNCS:
        binary = prim in ("hypot", "logaddexp", "logaddexp2")
        for arity in ((2, 0) if binary else (1,)):     # 0: x with itself (logaddexp's ties)
            ops.append(Op(prim, operands[arity], a))
            with np.errstate(all="ignore"):
                wants.append(getattr(np, prim)(*{1: (x,), 2: (x, x[::-1]), 0: (x, x)}[arity]))
    region = Region("r", Program((a, a), tuple(ops), tuple(range(len(ops)))), CPU)
    for op, got, want in zip(ops, region(x, x[::-1].copy()), wants):
        finite = np.isfinite(want) & (want != 0)
        assert _ulps(got[finite], want[finite]).max() <= 3, op.prim
        np.testing.assert_array_equal(got[~finite], want[~finite], op.prim)


def test_fills_are_read_as_scalars_not_written_out():
    """zeros/ones/broadcast seeds feeding elementwise ops are their 0-d values in the Relax
    IR (lowering.Context.emit); results are numpy's, including when the fills alone give
    the result its shape."""
    m, v, b = (Spec(np.dtype("float32"), (64, 64)), Spec(np.dtype("float32"), (64,)),
               Spec(np.dtype("bool"), (64,)))
    seed = Spec(np.dtype("float32"), ())
    program = Program((v, m, seed), (
        Op("eq", (Ref("in", 0), Ref("const", value=1.0)), b),                       # 0
        Op("reduce_grad", (Ref("in", 2), Ref("shape", value=m), Ref("const", value=None),
                           Ref("const", value=False)), m),                          # 1
        Op("grad_zeros", (Ref("shape", value=m),), m),                              # 2
        Op("where", (Ref("op", 0), Ref("op", 1), Ref("op", 2)), m),   # shape from the fills
        Op("where", (Ref("op", 0), Ref("op", 2), Ref("in", 1)), m),
        Op("mul", (Ref("op", 3), Ref("op", 4)), m)), (3, 5))
    z = (rng.random(64) > 0.5).astype(np.float32)
    x = rng.random((64, 64)).astype(np.float32)
    r = Region("r", program, CPU)
    got = r(z, x, np.float32(1.0))
    want = [np.broadcast_to(np.where(z == 1.0, 1.0, 0.0), (64, 64)).astype(np.float32)]
    want.append(want[0] * np.where(z == 1.0, np.float32(0), x))
    for a, w in zip(got, want):
        assert a.dtype == w.dtype and a.shape == w.shape
        np.testing.assert_array_equal(a, w)
    kernels = set(re.findall(r"define[^\n]*@__tvm_ffi_(\w+)\(", r.source))
    assert kernels and not kernels & {"zeros", "broadcast_to"}, kernels   # no fill written out


@pytest.mark.parametrize("n", [100_000, 99_999, 1 << 16, 10_000, 1_000])
@pytest.mark.parametrize("reduce, chain", [("sum", ("exp", "mul")), ("max", ("sin",))])
def test_full_reduction_of_an_elementwise_chain_is_vectorized(n, reduce, chain):
    """sum(exp(x) * 2) and max(sin(x)) over n elements: one partial result per chunk and
    vector lane (schedule._parallel_full_reduction) where n splits into whole steps of VECTOR
    lanes (not 99,999), so the chain runs 8 lanes wide; numpy's values (a sum to rounding:
    it adds in another order).  Where n does not split, only the values are checked: LLVM's
    own loop vectorizer may still make 8-wide code of the serial loop (it does for max(sin)
    on an AVX-512 host, znver5)."""
    x = np.random.default_rng(n).uniform(-1, 1, n)
    a, s = Spec(np.dtype("float64"), (n,)), Spec(np.dtype("float64"), ())
    ops = [Op(chain[0], (Ref("in", 0),), a)]
    if len(chain) > 1:
        ops.append(Op(chain[1], (Ref("op", 0), Ref("const", value=2.0)), a))
    ops.append(Op(reduce, (Ref("op", len(ops) - 1), Ref("const", value=None),
                           Ref("const", value=False)), s))
    r = Region("r", Program((a,), tuple(ops), (len(ops) - 1,)), CPU)
    want = getattr(np, reduce)(np.exp(x) * 2.0 if len(chain) > 1 else np.sin(x))
    np.testing.assert_allclose(r(x), want, rtol=1e-13)
    if n % schedule.VECTOR == 0:
        assert "<8 x double>" in r.source


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_mean_of_an_elementwise_chain_compiles(n):
    """np.mean is a sum then a division in one TVM function, where TVM 0.27's rfactor fails
    (schedule.py tries it on a copy): the region compiles, with a serial reduction, instead
    of falling back to numpy with a warning."""
    x = np.random.default_rng(n).uniform(-1, 1, n)
    a, s = Spec(np.dtype("float64"), (n,)), Spec(np.dtype("float64"), ())
    program = Program((a,), (Op("mul", (Ref("in", 0), Ref("const", value=3.0)), a),
                             Op("mean", (Ref("op", 0), Ref("const", value=None),
                                         Ref("const", value=False)), s)), (1,))
    np.testing.assert_allclose(Region("r", program, CPU)(x), np.mean(x * 3.0), rtol=1e-13)


def test_reduction_over_length_one_axes_then_elementwise():
    # TVM's inlining helpers once folded the cos into this reduction's update (cos(1) for 0)
    x = np.zeros((1, 4))
    a, v = Spec(np.dtype("float64"), (1, 4)), Spec(np.dtype("float64"), (4,))
    for prim in ("mean", "sum", "max", "prod"):
        program = Program((a,), (Op(prim, (Ref("in", 0), Ref("const", value=0),
                                            Ref("const", value=False)), v),
                                 Op("cos", (Ref("op", 0),), v)), (1,))
        np.testing.assert_array_equal(Region("r", program, CPU)(x), np.ones(4))


def test_a_region_tvm_cannot_compile_runs_in_numpy_with_a_warning(monkeypatch):
    import backends.tvm.region as region_module

    def broken(program, target):
        raise RuntimeError("InternalError: some TVM failure\nCheck failed: x")
    monkeypatch.setattr(region_module, "compile_program", broken)
    compiled = tvm_compile(elementwise_chain)
    with pytest.warns(RuntimeWarning, match="runs in numpy instead: Check failed: x"):
        lowered = compiled.lower(BIG[:5000], BIG[:5000])
    assert lowered.regions == []
    np.testing.assert_array_equal(compiled(BIG[:5000], BIG[:5000]),
                                  elementwise_chain(BIG[:5000], BIG[:5000]))


CHAIN_STATEMENTS = ("a{i} = a{j} * np.cos(a{k}) - 0.1 * x",
                    "a{i} = np.exp(-a{j} * a{j}) + a{k} * 0.25",
                    "a{i} = np.sin(a{j}) * x + a{k} * 0.5",
                    "a{i} = np.tanh(a{j} + a{k}) * 0.9")


def statement_chain(n, directory):
    """f(x, y) of n numpy statements, each reading the two values before it."""
    lines = ["import numpy as np", "", "", "def f(x, y):", "    a0 = x", "    a1 = y"]
    lines += ["    " + CHAIN_STATEMENTS[s % 4].format(i=s + 2, j=s + 1, k=s) for s in range(n)]
    lines.append(f"    return np.sum(a{n + 1})")
    return module_from_source(directory / f"chain{n}.py", "\n".join(lines) + "\n").f


def kernel_instructions(source: str) -> int:
    """LLVM instructions in a region's kernels (not in TVM's calling glue, `__`-named)."""
    count, inside = 0, False
    for line in source.splitlines():
        if line.startswith("define"):
            inside = "@__" not in line
        elif line.startswith("}"):
            inside = False
        elif inside and line.startswith("  ") and not line.lstrip().startswith("#"):
            count += 1
    return count


def test_a_chain_of_statements_reading_the_two_before_compiles_to_linear_code(tmp_path):
    """Every value of the chain is read twice.  Inlined at each read, a kernel held 2^N
    copies (six statements compiled for minutes); values read more than once are computed
    once (schedule._inline_without_copies) and exp/tanh bind their argument (vmath), so 40
    statements make at most about twice the code of 20, forward and gradient (less where
    bounded fusion groups repeat the chain's pattern: TVM compiles identical kernels once),
    and the values are CPython's and the gradient central differences'."""
    x, y = np.linspace(-1.0, 1.0, 64), np.linspace(0.5, 1.5, 64)
    sizes = {}
    for n in (20, 40):
        f = statement_chain(n, tmp_path)
        forward, gradient = tvm_compile(f), myir.grad(f, "x", backend="tvm")
        sizes[n] = [sum(kernel_instructions(r.source) for r in c.lower(x, y).regions)
                    for c in (forward, gradient)]
        np.testing.assert_allclose(forward(x, y), f(x, y), rtol=1e-12)
        d, h = np.random.default_rng(n).standard_normal(64), 1e-6
        np.testing.assert_allclose(np.dot(gradient(x, y), d),
                                   (f(x + h * d, y) - f(x - h * d, y)) / (2 * h), rtol=1e-6)
    for small, large in zip(sizes[20], sizes[40]):
        assert 0 < small <= large < 2.5 * small, sizes


def shared_broadcast_operand(m, v):
    b = np.exp(v * 0.5)
    return np.sum(m * b + b * b)


def test_a_shared_value_smaller_than_the_kernel_loop_is_computed_once_and_broadcast():
    """b, read twice, has a row's elements while the sum loops over the whole matrix:
    computed inside that loop it would be recomputed for every row, so it gets a loop of its
    own (schedule._compute_shared_at), and the region still gives numpy's value."""
    m, v = rng.random((32, 256)), rng.random(256)
    lowered = tvm_compile(shared_broadcast_operand).lower(m, v)
    assert len(lowered.regions) == 1
    np.testing.assert_allclose(tvm_compile(shared_broadcast_operand)(m, v),
                               shared_broadcast_operand(m, v), rtol=1e-12)


def shared_scalar(x, a, b):
    s = a / b
    return np.cos(x * s) * s + 1.0


def test_a_shared_scalar_compiles_in_the_region(recwarn):
    """s, a float32 scalar the region computes and reads twice, has no loop to schedule."""
    x = np.linspace(-1.0, 1.0, 9, dtype=np.float32).reshape(3, 3)
    a, b = np.float32(1.5), np.float32(0.25)
    lowered = tvm_compile(shared_scalar).lower(x, a, b)
    assert len(lowered.regions) == 1
    assert not [w for w in recwarn if "could not compile" in str(w.message)]
    np.testing.assert_allclose(tvm_compile(shared_scalar)(x, a, b), shared_scalar(x, a, b),
                               rtol=1e-6)


def bool_arithmetic(x, y):
    a, b = x > 0.0, y > 0.0
    return np.sum((a + b) * (a * b) + np.add(a, b) * np.multiply(a, b)) * x


def test_arithmetic_on_bools_runs_in_numpy(recwarn):
    """numpy's + and * of bool arrays are `or` and `and`; TVM has no such arithmetic."""
    x, y = np.linspace(-1.0, 1.0, 1000), np.linspace(1.0, -1.0, 1000)
    np.testing.assert_array_equal(tvm_compile(bool_arithmetic)(x, y), bool_arithmetic(x, y))
    assert not [w for w in recwarn if "could not compile" in str(w.message)]


def compares_with_itself(x):
    """Each comparison of x with itself fused into one kernel: NaN tests, not constants."""
    y = np.where(x != x, 0.0, np.where(x == np.inf, 5.0, x))
    return y + np.where(x == x, 1.0, 0.0) + np.where(x <= x, 2.0, 0.0) \
        + np.where(x >= x, 4.0, 0.0) + np.where(x < x, 8.0, 0.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_float_compared_with_itself_is_a_nan_test(dtype):
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0, 0.0], dtype)
    np.testing.assert_array_equal(tvm_compile(compares_with_itself)(x), compares_with_itself(x))
