"""What parsing a function reads, as one hash: the part of a saved program's key that says
which Python it was compiled from (`myir/saved.py`).

The parser reads a function's source text and the values of the names it uses that are not
its own: module globals and builtins, the cells of a closure made in plain Python, the
default values of its parameters, attributes of modules it reaches — and the same again for
every function it calls.  The fingerprint hashes all of that from the function objects
alone, without parsing, so a process can find a program another process compiled before it
does any of the work.

It over-approximates rather than miss anything the parser reads: every name of a function's
code (`co_names` holds global and attribute names alike) is looked up and hashed, and so is
the whole text of the function's source file (what `inspect`, and so the parser, reads; a
file edited since it was imported is read anew).  A value the parser rejects is hashed as its
type only: a program that compiled cannot have used it.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import linecache
import os
import types

import numpy as np

from frontend import resolve
from myir.ir.analysis import strongly_connected_components
from myir.ir.primitives import Primitive

# Functions of myir itself (`myir.grad`, ...) are part of myir's version, hashed apart.
_OWN_PACKAGES = {"myir", "frontend", "passes", "backends"}
_SCALARS = (bool, int, float, complex, str, type(None), type(Ellipsis))
_MODULE_DEPTH = 3   # `a.b.c.f`: how deep into modules reached as attributes


def fingerprint(fn) -> str:
    """A hex digest of everything `parse(fn)` reads, for a plain Python function."""
    return fingerprints(fn)[fn]


def _walk(fn) -> "_Fingerprint":
    walk = _Fingerprint()
    walk.function(fn)
    while walk.pending:
        walk.describe(walk.pending.pop())
    return walk


def sources(fn) -> tuple[dict[str, str], dict[tuple[str, int], str]]:
    """What a process without fn's files needs to compile it, or to fingerprint it as this
    one does: the text of every source file the parser reads for `fn` (its own and its
    callees'), by file name (`provide_sources`), and the file of every function it reaches,
    by (qualified name, first line) (`restore_filenames`: cloudpickle ships a function by
    value with its code's file name replaced by `<dynamic-code>`, and the parser finds a
    definition in its file)."""
    walk = _walk(fn)
    files = {(f.__qualname__, f.__code__.co_firstlineno): f.__code__.co_filename
             for f in walk.callees}
    return walk.sources, files


def restore_filenames(fn, files: dict[tuple[str, int], str]) -> None:
    """Give `fn` and the functions it reaches (`_walk`, as `sources` found them) back the
    file names `sources` recorded where a pickle replaced them."""
    for f in _walk(fn).callees:
        code = f.__code__
        filename = files.get((f.__qualname__, code.co_firstlineno))
        if filename is not None and code.co_filename != filename:
            f.__code__ = _with_filename(code, filename)


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def provide_sources(texts: dict[str, str]) -> None:
    """Make files that are not on this machine readable to the parser and the fingerprint,
    with the texts `sources` gave elsewhere: they go into `linecache`, where `inspect` reads
    source, without a modification time, so `linecache.checkcache` keeps them.  A file that
    is here is read from here, as the functions imported from it were."""
    for filename, text in texts.items():
        if not os.path.exists(filename):
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)


def fingerprints(fn) -> dict:
    """The fingerprints of fn and of every function it reaches, in time linear in their
    number (the parser checks each callee's: hashing each one's callees anew would be
    quadratic in a chain of calls).

    A function's own description names each function it refers to by position; a
    fingerprint hashes the description with the fingerprints of the functions it names.
    Functions calling each other in a cycle are hashed together: their descriptions in a
    canonical order, each naming the others of the cycle by position in it."""
    walk = _walk(fn)
    stamps: dict = {}
    for component in strongly_connected_components(walk.callees):
        if len(component) == 1 and component[0] not in walk.callees[component[0]]:
            f = component[0]
            stamps[f] = _digest(walk.lines[f], walk.callees[f], stamps, {})
            continue
        component.sort(key=lambda f: walk.lines[f])
        inside = {f: f"#{i}" for i, f in enumerate(component)}
        together = _digest("\n".join(_digest(walk.lines[f], walk.callees[f], stamps, inside)
                                     for f in component), [], stamps, inside)
        stamps.update((f, _digest(f"{together} {inside[f]}", [], stamps, inside))
                      for f in component)
    return stamps


def _digest(text: str, callees: list, stamps: dict, inside: dict) -> str:
    names = (inside.get(f) or stamps[f] for f in callees)
    return hashlib.sha256("\n".join((text, *names)).encode()).hexdigest()


class _Fingerprint:
    """Each reachable function's own description (`lines`) and the functions it refers to
    (`callees`, in the order the description names them)."""

    def __init__(self):
        self.lines: dict = {}       # function -> its description
        self.callees: dict = {}     # function -> the functions its description names
        self.pending: list = []
        self.texts: dict[str, str] = {}      # file -> hash of its text
        self.sources: dict[str, str] = {}    # file -> its text
        self.current: list = []     # the callees of the function being described

    def function(self, fn) -> str:
        """A reference to a user function, to be described once (functions may recurse)."""
        if fn not in self.callees:
            self.callees[fn] = []
            self.pending.append(fn)
        self.current.append(fn)
        return f"@{len(self.current) - 1}"

    def describe(self, fn) -> None:
        self.current = self.callees[fn]
        code = fn.__code__
        # The name and positions in the text tell apart functions on one line (lambdas).
        lines = [f"def {fn.__qualname__} {code.co_filename}:{code.co_firstlineno} "
                 f"{code.co_qualname} {list(text_positions(code))} "
                 f"{self.text(code.co_filename, fn.__globals__)} "
                 f"{hashlib.sha256(code.co_code).hexdigest()}"]
        names = _names(code)
        for name in sorted(names):
            try:
                value = resolve.lookup_global(name, fn.__globals__)
            except KeyError:
                continue
            lines.append(f"  global {name} = {self.value(value, names)}")
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                contents = self.value(cell.cell_contents, names)
            except ValueError:      # a cell not yet assigned
                contents = "<empty>"
            lines.append(f"  cell {name} = {contents}")
        for value in fn.__defaults__ or ():
            lines.append(f"  default {self.value(value, names)}")
        for name, value in sorted((fn.__kwdefaults__ or {}).items()):
            lines.append(f"  default {name} = {self.value(value, names)}")
        self.lines[fn] = "\n".join(lines)

    def text(self, filename: str, module_globals: dict) -> str:
        if filename not in self.texts:
            linecache.checkcache(filename)
            text = "".join(linecache.getlines(filename, module_globals))
            self.sources[filename] = text
            self.texts[filename] = hashlib.sha256(text.encode()).hexdigest()
        return self.texts[filename]

    def value(self, value, names: set, depth: int = 0) -> str:
        """A value's description, as precise as the parser's use of it."""
        if isinstance(value, _SCALARS):
            return f"{type(value).__name__} {value!r}"
        if isinstance(value, np.generic):
            return f"{value.dtype.str} {value.tobytes().hex()}"
        if isinstance(value, np.ndarray):
            data = repr(value.tolist()).encode() if value.dtype.hasobject \
                else np.ascontiguousarray(value).tobytes()
            return f"array {value.dtype.str} {value.shape} {hashlib.sha256(data).hexdigest()}"
        if isinstance(value, tuple):
            return f"({', '.join(self.value(v, names, depth) for v in value)})"
        if isinstance(value, Primitive):
            return f"primitive {value.name}"
        if isinstance(value, types.ModuleType):
            return self.module(value, names, depth)
        if isinstance(value, type):
            return f"type {value.__module__}.{value.__qualname__}"
        if isinstance(value, types.BuiltinFunctionType) \
                and getattr(builtins, value.__name__, None) is value:
            return f"builtin {value.__name__}"
        try:
            inner = getattr(value, "__myir_function__", None)
        except Exception:   # noqa: BLE001 - an object with a strange __getattr__
            inner = None
        if inner is not None:       # compiled: its function and transforms are what is read
            transforms = getattr(value, "__myir_transforms__", ())
            return f"compiled {transforms!r} {self.value(inner, names, depth)}"
        if isinstance(value, types.FunctionType):
            if value.__module__.partition(".")[0] in _OWN_PACKAGES:
                return f"myir {value.__module__}.{value.__qualname__}"
            return f"function {self.function(value)}"
        return f"opaque {type(value).__module__}.{type(value).__qualname__}"

    def module(self, module: types.ModuleType, names: set, depth: int) -> str:
        """np and math resolve through myir's own tables; any other module through its
        attributes (those named in the code)."""
        if resolve.namespace_of(module) is not None or depth == _MODULE_DEPTH:
            return f"module {module.__name__}"
        attributes = (f"{n}: {self.value(getattr(module, n), names, depth + 1)}"
                      for n in sorted(names) if hasattr(module, n))
        return f"module {module.__name__} {{{', '.join(attributes)}}}"


@functools.lru_cache(maxsize=4096)
def text_positions(code: types.CodeType) -> tuple[tuple[int, int, int, int], ...]:
    """Where the code's instructions are in its source text: (line, col, end_line, end_col)
    of each, leaving out the empty spans Python gives instructions of no source text, each
    once (most are shared by several instructions), in the order first met.  (Cached: the
    fingerprint and the parser's search for the definition both ask.)"""
    return tuple(dict.fromkeys([
        (line, col, end_line, end_col) for line, end_line, col, end_col in code.co_positions()
        if end_col is not None and line is not None and end_line is not None
        and col is not None and (line != end_line or col != end_col)]))


def _names(code: types.CodeType) -> set[str]:
    """The names a function's code and the code of the functions nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names
