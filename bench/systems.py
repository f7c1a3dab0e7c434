"""The systems the harness compares, behind one small interface.

A system is `load()`ed once (imports; raises `Unavailable` when it cannot run at all), then
for each workload and mode ("forward", "grad" or "hessian") it converts the numpy inputs to its own
(`inputs`) and `build`s a callable taking them.  A gradient callable returns one value per
position in workloads.WRT[workload].  Every callable's result is complete when it returns
(JAX's is blocked on), so the harness can time all of them the same way.
"""

import inspect
import types

import numpy as np

from bench import threads
from bench import hessians
from bench import workloads
from bench.workloads import load_programs


class Unavailable(Exception):
    """The system cannot run this workload in this mode; the message says why."""


class NotApplicable(Unavailable):
    """Nothing to run by design (a forward of the hand-written gradients, say)."""


def short(exc):
    """`Type: first line of the message`, at most 160 characters."""
    text = f"{type(exc).__name__}: {str(exc).strip()}".splitlines()[0]
    return text if len(text) <= 160 else text[:157] + "..."


def static_positions(args):
    """Python ints are static (trip counts, depths), never differentiated."""
    return tuple(i for i, a in enumerate(args) if isinstance(a, int))


class System:
    name = "?"

    def load(self):
        pass

    def version(self):
        return None

    def inputs(self, workload, mode, args):
        return args

    def build(self, workload, mode, args):
        raise NotImplementedError

    def failure(self, exc):
        """How to report an exception raised by the first call."""
        return f"fails: {short(exc)}"


class CPython(System):
    """The workload function as written, run by CPython + numpy."""
    name = "cpython"

    def version(self):
        return f"numpy {np.__version__}"

    def build(self, workload, mode, args):
        if mode != "forward":
            raise NotApplicable("forward only")
        return workloads.function(workload)


class Handwritten(System):
    """workloads.GRADS: hand-derived numpy gradients, the "limit" baseline."""
    name = "handwritten"

    def build(self, workload, mode, args):
        if mode == "hessian":
            if workload not in hessians.HESSIANS:
                raise NotApplicable("no hand-written Hessian")
            return hessians.HESSIANS[workload]
        if mode != "grad":
            raise NotApplicable("gradients only")
        if workload not in workloads.GRADS:
            raise NotApplicable("no hand-written gradient")
        return workloads.GRADS[workload]


class Myir(System):
    """myir.compile(f, backend=B) and myir.grad(f, *WRT) on that backend; optional.  A spec
    "python+fastmath" adds compile options given by flags (FLAGS)."""

    FLAGS = {"fastmath": ("fastmath", True), "noopt": ("optimize", False)}

    def __init__(self, spec):
        self.backend, *flags = spec.split("+")
        unknown = set(flags) - set(self.FLAGS)
        if unknown:
            raise ValueError(f"unknown myir flag(s) {sorted(unknown)}; known: {list(self.FLAGS)}")
        self.options = dict(self.FLAGS[flag] for flag in flags)
        self.name = f"myir-{spec}"

    def load(self):
        try:
            import myir
        except Exception as e:  # an ImportError, or a half-written package
            raise Unavailable(f"not available: import myir failed: {short(e)}")
        self.myir = myir
        # imports are outside the first-call clock for every system (jax's too): `import
        # myir` leaves its compiler to the first compile, and TVM to the first region
        import myir.pipeline  # noqa: F401
        import myir.saved  # noqa: F401
        if self.backend == "tvm":
            import backends.tvm.regions  # noqa: F401  (the backend's own modules)
            from backends.tvm import load_tvm  # sets TVM's thread count before the import

            load_tvm()

    def version(self):
        return getattr(self.myir, "__version__", "dev")

    def build(self, workload, mode, args):
        if mode == "hessian":
            if workload not in hessians.HESSIANS:
                raise NotApplicable("no Hessian row for this workload")
            try:
                return self.myir.compile(self.myir.hessian(workloads.function(workload),
                                                           *workloads.WRT[workload]),
                                         backend=self.backend, **self.options)
            except Exception as e:
                raise Unavailable(f"not available: myir.hessian raised {short(e)}")
        api = "compile" if mode == "forward" else "grad"
        if not callable(getattr(self.myir, api, None)):
            raise Unavailable(f"not available: myir.{api} does not exist yet")
        f = workloads.function(workload)
        try:
            if mode == "forward":
                return self.myir.compile(f, backend=self.backend, **self.options)
            return self.grad(f, workloads.WRT[workload])
        except Exception as e:
            raise Unavailable(f"not available: myir.{api} raised {short(e)}")

    def grad(self, f, wrt):
        """myir.grad(f, *wrt) on self.backend: as a keyword where grad takes one, else by
        compiling the gradient with myir.compile."""
        params = inspect.signature(self.myir.grad).parameters.values()
        if not self.options and any(p.name == "backend" or p.kind is p.VAR_KEYWORD
                                    for p in params):
            return self.myir.grad(f, *wrt, backend=self.backend)
        return self.myir.compile(self.myir.grad(f, *wrt), backend=self.backend, **self.options)


