"""Values that graph constants hold besides Python and numpy ones: the environments that
carry a closure's gradient, the keys that name free variables in them, and the residual
stacks of loop gradients."""

from __future__ import annotations


class Env:
    """An immutable map from free variables (their `GradKey`s) to gradients: the gradient
    of a closure is the env of its free variables."""

    __slots__ = ("items",)

    def __init__(self, items=()):
        self.items = dict(items)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self.items.items())
        return f"Env({inner})"


NEWENV = Env()


class GradKey:
    """Names one free variable (a node of an enclosing graph) in gradient envs."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __repr__(self) -> str:
        return f"key:{self.node.debug.name or 'fv'}"


class _StackCell:
    """The mark that ends every cell of a residual stack (passes/ad.py) where the generated
    code does not keep stacks as lists (backends/python/codegen.py, `InPlace`): a non-empty
    stack is then the plain tuple `(top, rest, STACK_CELL)`, the cheapest allocation Python
    has (no `__init__` frame), and `stack_pop` is the cell itself (its first two items are
    `(top, rest)`).  The mark, which no program can reach, tells a cell from a tuple of the
    program's where values are walked without their types (`gadd`, `grad_zeros`, `tree`).
    Cells are never changed, so pushing shares the rest; every helper that walks a stack
    iterates, as a stack is as deep as its loop ran.  One instance, pickled as itself."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "STACK_CELL"

    def __reduce__(self) -> str:
        return "STACK_CELL"


STACK_CELL = _StackCell()


class _EmptyStack:
    """The empty residual stack, and the zero sensitivity of any stack; one instance,
    pickled as itself.  It is false and every cell true (as are the empty and non-empty
    lists that stand for stacks elsewhere), so the generated code tests a stack for
    emptiness as `not s`, without a call."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "EMPTY_STACK"

    def __reduce__(self) -> str:
        return "EMPTY_STACK"


EMPTY_STACK = _EmptyStack()


def stack_push(s, x) -> tuple:
    """The stack s with x on top."""
    return (x, s, STACK_CELL)


def is_stack_cell(x) -> bool:
    """Whether x is a non-empty residual stack held as cells."""
    return type(x) is tuple and len(x) == 3 and x[2] is STACK_CELL


def is_stack(x) -> bool:
    """Whether x is a residual stack held as cells."""
    return x is EMPTY_STACK or is_stack_cell(x)


class GradMacro:
    """`grad(f, ...)` / `value_and_grad(f, ...)` written inside compiled code: applied to the
    function, it stands for that function's gradient until `passes.expand` replaces it."""

    __slots__ = ("wrt", "with_value")

    def __init__(self, wrt: tuple, with_value: bool):
        self.wrt = wrt
        self.with_value = with_value

    takes = None                        # the parameters of the function it is applied to

    @property
    def kind(self) -> str:
        return "value_and_grad" if self.with_value else "grad"

    def __repr__(self) -> str:
        return f"{self.kind}[{', '.join(map(repr, self.wrt))}]"


class JvpMacro:
    """`jvp(f, primals, tangents)` written inside compiled code: applied to the function, it
    stands for `lambda primals, tangents: (f(*primals), J·tangents)` until `passes.expand`
    replaces it (by passes/forward.py's transform)."""

    __slots__ = ()
    kind = "jvp"
    takes = ("primals", "tangents")     # what the function it stands for takes

    def __repr__(self) -> str:
        return "jvp"


class JacobianMacro:
    """`jacfwd(f, ...)`, `jacrev(f, ...)` or `hessian(f, ...)` written inside compiled code:
    applied to the function, it stands for the function's Jacobian (or Hessian) with respect
    to the parameters `wrt` until `passes.expand` replaces it."""

    __slots__ = ("kind", "wrt")
    takes = None                        # the parameters of the function it is applied to

    def __init__(self, kind: str, wrt: tuple):
        self.kind = kind
        self.wrt = wrt

    def __repr__(self) -> str:
        return f"{self.kind}[{', '.join(map(repr, self.wrt))}]"


class VectorizeMacro:
    """`vectorize(f)` written inside compiled code (or `@myir.vectorize` on a function):
    applied to the scalar function, it stands for `lambda *xs: vectorize_call(f, *xs)` until
    `passes.expand` replaces it by that graph with its mixed-mode gradient rule
    (passes/vectorize.py)."""

    __slots__ = ()
    kind = "vectorize"
    takes = None                        # the parameters of the function it is applied to

    def __repr__(self) -> str:
        return "vectorize"
