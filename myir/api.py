"""The public API: `compile`, compiled functions, and `lower` to inspect each stage.

A compiled function looks up its argument signature in a cache; on a miss it runs the
pipeline once for that signature (parse → passes → backend) and keeps the result.
"""

from __future__ import annotations

import functools
import inspect
import threading
import types
from dataclasses import dataclass, field

import numpy as np

from myir import tree
from myir.errors import MyirError, end_at_the_callers_line
from myir.ir.graph import Graph
from myir.ir.values import GradMacro, JacobianMacro, JvpMacro, VectorizeMacro

BACKENDS = ("tvm", "python")
DEFAULT_BACKEND = "tvm"


_MISSING = object()


def signature_of(value):
    """The part of a value's type a compiled function is specialised on."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape)
    if type(value) is dict:     # keys are part of the type (passes/abstract.py: ADict)
        return ("dict",) + tuple((k, signature_of(v)) for k, v in value.items())
    kind = tree.kind(value)
    if kind not in (tree.LEAF, tuple, list):     # a NamedTuple or dataclass
        return (kind,) + tuple(signature_of(v) for v in tree.children(value))
    if isinstance(value, tuple):
        return ("tuple",) + tuple(signature_of(v) for v in value)
    if type(value) is list:
        return ("list",) + tuple(signature_of(v) for v in value)
    return type(value)



@dataclass
class Lowered:
    """The pipeline's result for one argument signature: the Python function compiled
    (`function`; for a gradient, the function differentiated), the graph after each stage,
    the generated source, the generated function that runs it (`entry`), and how long each
    step of the pipeline took (`timings`, step -> ms: where compile time goes, and what
    inference costs).  A program
    loaded from the disk cache or shipped in a pickle (`from_disk`, see `myir/saved.py`) has
    no stages."""

    function: object
    stages: dict[str, Graph]
    source: str
    entry: object
    regions: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    generated: object = field(default=None, repr=False)  # the generated module (`Generated`)
    code: object = field(default=None, repr=False)       # and its compiled code
    from_disk: bool = False
    saved: bytes | None = field(default=None, repr=False)  # as saved (`myir/saved.py`)
    # whether `stages` has every stage: a compile for a call leaves out the expanded graph,
    # which the optimizer edits in place (`myir/pipeline.py`); `lower` compiles again
    all_stages: bool = True

    def graph(self, stage: str = "optimized") -> Graph:
        if stage == "optimized" and stage not in self.stages:
            stage = list(self.stages)[-1]
        try:
            return self.stages[stage]
        except KeyError:
            raise MyirError(f"no stage named {stage!r}",
                            hint=f"stages: {', '.join(self.stages)}") from None

    def __repr__(self) -> str:
        name = getattr(self.function, "__name__", "?")
        return f"<Lowered {name}: stages {', '.join(self.stages)}>"

    def _repr_html_(self) -> str:
        """Jupyter's view: every stage's graph side by side, the generated source, and the
        TVM regions (see `myir.viz.lowered_html`)."""
        from myir.viz import lowered_html

        return lowered_html(self)


# The options of compile(): name -> what it does (shown when an unknown one is given).
OPTIONS = {
    "target": 'backend "tvm": what TVM compiles for',
    "optimize": "False skips the optimizer, for debugging",
    "fastmath": "True lets the optimizer use real-number algebra that rounds differently",
}


class CompiledFunction:
    """A Python function compiled by myir.  Call it like the original; `.lower(*args)` shows
    the pipeline's stages for those arguments."""

    def __init__(self, fn, backend: str | None = None, transforms: tuple = (), **options):
        backend = backend or DEFAULT_BACKEND
        if backend not in BACKENDS:
            raise MyirError(f"unknown backend {backend!r}", hint=f"backends: {', '.join(BACKENDS)}")
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise MyirError(f"unknown option {unknown[0]!r}",
                            hint=f"options: {', '.join(f'{k}= ({v})' for k, v in OPTIONS.items())}")
        for flag in ("optimize", "fastmath"):
            if not isinstance(options.get(flag, False), bool):
                raise MyirError(f"{flag}= takes True or False, got {options[flag]!r}")
        if options.get("fastmath") and options.get("optimize") is False:
            raise MyirError("fastmath=True is a rule of the optimizer, and optimize=False "
                            "turns the optimizer off", hint="drop one of the two")
        if options.get("target") is not None and backend != "tvm":
            raise MyirError(f"target= selects what TVM compiles for; backend {backend!r} "
                            "has no targets", hint='use backend="tvm" (the default)')
        if backend == "tvm":
            from backends.tvm.target import check
            check(options.get("target"))     # None: MYIR_TARGET's
        self.__myir_function__ = fn
        self.__myir_transforms__ = tuple(transforms)
        self.fn = fn
        self.backend = backend
        self.options = options
        self._by_signature: dict = {}  # full signature -> Lowered
        self._lock = threading.Lock()
        self._signature = inspect.signature(fn)
        self._nparams = len(self._signature.parameters)
        self._callable_defaults = callable_defaults(fn) if transforms else ()
        # a gradient of f's own parameters (not jvp's primals and tangents) takes its flags
        # as constants (`static_arguments`)
        self._static_flags = bool(transforms) and not transforms[-1].takes
        # updated=(): the wrapped object may itself be compiled (compile(grad(f), ...)): its
        # signature cache, backend and options must not be copied over this one's
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        entry = self._lookup(args, stages=False).entry
        try:
            return entry(*args)
        except Exception as e:
            end_at_the_callers_line(e)
            raise

    def _bind(self, args, kwargs) -> tuple:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError:
            # CPython checks the arguments before running any of the body: let it say what
            # is wrong, in its own words.
            self.fn(*args, **kwargs)
            raise
        bound.apply_defaults()
        return bound.args

    def _lookup(self, args, stages: bool) -> Lowered:
        """The compiled program for the arguments' signature, with its stages if asked
        (a program loaded from the disk cache has none: `myir/saved.py`)."""
        key = tuple(signature_of(a) for a in args)
        if self._callable_defaults:    # a gradient takes default functions as constants
            baked = default_functions(self._callable_defaults, args)
            key += (("default functions",) + baked,) if baked else ()
        if self._static_flags:
            flags = static_arguments(args)
            key += (("constants",) + flags,) if flags else ()
        lowered = self._by_signature.get(key)
        if lowered is None or stages and (lowered.from_disk or not lowered.all_stages):
            with self._lock:
                lowered = self._by_signature.get(key)
                if lowered is None or stages and (lowered.from_disk or not lowered.all_stages):
                    first = not self._by_signature
                    lowered = self._by_signature[key] = self._compile(args, key, stages)
                    if first:
                        self._call_entry_directly(key, lowered.entry)
        return lowered

    def _compile(self, args, key: tuple, stages: bool) -> Lowered:
        """A call loads the program from the disk cache, or compiles and saves it; `lower`
        always compiles (it shows the stages)."""
        from myir import saved

        name = None if stages else saved.key(self.fn, self.__myir_transforms__, self.backend,
                                            self.options, key)
        lowered = saved.load(name, self.fn) if name is not None else None
        if lowered is None:
            lowered = self._run_pipeline(args, stages)
            if name is not None:
                saved.save(name, lowered)
        return lowered

    def _call_entry_directly(self, key: tuple, entry):
        """Calls with the first signature compiled go straight to its generated code: the
        instance's class becomes a subclass whose `__call__` checks that the arguments have
        that signature (`type(x) is float`: tens of ns) and calls the generated function;
        anything else takes the general path (bind, look up, compile).  This keeps a compiled
        call of scalar code within ~0.1 µs of calling the generated code itself."""
        checks = []
        namespace = {"entry": entry, "slow": CompiledFunction.__call__, "ndarray": np.ndarray}
        for i, sig in enumerate(key):
            if isinstance(sig, type):
                namespace[f"t{i}"] = sig
                checks.append(f"type(_a{i}) is t{i}")
            elif sig[0] == "array":
                namespace[f"d{i}"], namespace[f"s{i}"] = np.dtype(sig[1]), sig[2]
                checks.append(f"type(_a{i}) is ndarray and _a{i}.shape == s{i} "
                              f"and _a{i}.dtype == d{i}")
            else:
                return      # tuples, lists: no cheap check, the general path is fine
        names = [f"_a{i}" for i in range(len(key))]
        # Parameters with defaults so that any call binds; names no user keyword will hit.
        source = (f"def __call__(self, {''.join(f'{n}=MISSING, ' for n in names)}*rest, **kw):\n"
                  f"    if {' and '.join(checks + ['not rest', 'not kw'])}:\n"
                  f"        return entry({', '.join(names)})\n"
                  f"    given = [a for a in ({''.join(f'{n}, ' for n in names)}) if a is not MISSING]\n"
                  f"    return slow(self, *given, *rest, **kw)\n")
        namespace["MISSING"] = _MISSING
        exec(source, namespace)
        self.__class__ = type(type(self).__name__, (CompiledFunction,),
                              {"__call__": namespace["__call__"], "__slots__": ()})

    def lower(self, *args, **kwargs) -> Lowered:
        """Run the pipeline for these arguments (without running the function)."""
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        return self._lookup(args, stages=True)

    def prepare(self, *args, **kwargs) -> Lowered:
        """The program a call with these arguments runs, loaded from the disk cache or
        compiled (and saved there), without running it: for a process that compiles ahead of
        others which then load it (`myir.distributed.compile_once`)."""
        if kwargs or len(args) != self._nparams:
            args = self._bind(args, kwargs)
        return self._lookup(args, stages=False)

    def _run_pipeline(self, args, stages: bool) -> Lowered:
        from myir.pipeline import run_pipeline

        try:
            return run_pipeline(self.fn, args, self.backend, self.options,
                                self.__myir_transforms__, stages=stages)
        except MyirError as e:
            raise e.with_traceback(None) from None

    def __reduce__(self):
        """Pickled (for a process pool, an MPI or Dask executor) as what it is compiled from —
        the Python function (by reference where importable; cloudpickle copies others), its
        transforms, backend and options, and the text of the source files the parser reads —
        with the programs compiled so far, so the receiving process calls them without
        compiling (their TVM kernels included), and compiles new argument signatures from the
        shipped source."""
        from frontend.fingerprint import sources
        from myir import saved

        programs = {}
        for key, lowered in list(self._by_signature.items()):
            data = saved.shipped(lowered)
            if data is not None:
                programs[key] = data
        return _rebuild, (self.fn, self.backend, self.__myir_transforms__, self.options,
                          *sources(self.fn), saved.runtime(), programs)

    def __repr__(self) -> str:
        name = self.fn.__qualname__
        for spec in self.__myir_transforms__:
            name = f"{spec!r}({name})"
        return f"<myir.compile {name} backend={self.backend}>"


