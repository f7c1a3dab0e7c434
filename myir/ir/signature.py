"""Binding a call's arguments onto a signature, as CPython does.

One binder for the two kinds of callee a program names: primitives (`Primitive.bind`:
`np.sum(x, axis=0)`) and functions written in the subset (`Parser.bind_graph`).  A
signature is the parameters' names and the defaults of those that have one; binding
places positional arguments first, then keywords by name, then the defaults, and says
what is wrong in CPython's words, through the caller's `error`, which raises its located
error.
"""

from __future__ import annotations

from typing import Callable

_MISSING = object()


def bind_arguments(name: str, params: tuple | list, defaults: dict, args: list, kwargs: dict,
         error: Callable[[str], None]) -> list:
    """The arguments of a call of `name(params...)`, one per parameter."""
    bound = list(args[:len(params)]) + [_MISSING] * (len(params) - len(args))
    for key, value in kwargs.items():     # keywords first, as CPython checks them
        if key not in params:
            error(f"{name}() got an unexpected keyword argument '{key}'")
        i = params.index(key)
        if bound[i] is not _MISSING:
            error(f"{name}() got multiple values for argument '{key}'")
        bound[i] = value
    if len(args) > len(params):
        error(_too_many(name, len(params) - len(defaults), len(params), len(args)))
    for i, value in enumerate(bound):
        if value is _MISSING:
            if params[i] not in defaults:
                error(f"{name}() missing required argument '{params[i]}'")
            bound[i] = defaults[params[i]]
    return bound


def _too_many(name: str, required: int, most: int, given: int) -> str:
    takes = str(most) if required == most else f"from {required} to {most}"
    plural = "s" if most != 1 or required != most else ""
    return f"{name}() takes {takes} positional argument{plural} but {given} " \
           f"{'was' if given == 1 else 'were'} given"


def shown_parameters(params: tuple | list, defaults: dict, show: Callable = repr) -> str:
    """The parameters as a call would pass them: `x, y` or `x, axis=None`."""
    return ", ".join(f"{p}={show(defaults[p])}" if p in defaults else p for p in params)