class Jax(System):
    """jax.jit(f) and jax.jit(jax.grad(f, argnums=WRT)) on the same function bodies."""
    name = "jax"

    def load(self):
        try:
            import jax
            import jax.numpy as jnp
        except ImportError as e:
            raise Unavailable(f"not installed ({short(e)})")
        jax.config.update("jax_enable_x64", True)  # float64 workloads stay float64
        self.jax = jax
        self.programs = load_programs(jnp, "jax")

    def version(self):
        return f"jax {self.jax.__version__} on {self.jax.devices()[0].platform}"

    def inputs(self, workload, mode, args):
        return tuple(self.jax.device_put(a) if isinstance(a, np.ndarray) else a for a in args)

    def build(self, workload, mode, args):
        jax = self.jax
        f = getattr(self.programs, workload)
        if mode == "grad":
            f = jax.grad(f, argnums=workloads.WRT[workload])
        if mode == "hessian":
            if workload not in hessians.HESSIANS:
                raise NotApplicable("no Hessian row for this workload")
            f = jax.hessian(f, argnums=workloads.WRT[workload][0])
        jitted = jax.jit(f, static_argnums=static_positions(args))
        return lambda *a: jax.block_until_ready(jitted(*a))

    def failure(self, exc):
        if isinstance(exc, self.jax.errors.JAXTypeError):  # a Python branch on a traced value
            return f"fails under jit ({type(exc).__name__})"
        return super().failure(exc)


class Torch(System):
    """PyTorch eager (autograd for gradients) on the same function bodies."""
    name = "torch"

    def load(self):
        try:
            import torch
        except ImportError as e:
            raise Unavailable(f"not installed ({short(e)})")
        torch.set_num_threads(threads())
        self.torch = torch

        def reduction(op):
            def reduce(x, axis=None, keepdims=False):
                return op(x) if axis is None else op(x, dim=axis, keepdim=keepdims)
            return reduce

        np_like = types.SimpleNamespace(
            sin=torch.sin, cos=torch.cos, exp=torch.exp, log=torch.log, tanh=torch.tanh,
            sqrt=torch.sqrt, where=torch.where, max=reduction(torch.amax),
            sum=reduction(torch.sum), mean=reduction(torch.mean))
        self.programs = load_programs(np_like, "torch")

    def version(self):
        return f"torch {self.torch.__version__}"

    def inputs(self, workload, mode, args):
        wrt = workloads.WRT[workload] if mode == "grad" else ()
        torch = self.torch

        def convert(i, a):
            if isinstance(a, int):
                return a
            t = torch.from_numpy(a) if isinstance(a, np.ndarray) else torch.tensor(a, dtype=torch.float64)
            return t.requires_grad_(i in wrt)

        return tuple(convert(i, a) for i, a in enumerate(args))

    def build(self, workload, mode, args):
        f = getattr(self.programs, workload)
        if mode == "forward":
            return f
        if mode == "hessian":
            raise NotApplicable("no Hessian row for torch")
        wrt = workloads.WRT[workload]
        autograd = self.torch.autograd
        return lambda *a: autograd.grad(f(*a), [a[i] for i in wrt])


def make_system(name):
    """cpython | handwritten | jax | torch | myir-BACKEND"""
    fixed = {"cpython": CPython, "handwritten": Handwritten, "jax": Jax, "torch": Torch}
    if name in fixed:
        return fixed[name]()
    if name.startswith("myir-"):
        return Myir(name[len("myir-"):])
    raise ValueError(f"unknown system {name!r}")


def to_numpy(value):
    """A result (scalar, array, tensor, or tuple of them) as numpy, tuples kept."""
    if isinstance(value, (tuple, list)):
        return tuple(to_numpy(v) for v in value)
    if isinstance(value, dict):     # a dict of parameters' gradient
        return {k: to_numpy(v) for k, v in value.items()}
    if hasattr(value, "detach"):  # torch
        value = value.detach().cpu().numpy()
    return np.asarray(value)