def callable_defaults(fn) -> tuple:
    """(position, name, default) of each parameter of fn whose default is a function
    (`act=np.tanh`): found once per compiled function, not at every call."""
    names = list(inspect.signature(fn).parameters)
    defaults = getattr(fn, "__defaults__", None) or ()
    first = len(names) - len(defaults)
    return tuple((first + i, names[first + i], d) for i, d in enumerate(defaults)
                 if callable(d))


def default_functions(callables: tuple, args) -> tuple:
    """The names of the parameters (of `callable_defaults`) whose arguments are their
    default functions, which a gradient takes as known when compiling: part of the
    signature it is compiled for."""
    return tuple(name for i, name, d in callables if i < len(args) and args[i] is d)


def static_arguments(args) -> tuple:
    """(position, value) of each argument a gradient takes as a constant when compiling: a
    bool, None or a string.  Such a flag (`reduce=True`, `mode="mean"`) may choose whether
    the function returns a scalar or an array, which a gradient needs to know; it has no
    gradient, and few values, each its own compiled program."""
    return tuple((i, a) for i, a in enumerate(args) if a is None or type(a) in (bool, str))


def _rebuild(fn, backend, transforms, options, texts, files, runtime, programs) -> CompiledFunction:
    """A pickled compiled function (`CompiledFunction.__reduce__`), with its programs installed
    when they were compiled by the same myir, Python and numpy as run here.  They are not
    written into the disk cache: it holds only what this user's myir made (`myir/cache.py`)."""
    from frontend.fingerprint import provide_sources, restore_filenames
    from myir import saved

    provide_sources(texts)
    restore_filenames(fn, files)
    compiled = CompiledFunction(fn, backend, transforms, **options)
    if runtime != saved.runtime():
        return compiled
    for key, data in programs.items():
        lowered = saved.from_shipped(data, fn)
        if lowered is not None:
            compiled._by_signature[key] = lowered
    if compiled._by_signature:
        key, lowered = next(iter(compiled._by_signature.items()))
        compiled._call_entry_directly(key, lowered.entry)
    return compiled


