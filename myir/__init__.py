"""myir: a compiler for differentiable Python.

    import myir

    @myir.compile
    def f(x, n): ...

The IR is imported before the API so no package sees a half-initialised `myir`.
"""

from myir.errors import Location, MyirError, MyirSyntaxError, MyirTypeError
from myir import ir
from myir.api import CompiledFunction, Lowered, compile, grad, value_and_grad
from myir.api import custom_grad, hessian, jacfwd, jacrev, jvp, vectorize

__version__ = "0.1.0"

__all__ = ["compile", "grad", "value_and_grad", "jvp", "jacfwd", "jacrev", "hessian", "custom_grad", "vectorize", "CompiledFunction", "Lowered", "MyirError", "MyirSyntaxError",
           "MyirTypeError", "Location", "ir"]