def _not_a_function(value) -> tuple[str, str]:
    """What a value given to compile() is, and what to write instead.  myir reads a
    function's source, so only functions written in Python can be compiled."""
    name = getattr(value, "__name__", None)
    if isinstance(value, functools.partial):
        inner = getattr(value.func, "__name__", "f")
        return ("a functools.partial",
                f"write a function that makes the call, e.g. `lambda x: {inner}(x, 2.0)`")
    if isinstance(value, type):
        return (f"the class {value.__qualname__}",
                "compile a function that computes the result from numbers, tuples or arrays")
    if isinstance(value, types.MethodType):
        return (f"the bound method {value.__qualname__}",
                "compiled code works on numbers, tuples and arrays, not objects: write a "
                "function of the values the method uses, and compile that")
    package = (getattr(value, "__module__", None) or "").partition(".")[0]
    if callable(value) and isinstance(name, str) and (isinstance(value, np.ufunc)
                                                      or package in ("numpy", "math")):
        path = "math" if package == "math" else "np" + value.__module__[len("numpy"):]
        return (f"the {package} function {path}.{name}",
                f"call it from a `def` or `lambda`, e.g. `lambda x: {path}.{name}(x)` (with "
                "the arguments it takes)")
    if isinstance(value, types.BuiltinFunctionType) \
            and isinstance(getattr(value, "__self__", None), (types.ModuleType, type(None))):
        from frontend.resolve import BUILTINS

        return (f"the built-in function {name}",
                f"wrap it in a lambda that calls it, e.g. `lambda x: {name}(x)` (compiled "
                f"code supports the built-in functions {', '.join(BUILTINS)})")
    if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType,
                          types.WrapperDescriptorType, types.MethodDescriptorType)):
        return (f"the built-in method {getattr(value, '__qualname__', name)}",
                "write what it does as a `def` or `lambda`, e.g. `lambda x, y: x + y`")
    return (f"a value of type {type(value).__name__}",
            "write a `def` or `lambda` in a file or notebook cell, and compile that")


def compile(fn=None, *, backend: str | None = None, **options):
    """Compile a Python function: `@compile`, `@compile(backend="python")`, `compile(f)`.

    Options: `target=` (backend "tvm": "llvm", "native", "cuda", "cuda -arch=sm_90", a dict
    or a `tvm.target.Target`; default $MYIR_TARGET, else "llvm"), `optimize=False` (skip the
    optimizer, for debugging), `fastmath=True` (let the optimizer reassociate, collect terms
    and cancel, as real algebra allows: results round differently; `passes/fastmath.py`)."""
    if fn is None:
        return lambda f: _compiled(f, backend, (), options)
    return _compiled(fn, backend, (), options)


def _compiled(fn, backend: str | None, transforms: tuple, options: dict) -> CompiledFunction:
    """`fn` compiled with `transforms` applied last.  A function compiled already (`grad(f)`,
    `compile(f)`) is recompiled from its Python function: its own transforms come first, and
    its backend and options hold unless given again."""
    if isinstance(fn, custom_grad):
        fn = fn.__myir_function__
    if isinstance(fn, CompiledFunction):
        return CompiledFunction(fn.fn, backend or fn.backend, fn.__myir_transforms__ + transforms,
                                **{**fn.options, **options})
    if not isinstance(fn, types.FunctionType):
        caller = transforms[-1].kind if transforms else "compile"
        what, hint = _not_a_function(fn)
        raise MyirError(f"{caller}() takes a Python function or lambda defined in source, "
                        f"not {what}", hint=hint)
    return CompiledFunction(fn, backend, transforms, **options)


def _differentiated(fn, wrt: tuple, with_value: bool, backend: str | None):
    return _compiled(fn, backend, (GradMacro(tuple(wrt) or (0,), with_value),), {})


def grad(fn, *wrt, backend: str | None = None):
    """The gradient of `fn`'s scalar output with respect to the parameters `wrt` (names or
    positions; the first parameter by default): one gradient, or a tuple for several.

    Outside compiled code this returns a compiled function; inside compiled code it is a
    macro the compiler expands, so `grad(grad(f))` and `grad` in a loop body work."""
    return _differentiated(fn, wrt, False, backend)


def value_and_grad(fn, *wrt, backend: str | None = None):
    """Like `grad`, but returns `(value, gradient)`."""
    return _differentiated(fn, wrt, True, backend)


grad.__myir_macro__ = "grad"
value_and_grad.__myir_macro__ = "value_and_grad"


def jvp(fn, primals, tangents, *, backend: str | None = None):
    """`(fn(*primals), J·tangents)`: the Jacobian-vector product of `fn` at `primals`, by
    forward mode (passes/forward.py), with JAX's signature: `primals` and `tangents` are
    tuples, each tangent of its primal's shape and dtype.

    Outside compiled code this compiles `fn`'s forward-mode program (once per argument
    signature) and runs it; inside compiled code it is a macro, like `grad`."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise MyirError("jvp() takes the tuple of the function's arguments and the tuple of "
                        "their tangents", _caller(), hint="write `jvp(f, (x,), (v,))`")
    count = len(inspect.signature(fn).parameters) if callable(fn) else len(primals)
    if len(primals) != count:    # the compiled program takes every parameter, as JAX's jvp
        raise MyirError(f"jvp(): {getattr(fn, '__name__', 'the function')}() takes {count} "
                        f"argument{'s' * (count != 1)}, and {len(primals)} primals were given",
                        _caller(), hint=f"give {count} primals and {count} tangents, one per "
                        "parameter")
    if len(primals) != len(tangents):
        raise MyirError(f"jvp() got {len(primals)} primals and {len(tangents)} tangents",
                        _caller(), hint="give one tangent per argument, in the same order")
    from myir import tree
    from myir.ir import tangents as check

    for i, (x, t) in enumerate(zip(primals, tangents)):
        for a, b in zip(tree.leaves(x), tree.leaves(t)) if tree.kind(x) is not tree.LEAF \
                else [(x, t)]:
            fx = check.of_value(a)
            problem = fx and check.mismatch(fx, check.of_value(b) or ((), np.dtype(object)), i)
            if problem:
                raise MyirError(problem[0], _caller(), hint=problem[1])
    return _jvp_function(fn, backend)(tuple(primals), tuple(tangents))


def _caller():
    """The location of the user's call of a function of this module."""
    from myir.errors import Location
    import linecache
    import sys

    frame = sys._getframe(2)
    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return Location(frame.f_code.co_filename, frame.f_lineno, len(text) - len(text.lstrip()) + 1)


_JVP_FUNCTIONS: dict = {}


def _jvp_function(fn, backend):
    """The compiled `lambda primals, tangents: jvp(fn, primals, tangents)`, one per function
    and backend."""
    key = (fn, backend)
    compiled = _JVP_FUNCTIONS.get(key)
    if compiled is None:
        compiled = _compiled(fn, backend, (JvpMacro(),), {})
        compiled._signature = inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for name in JvpMacro.takes])
        compiled._nparams = len(JvpMacro.takes)
        _JVP_FUNCTIONS[key] = compiled
    return compiled


def jacfwd(fn, *wrt, backend: str | None = None):
    """The Jacobian of `fn` with respect to the parameters `wrt` (names or positions; the
    first by default) by forward mode, one column per input element: shape `out.shape +
    in.shape`, as in JAX.  A compiled function outside compiled code, a macro inside."""
    return _compiled(fn, backend, (JacobianMacro("jacfwd", tuple(wrt) or (0,)),), {})


def jacrev(fn, *wrt, backend: str | None = None):
    """Like `jacfwd`, by reverse mode: one backpropagator call per output element."""
    return _compiled(fn, backend, (JacobianMacro("jacrev", tuple(wrt) or (0,)),), {})


def hessian(fn, *wrt, backend: str | None = None):
    """The Hessian of `fn`'s scalar output with respect to the parameters `wrt`: forward
    mode over the gradient (`jacfwd(grad(fn))`), shape `in.shape + in.shape`; for several
    parameters a tuple of tuples of blocks, as in JAX."""
    return _compiled(fn, backend, (JacobianMacro("hessian", tuple(wrt) or (0,)),), {})


def vectorize(fn, *, backend: str | None = None):
    """`fn`, a function of scalars, broadcast over arrays with numpy's broadcasting: the
    values and dtypes of `np.vectorize(fn)` (the output dtype is that of `fn`'s result, which
    inference knows from the inputs' dtypes; a function whose result type depends on the
    values is refused).  `fn` may branch, loop and call functions and closures.

    On the tvm backend the whole broadcast is one kernel, and `grad` through it is mixed
    mode: the kernel computes each element's partial derivatives by forward mode, and the
    gradient is the incoming sensitivity times them (passes/vectorize.py).  Inside compiled
    code `vectorize(f)(x, y)` is a macro; outside, or as a decorator, this returns a
    compiled function."""
    return _compiled(fn, backend, (VectorizeMacro(),), {})


vectorize.__myir_macro__ = "vectorize"
jvp.__myir_macro__ = "jvp"
jacfwd.__myir_macro__ = "jacfwd"
jacrev.__myir_macro__ = "jacrev"
hessian.__myir_macro__ = "hessian"


class custom_grad:
    """A function with a gradient rule of the user's, as JAX's `custom_vjp`:

        @myir.custom_grad
        def clip_gradient(x):
            return x

        @clip_gradient.defgrad
        def _(x, out, dout):            # the inputs, the output, the output's sensitivity
            return (np.clip(dout, -1.0, 1.0),)   # one sensitivity per input

    `grad` and `value_and_grad` use the rule, inside and outside compiled code; the rule is
    written in the subset and differentiated like any code where grad of grad needs it.
    Forward mode (`jvp`, `jacfwd`, `hessian`) takes its tangent from the rule too, by
    transposing it (passes/forward.py).  Called from Python, it is the function."""

    def __init__(self, fn):
        if not isinstance(fn, types.FunctionType):
            what, hint = _not_a_function(fn)
            raise MyirError(f"custom_grad() takes a Python function, not {what}", hint=hint)
        self.__myir_function__ = fn
        self.__myir_transforms__ = ()
        functools.update_wrapper(self, fn)

    def defgrad(self, rule):
        """Set the gradient rule `rule(inputs..., out, dout) -> (d input, ...)`; returns it."""
        if not isinstance(rule, types.FunctionType):
            what, hint = _not_a_function(rule)
            raise MyirError(f"defgrad() takes a Python function, not {what}", hint=hint)
        self.__myir_function__.__myir_grad_rule__ = rule
        return rule

    def __call__(self, *args, **kwargs):
        return self.__myir_function__(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<myir.custom_grad {self.__myir_function__.__qualname__}>"
