"""Python source → graph IR.

One `Block` per straight-line stretch of code: a graph plus the variable bindings made in
it.  Reading a variable walks the chain of lexically enclosing blocks (reads from an
enclosing graph become free variables).  Control flow becomes graphs:

* `if` without `return`/`break`/`continue`/`raise`/`assert` inside is an *expression*: both
  branches are graphs returning the variables they assign, called through
  `switch(cond, then, else)()`, and the block goes on with the results.
* `if` with one of those inside ends its block with a *tail call* of the switch; the code after
  it becomes a join graph whose parameters are the variables the branches assign.
* `while`/`for` is a loop graph called from the block: it takes the loop-carried variables,
  tests the condition and either runs the body (which ends by calling the loop graph again, in
  tail position) or returns the carried variables.  `break` returns them early, `continue`
  calls the loop graph.  A loop with a `return` inside returns `(True, value, carried)` from
  there and `(False, UNBOUND, carried)` from its other exits, and the caller returns in turn.
* Nested `def` and `lambda` are graphs nested in the block that defines them; they capture the
  values of free variables at definition (see `_check_captures`).
"""

from __future__ import annotations

import ast
import builtins
import collections
import copy
import dataclasses
import functools
import inspect
import threading
import types
import weakref
from dataclasses import dataclass, field

import numpy as np

from frontend import builtin_functions, ownership, resolve
from frontend.fingerprint import fingerprints, text_positions
from myir import tree
from myir.errors import Location, MyirSyntaxError
from myir.ir.analysis import is_nested_in, primitive_name, scope, switch_call
from myir.ir.graph import Apply, Constant, Graph, Node, is_graph_constant, shared_graphs
from myir.ir.signature import bind_arguments, shown_parameters
from myir.ir.primitives import PRIMITIVES, UNBOUND, Primitive
from myir.ir.values import GradMacro, JacobianMacro, JvpMacro, VectorizeMacro
from passes.raising import evaluates, raising_node

P = PRIMITIVES


class MaybeUnbound:
    """A variable bound on some paths only (assigned in one branch, or only inside a loop):
    `node` holds its value or UNBOUND, and reading it checks, raising UnboundLocalError
    exactly where CPython would."""

    def __init__(self, node: Node):
        self.node = node


@dataclass(frozen=True)
class Macro:
    """A function of myir's API that compiled code expands instead of calling (`grad`)."""

    name: str


@dataclass
class Block:
    graph: Graph
    parent: "Block | None"
    env: dict = field(default_factory=dict)


@dataclass
class Loop:
    """The loop being parsed: its graph, carried variable names, and how to pack an exit."""

    graph: Graph
    carried: list[str]
    counter: Node | None          # the iteration index parameter of a `for` loop
    has_return: bool
    length: Node | None           # how many steps a `for` loop makes


# ----------------------------------------------------------------------------- source


@dataclass
class Source:
    filename: str
    globals: dict

    def loc(self, node: ast.AST) -> Location:
        end = getattr(node, "end_col_offset", None)
        same_line = getattr(node, "end_lineno", None) == node.lineno
        return Location(self.filename, node.lineno, node.col_offset + 1,
                        end + 1 if end is not None and same_line else None)


_lock = threading.RLock()
_parsed = weakref.WeakKeyDictionary()  # function -> (its fingerprint when parsed, its graph)


def parse(fn) -> Graph:
    """The graph of a Python function, parsed again only when something it reads has
    changed (`frontend.fingerprint`: its source, the globals, cells and defaults it uses,
    and those of the functions it calls).  So a new compile sees globals as they are now,
    as a fresh process would, and a program saved to disk (`myir/saved.py`) always is
    what a fresh process would compile from the same values.  Thread-safe.

    The functions it calls are parsed one after another from a worklist, not by recursion:
    a callee's graph is made with its parameters and defaults when a call to it is first
    met (all a call site needs), and its body parsed later, so a chain of calls as deep as
    the program is costs no Python stack."""
    with _lock, shared_graphs():    # (kept for every compile: passes edit copies)
        return _Worklist().run(resolve.unwrap_function(fn))


class _Worklist:
    """The functions met while parsing one program whose bodies are still to be parsed."""

    def __init__(self):
        self.pending: list[tuple[FunctionParser, Block]] = []
        self.made: list = []    # functions whose graphs this parse made
        self.stamps: dict = {}  # function -> its fingerprint
        self.quiet: set = set()  # functions that reach no print (`_code_prints`)
        self.files: dict[str, tuple[str, list]] = {}    # see `source`

    def run(self, fn) -> Graph:
        try:
            graph = self.graph_of(fn)
            while self.pending:
                parser, block = self.pending.pop()
                parser.body(block)
        except BaseException:
            for made in self.made:  # half-parsed: none may be reused
                del _parsed[made]
            raise
        return graph

    def source(self, fn) -> tuple[str, list]:
        """The file of fn's source and its lines (`inspect.getsourcefile`, `findsource`),
        found once per file in a parse: for a module of many functions, the file system
        asked about each one cost as much as parsing its body."""
        code = fn.__code__
        found = self.files.get(code.co_filename)
        if found is None or code.co_firstlineno > len(found[1]):  # (findsource's error)
            found = self.files[code.co_filename] = (
                inspect.getsourcefile(fn) or code.co_filename, _source_lines(fn))
        return found

    def graph_of(self, fn) -> Graph:
        """fn's graph: the one parsed before if nothing it reads has changed since, or a new
        one, its body left to `run`."""
        stamp = None
        if isinstance(fn, types.FunctionType):
            if fn not in self.stamps:
                self.stamps.update(fingerprints(fn))
            stamp = self.stamps[fn]
        cached = _parsed.get(fn)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        parser = _function_parser(fn, self)
        _parsed[fn] = (stamp, parser.graph)   # calls of fn, recursive ones too, refer to it
        rule = getattr(fn, "__myir_grad_rule__", None)
        if rule is not None:    # myir.custom_grad: the rule's graph, for passes.ad
            parser.graph.custom_grad = self.graph_of(rule)
        self.made.append(fn)
        self.pending.append((parser, parser.header()))
        return parser.graph


def _function_parser(fn, worklist: _Worklist) -> "FunctionParser":
    filename, lines = worklist.source(fn)
    target = find_definition(fn, filename, lines)
    if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn) \
            or inspect.isasyncgenfunction(fn):
        kind = "generator" if inspect.isgeneratorfunction(fn) else "async"
        wanted = (ast.Yield, ast.YieldFrom) if kind == "generator" else ast.AsyncFunctionDef
        node = next(n for n in ast.walk(target) if isinstance(n, wanted))
        raise MyirSyntaxError(f"{kind} functions are not supported",
                              Source(filename, {}).loc(node),
                              "use a plain `def` that returns its result")
    names = fn.__globals__
    if fn.__closure__:  # a closure made in plain Python: its captured values are constants
        captured = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
        names = collections.ChainMap(captured, fn.__globals__)
    source = Source(filename, names)
    graph = Graph(fn.__name__, None, source.loc(target))
    return FunctionParser(source, None, target, graph, worklist, fn)


JACOBIANS = ("jacfwd", "jacrev", "hessian")


def wrap_macros(graph: Graph, specs, defaulted: tuple = (), constants: dict = {}) -> Graph:
    """A graph calling `spec_n(...spec_1(graph))` on graph's parameters: what
    `myir.grad(f)` means as a function, expanded later like `grad` in compiled code.  The
    parameters named in `defaulted` (a call left them at f's defaults) get the defaults
    themselves: a default function (`act=np.tanh`) is then known when compiling, as a
    gradient needs it (passes/expand.py); so do those at the positions of `constants` (the
    call's flags, `myir.api.static_arguments`) get those values."""
    kind = "_".join(s.kind for s in reversed(specs))
    w = Graph(f"{kind}_{graph.name}", None, graph.location)
    if specs[-1].takes:     # jvp: (primals, tangents)
        params = [w.add_parameter(name, graph.location) for name in specs[-1].takes]
    else:
        params = [w.add_parameter(p.debug.name, p.location) for p in graph.parameters]
        w.defaults = dict(graph.defaults)
    fn: Node = Constant(graph)
    for spec in specs:
        fn = w.apply(Constant(spec), fn, location=graph.location)
    args = [graph.defaults[p.debug.name] if p.debug.name in defaulted
            else Constant(constants[i]) if i in constants else p for i, p in enumerate(params)]
    w.output = w.apply(fn, *args, location=graph.location)
    return w


def find_definition(fn, filename: str, lines: list) -> ast.AST:
    """The `def` or `lambda` of `fn` in its source file (its `lines`), found by its code
    object: of the definitions with the code's name and first line, the one whose text
    holds every position of the code's instructions while no function nested in it holds
    any.  A line can hold several lambdas and a file several definitions of one name; only
    the code's own positions tell them apart.  A function whose definition cannot be found
    exactly (a file changed since it was imported) is refused."""
    code = fn.__code__
    name = getattr(fn, "__qualname__", fn.__name__)
    positions = text_positions(code)
    span = _span(positions)
    found = [n for n in _definitions(filename, lines, code.co_name == "<lambda>").get(
                 (code.co_name, code.co_firstlineno), ())
             if (span is None or _holds(n, span))
             and not any(_holds(body, p) for body in _nested_bodies(n) for p in positions)]
    # A function whose code is all one nested lambda (`lambda x: lambda y: y`) is held by
    # that lambda too: the outermost definition left is the one.
    outermost = [n for n in found if not any(m is not n and _within(n, m) for m in found)]
    if len(outermost) == 1:
        return outermost[0]
    where = Location(filename, code.co_firstlineno, 1)
    if not outermost:
        raise MyirSyntaxError(
            f"cannot find the source of {name!r} exactly: {filename} no longer holds the "
            "definition the function was made from", where,
            "the file changed since it was imported: import it again (importlib.reload) "
            "or restart")
    # Only code without column positions leaves several (python -X no_debug_ranges).
    raise MyirSyntaxError(f"cannot tell which of {len(outermost)} definitions on this line "
                          f"is {name!r}: Python runs without column positions", where,
                          "give each function its own line, or run Python without "
                          "-X no_debug_ranges / PYTHONNODEBUGRANGES")


def _source_lines(fn) -> list[str]:
    """The lines of the file holding fn's source, as `linecache` holds them; refused if
    there are none."""
    try:
        return inspect.findsource(fn)[0]
    except (OSError, TypeError) as e:
        name = getattr(fn, "__qualname__", fn.__name__)
        raise MyirSyntaxError(
            f"cannot read the source of {name!r}: {e}",
            hint="myir compiles functions defined in files (or notebook cells); define the "
                 "function with `def` in a file") from None


# filename -> (its lines, as `linecache` holds them, its tree, and its definitions: those
# of `def`, and those of lambdas once asked for), for 32 files
_DEFINITIONS: dict[str, list] = {}


def _definitions(filename: str, lines: list, lambdas: bool = False
                 ) -> dict[tuple[str, int], list[ast.AST]]:
    """The function definitions of a source file's `lines` by (name, first line) as Python
    gives them to code objects (`co_name`, `co_firstlineno`: a decorated function starts at
    its first decorator): its `def`s, or with `lambdas` its lambdas.  Cached while
    `linecache` holds the same list of lines (it makes a new one when the file changes):
    every function of a file is found in one parse of it, and without joining or hashing
    its text again per function, which cost time in the square of the file's length for a
    file of many functions.  A `def` is a statement, found among statements alone; the
    lambdas, anywhere in an expression, are looked for in the whole tree when one is
    wanted (walking every node of a module of many small functions was half its parse)."""
    cached = _DEFINITIONS.get(filename)
    if cached is None or cached[0] is not lines:
        if len(_DEFINITIONS) >= 32:
            _DEFINITIONS.clear()
        try:
            tree = ast.parse("".join(lines), filename)
        except SyntaxError:     # edited since it was imported: nothing is found exactly
            tree = ast.Module([], [])
        cached = _DEFINITIONS[filename] = [lines, tree, _statement_definitions(tree), None]
    if not lambdas:
        return cached[2]
    if cached[3] is None:
        cached[3] = _lambda_definitions(cached[1])
    return cached[3]


def _statement_definitions(tree: ast.Module) -> dict[tuple[str, int], list[ast.AST]]:
    found: dict[tuple[str, int], list[ast.AST]] = {}
    statements = list(tree.body)
    for node in statements:     # (grows as it goes)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.setdefault((node.name, first), []).append(node)
        for field in _STATEMENT_LISTS:  # (an except clause or a case holds statements too)
            statements += getattr(node, field, ())
    return found


_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def _lambda_definitions(tree: ast.Module) -> dict[tuple[str, int], list[ast.AST]]:
    found: dict[tuple[str, int], list[ast.AST]] = {}
    nodes = [tree]
    for node in nodes:      # `ast.walk`'s order, without its generators
        nodes.extend(child_nodes(node))
        if isinstance(node, ast.Lambda):
            found.setdefault(("<lambda>", node.lineno), []).append(node)
    return found


def _nested_bodies(node: ast.AST):
    """The bodies of the functions defined inside `node`, as nodes with a text span."""
    for inner in _subtree(node):
        if inner is node:
            continue
        if isinstance(inner, ast.Lambda):
            yield inner.body
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first, last = inner.body[0], inner.body[-1]
            yield ast.Pass(lineno=first.lineno, col_offset=first.col_offset,
                           end_lineno=last.end_lineno, end_col_offset=last.end_col_offset)


def _holds(node: ast.AST, position: tuple) -> bool:
    """Whether the text of `node` holds `position` (line, col, end_line, end_col)."""
    line, col, end_line, end_col = position
    return (node.lineno, node.col_offset) <= (line, col) \
        and (end_line, end_col) <= (node.end_lineno, node.end_col_offset)


def _span(positions: tuple) -> tuple | None:
    """The smallest position holding every one of `positions` (a text holds them all if
    and only if it holds it), or None if there are none."""
    if not positions:
        return None
    return (*min(p[:2] for p in positions), *max(p[2:] for p in positions))


def _within(inner: ast.AST, outer: ast.AST) -> bool:
    return _holds(outer, (inner.lineno, inner.col_offset, inner.end_lineno, inner.end_col_offset))


# ----------------------------------------------------------------------------- scoping


_TERMINATORS = (ast.Return, ast.Break, ast.Continue, ast.Raise, ast.Assert)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, without its generators and without the
    operators and expression contexts (`Load()`), which have no position and which no
    question asked of a walk (here, and in the python backend's `module_code`) is about:
    walking the AST was most of the parse of a module of many small functions, and those
    were a third of its nodes."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = () if kind is ast.Constant else \
            tuple(f for f in kind._fields if f not in _NOT_CHILDREN)
    children = []
    for field in fields:
        value = getattr(node, field, None)
        if type(value) is list:
            children += [v for v in value if isinstance(v, ast.AST)]
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


# The fields of AST nodes that hold no node but an operator or a context (or a name, a
# number, a flag), and each kind's other fields.
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "id", "arg", "attr", "name", "kind",
                           "type_comment", "conversion", "level", "module", "is_async"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


@functools.lru_cache(maxsize=1024)
def _subtree(node: ast.AST) -> tuple[ast.AST, ...]:
    """`node` and every AST node in it (`child_nodes`'), in `ast.walk`'s order: one walk
    of a function answers all the questions the parser asks of its whole text (its nested
    definitions, its prints, the names it reads)."""
    found = [node]
    for inner in found:     # grows as it goes: breadth first, as ast.walk
        found.extend(child_nodes(inner))
    return tuple(found)


def _walk_same_function(nodes):
    """AST nodes in statements `nodes`, not descending into nested functions or classes."""
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(child_nodes(node)):
            if not isinstance(child, _SCOPES):
                stack.append(child)
            elif not isinstance(child, ast.Lambda):
                yield child  # the definition binds its name here


def _called_text(func: ast.expr) -> str:
    """`ast.unparse(func)`, the function of a call as the program writes it, without
    unparse's visitor for a name or a dotted name (`np.sin`), the function of most calls."""
    names = []
    node = func
    while type(node) is ast.Attribute:
        names.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return ast.unparse(func)
    names.append(node.id)
    return ".".join(reversed(names))


def _loop_else_as_flag(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """`stmts` with each `for`/`while` loop's `else` written as Python runs it: a hidden
    flag (not an identifier, so no user name) set by each `break` of the loop, and the
    `else` code after the loop under `if not flag:`.  The code is then where its `break`,
    `continue` and `return` mean what they do in the `else`: those of the enclosing loop or
    function.  Rewrites the statements of one function in place, idempotently (a function's
    source is parsed again for each signature)."""
    out = []
    for s in stmts:
        if isinstance(s, (ast.If, ast.For, ast.While)):
            s.body, s.orelse = _loop_else_as_flag(s.body), _loop_else_as_flag(s.orelse)
        if not isinstance(s, (ast.For, ast.While)) or not s.orelse:
            out.append(s)
            continue
        flag = f"broke@{s.lineno}:{s.col_offset}"

        def at(node, s=s):
            return ast.fix_missing_locations(ast.copy_location(node, s))

        def set_flag(body, flag=flag, at=at):
            result = []
            for t in body:
                if isinstance(t, ast.Break):
                    result.append(at(ast.Assign([ast.Name(flag, ast.Store())],
                                                ast.Constant(True))))
                elif isinstance(t, ast.If):
                    t.body, t.orelse = set_flag(t.body), set_flag(t.orelse)
                result.append(t)
            return result

        s.body = set_flag(s.body)
        otherwise = at(ast.If(ast.UnaryOp(ast.Not(), ast.Name(flag, ast.Load())), s.orelse, []))
        s.orelse = []
        out += [at(ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(False))), s, otherwise]
    return out


# The hidden local variable holding the last `print` a function ran: each print waits for the
# one before it, so prints run in program order; branches and loops carry it like any local.
PRINTED = "print()"


def _prints(node: ast.AST, fn_globals: dict, quiet: set) -> bool:
    """Whether the function `node` calls print(), directly or through the module-level
    functions it calls by name (read from their code objects: no source is parsed);
    `quiet`: functions known not to (`_code_prints`)."""
    names = set()
    for sub in _subtree(node):
        if _is_print(sub):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            names.add(sub.func.id)
    return _code_prints([resolve.unwrap_function(fn_globals.get(n)) for n in names], quiet)


def _shown_default(node) -> str:
    """A parameter's default as a signature shows it: its value, or `...` where it is
    computed."""
    return repr(node.value) if isinstance(node, Constant) and node.value is not UNBOUND \
        else "..."


def _code_prints(fns: list, quiet: set) -> bool:
    """Whether any of `fns` names print in its code, or any function it names does, and so
    on, skipping the functions of `quiet`.  A search that finds none adds every function
    it met to `quiet`: none of them reaches print either, so a parse that asks for each
    function of a chain of calls walks the chain once, not once per function."""
    seen: set = set()
    stack = list(fns)
    while stack:
        fn = stack.pop()
        if not isinstance(fn, types.FunctionType) or fn in seen or fn in quiet:
            continue
        seen.add(fn)
        codes = [fn.__code__]
        names = set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        if "print" in names:
            return True
        stack.extend(resolve.unwrap_function(fn.__globals__.get(n)) for n in names)
    quiet.update(seen)
    return False


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "print"


def _assigned_names(nodes, updates: bool = True) -> list[str]:
    """Names bound in these statements (assignment, augmented assignment, for target, def),
    with `updates` the names updated in place (`y[i] = v` binds `y` to the updated value,
    `xs.append(v)` binds xs to a new list),
    and `PRINTED` where they print or call a function by name (it may print: a function that
    prints passes its last print on through its branches and loops, see `print_call`)."""
    names: dict[str, None] = {}
    comprehension_targets: set[int] = set()  # met before their names: the walk is preorder
    for node in _walk_same_function(nodes):
        kind = type(node)   # (by kind first: this walks every node of every function)
        if kind is ast.Name:
            if isinstance(node.ctx, ast.Store) and id(node) not in comprehension_targets:
                names[node.id] = None
        elif kind is ast.Call:
            if updates and _is_list_update(node) and isinstance(node.func.value, ast.Name):
                names[node.func.value.id] = None   # `xs.append(v)` binds xs to a new list
            elif isinstance(node.func, ast.Name):   # (print, or a function that may print)
                names[PRINTED] = None
        elif kind is ast.Subscript:
            if updates and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name):
                    names[node.value.id] = None
                elif isinstance(node.value, ast.Subscript) \
                        and isinstance(node.value.value, ast.Name):    # `y[i][j] = v`
                    names[node.value.value.id] = None
        elif kind is ast.comprehension:
            comprehension_targets.update(id(n) for n in _subtree(node.target))
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            names[node.name] = None
    return list(names)


def _contains(nodes, kinds, into_loops: bool = True) -> bool:
    """Whether statements contain a node of `kinds` (not looking into nested functions; with
    into_loops=False, not into nested loops either: for `break` and `continue`)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if not into_loops and isinstance(node, (ast.While, ast.For)):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _appended_once(s: ast.For) -> list[str]:
    """The lists a `for` loop appends one item to at every step: `xs.append(v)` a statement
    of the body itself (not under an `if` or in a nested loop), the body changing `xs` in
    no other way, and every step running to its end (no `break`, `continue` or `return`).
    After the loop such a list has as many more items as the loop had steps."""
    if s.orelse or _contains(s.body, (ast.Break, ast.Continue), into_loops=False) \
            or _contains(s.body, (ast.Return,)):
        return []
    appends = [st for st in s.body if isinstance(st, ast.Expr) and _is_list_update(st.value)
               and st.value.func.attr == "append" and isinstance(st.value.func.value, ast.Name)]
    names = [st.value.func.value.id for st in appends]
    rest = [st for st in s.body if not any(st is a for a in appends)]
    changed = set(_assigned_names(rest + [ast.Assign([s.target], s.iter)]))
    return [n for n in names if names.count(n) == 1 and n not in changed]


def _adds_keys(body: list, owned: set, changing: list) -> str | None:
    """The name of a dict this function owns that a loop's body (not a nested loop's or
    function's) assigns into at a key computed from names the loop assigns, `changing`
    (`d[k] = v`, k the loop's target): a dict that may gain a key each step."""
    stack = list(body)
    while stack:
        node = stack.pop()
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                    and t.value.id in owned and any(
                        isinstance(n, ast.Name) and n.id in changing for n in ast.walk(t.slice)):
                return t.value.id
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef, ast.While, ast.For)):
            stack.extend(ast.iter_child_nodes(node))
    return None


class _ComprehensionScope(ast.Lambda):
    """The scope of a comprehension: its target's names.  It runs where it is written, so
    what it reads is read then (no capture of a variable assigned later, see
    `_check_captures`)."""


@functools.lru_cache(maxsize=64)
def _in_branches(fn: ast.AST) -> frozenset:
    """The ids of the statements of `fn` inside an `if`: a dict assigned there may not be
    the one the name holds after it."""
    return frozenset(id(s) for n in _subtree(fn) if isinstance(n, ast.If)
                     for part in (n.body, n.orelse) for st in part for s in ast.walk(st))


def _needs_tail_form(stmts) -> bool:
    return (_contains(stmts, (ast.Return, ast.Raise, ast.Assert))
            or _contains(stmts, (ast.Break, ast.Continue), into_loops=False))


# ----------------------------------------------------------------------------- parser


class FunctionParser:
    """Parses one function (a `def` or `lambda`) into `graph`."""

    def __init__(self, source: Source, enclosing: "tuple[FunctionParser, Block] | None",
                 node: ast.AST, graph: Graph, worklist: _Worklist, pyfunc=None):
        self.source = source
        self.worklist = worklist
        self.enclosing = enclosing
        self.node = node
        self.graph = graph
        self.pyfunc = pyfunc
        args = node.args
        if not isinstance(node, ast.Lambda):
            node.body = _loop_else_as_flag(node.body)
        self.locals = set() if isinstance(node, ast.Lambda) else \
            set(_assigned_names(node.body, updates=False))
        if PRINTED in self.locals and not _prints(node, source.globals, worklist.quiet):
            self.locals.discard(PRINTED)
        self.locals.update(a.arg for a in args.posonlyargs + args.args)
        self.current_loop: Loop | None = None
        self.computed_defaults: dict[str, Node] = {}   # see `nested_function`
        # name -> list of (assignment AST node, enclosing loops) for the capture check
        self.captures: list[tuple[str, ast.AST, tuple]] = []
        self.assignments: dict[str, list[tuple[ast.AST, tuple]]] = {}
        self.loop_stack: tuple = ()
        self.augmented: list[Apply] = []   # of this function and those nested in it
        self.assigned: list[tuple[Node, str | None]] = []   # (value, name), the same
        # `y[i] = v`, `xs.append(v)`: (the update, y, its target or call)
        self.updates: list[tuple[Apply, str, ast.AST]] = []
        self.names_of: dict[int, list[tuple[str, int]]] = {}  # id(value) -> [(name, line)]
        self.owned: set[str] = set()     # names holding a dict this function made (see owns)
        self.dict_copies: set[int] = set()   # ids of the copies `dict(d)` made (not `x.copy()`)
        self.root.function_graphs = getattr(self.root, "function_graphs", set()) | {graph}
        if self.root is self:   # dict comprehensions: parsed as functions, run where written
            self.dict_comprehensions: set[Graph] = set()

    @property
    def root(self) -> "FunctionParser":
        """The parser of the outermost function, which the nested ones report to.  (Found,
        not kept: the outermost one keeping itself made every parser garbage that only the
        cycle collector frees, with all it holds.)"""
        return self.enclosing[0].root if self.enclosing is not None else self

    # -- errors and locations

    def loc(self, node: ast.AST) -> Location:
        return self.source.loc(node)

    def error(self, node: ast.AST, message: str, hint: str | None = None):
        raise MyirSyntaxError(message, self.loc(node), hint)

    # -- entry

    def parse(self) -> Graph:
        return self.body(self.header())

    def header(self) -> Block:
        """The graph's parameters and defaults: what calls of it need.  Returns the block
        its body starts in."""
        node = self.node
        self._check_signature(node)
        if self.pyfunc is not None:  # module-level function: defaults are already values
            names = [a.arg for a in node.args.posonlyargs + node.args.args]
            defaults = self.pyfunc.__defaults__ or ()
            for name, value in zip(names[len(names) - len(defaults):], defaults):
                self.graph.defaults[name] = self.global_value(value, name, node)
        block = Block(self.graph, None)
        for a in node.args.posonlyargs + node.args.args:
            param = self.graph.add_parameter(a.arg, self.loc(a))
            default = self.computed_defaults.get(a.arg)
            if default is not None:
                left_out = self.graph.apply(P["is_"], param, Constant(UNBOUND))
                param = self.graph.apply(P["switch"], left_out, default, param,
                                         location=self.loc(a))
            block.env[a.arg] = param
            self._record_assignment(a.arg, a)
        if PRINTED in self.locals:
            block.env[PRINTED] = Constant(None)
        return block

    def body(self, block: Block) -> Graph:
        node = self.node
        if isinstance(node, ast.Lambda):
            self.graph.output = self.expr(node.body, block)
        else:
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]  # docstring
            end = self.stmts(body, block)
            if end is not None:
                end.graph.output = Constant(None)
        self._check_captures()
        if self.root is self:
            self._check_updates()
            self._keep_what_raises()
        return self.graph

    def _check_signature(self, node):
        args = node.args
        hint = "give the function plain positional parameters (defaults are fine)"
        if args.vararg:
            self.error(args.vararg, "`*args` parameters are not supported", hint)
        if args.kwarg:
            self.error(args.kwarg, "`**kwargs` parameters are not supported", hint)
        if args.kwonlyargs:
            self.error(args.kwonlyargs[0], "keyword-only parameters are not supported", hint)

    # -- variables

    def _record_assignment(self, name: str, node: ast.AST):
        self.assignments.setdefault(name, []).append((node, self.loop_stack))

    def bind(self, block: Block, name: str, value: Node, node: ast.AST):
        block.env[name] = value
        self._record_assignment(name, node)

    @staticmethod
    def lookup(block: Block, name: str):
        """The binding of local `name` seen from `block`: a Node, a MaybeUnbound, or None."""
        b = block
        while b is not None:
            if name in b.env:
                return b.env[name]
            b = b.parent
        return None

    def value(self, block: Block, name: str) -> Node:
        """The value of local `name` to pass along (to a join or the next iteration) without
        checking it: UNBOUND where it has none."""
        entry = self.lookup(block, name)
        if entry is None:
            return Constant(UNBOUND)
        return entry.node if isinstance(entry, MaybeUnbound) else entry

    def maybe_unbound(self, block: Block, name: str) -> bool:
        return not isinstance(self.lookup(block, name), Node)

    @staticmethod
    def rebind(block: Block, name: str, value: Node, maybe: bool):
        """Bind the merged value of a variable after an `if` or loop (no new assignment: the
        branches' own assignments were recorded)."""
        block.env[name] = MaybeUnbound(value) if maybe else value

    def read(self, block: Block, name: str, node: ast.AST) -> Node:
        if name in self.locals:
            entry = self.lookup(block, name)
            if isinstance(entry, Node):
                return entry
            value = entry.node if entry is not None else Constant(UNBOUND)
            checked = block.graph.apply(P["check_bound"], value, name, name=name,
                                        location=self.loc(node))
            block.env[name] = checked  # checked once: later reads here see a bound value
            return checked
        if self.enclosing is not None:
            parser, block_at_def = self.enclosing
            if name in parser.locals or parser.enclosing_has(name):
                value = parser.read(block_at_def, name, node)
                if name in parser.locals and not isinstance(self.node, _ComprehensionScope):
                    # parser is in the middle of parsing the `def` of self.node
                    parser.captures.append((name, self.node, parser.loop_stack))
                return value
        return self.read_global(name, node)

    def enclosing_has(self, name: str) -> bool:
        e = self.enclosing
        while e is not None:
            if name in e[0].locals:
                return True
            e = e[0].enclosing
        return False

    def read_global(self, name: str, node: ast.AST) -> Node:
        try:
            value = resolve.lookup_global(name, self.source.globals)
        except KeyError:
            self.error(node, f"name '{name}' is not defined",
                       "define it in the function or at module level before compiling")
        return self.global_value(value, name, node)

    def global_value(self, value, name: str, node: ast.AST) -> Node:
        macro = getattr(value, "__myir_macro__", None)
        if macro is not None:
            return Constant(Macro(macro))
        if value is dict or value is dataclasses.replace or isinstance(value, type) and (
                tree.is_namedtuple(value) or dataclasses.is_dataclass(value)):
            return Constant(value)      # constructors of dicts and records (expr_Call)
        transforms = getattr(value, "__myir_transforms__", ())
        if transforms:  # e.g. a module-level `df = myir.grad(f)`
            inner = self.worklist.graph_of(value.__myir_function__)
            return Constant(wrap_macros(inner, transforms))
        value = resolve.unwrap_function(value)
        if isinstance(value, Primitive):
            return Constant(value)
        if resolve.is_numpy_function(value):   # `from numpy.linalg import norm`
            member = resolve.numpy_member(value)
            if member is None:
                full = f"{value.__module__}.{getattr(value, '__name__', name)}"
                ns, _, attr = full.rpartition(".")
                self.error(node, *resolve.unsupported(resolve.Namespace(ns, {}, {}), attr))
            ns, attr = member
            return self.global_value(ns.functions[attr], f"{ns.name}.{attr}", node)
        if resolve.is_user_function(value):
            return Constant(self.worklist.graph_of(value))
        if resolve.namespace_of(value) is not None:
            return Constant(resolve.namespace_of(value))
        builtin = getattr(value, "__name__", None)   # `abs`, or a default `h=abs`
        if builtin in resolve.BUILTINS and value is getattr(builtins, builtin, None):
            return Constant(resolve.BUILTINS[builtin])
        if builtin in resolve.BUILTIN_FUNCTIONS and value is getattr(builtins, builtin, None):
            return self.global_value(resolve.BUILTIN_FUNCTIONS[builtin], builtin, node)
        if isinstance(value, type) and issubclass(value, Exception):
            return Constant(value)
        if resolve.is_embeddable(value):
            return Constant(resolve.frozen(value))
        if value in (zip, enumerate, reversed):
            self.error(node, f"`{name}` can only be used as the iterable of a `for` loop",
                       f"write `for a, b in {name}(...):`")
        self.error(node, f"global '{name}' has a value of type {type(value).__name__}, "
                   "which compiled code cannot use",
                   "use numbers, tuples, numpy arrays, `np`/`math` functions, or functions "
                   "written in the subset")

    def _check_captures(self):
        """A closure captures the *value* of a free variable when it is defined; Python reads
        the variable when the closure runs.  They agree unless the variable is assigned again
        after the definition (later in the function, or in a later iteration of a loop that
        contains the definition): that is an error."""
        for name, def_node, def_loops in self.captures:
            def_pos = (def_node.lineno, def_node.col_offset)
            for assign, loops in self.assignments.get(name, ()):
                if assign is def_node:
                    continue
                pos = (assign.lineno, assign.col_offset)
                later = pos > def_pos
                same_loop = bool(set(map(id, loops)) & set(map(id, def_loops)))
                if same_loop and not later and self._used_within_iteration(def_node, def_loops):
                    continue
                if later or same_loop:
                    what = getattr(def_node, "name", "lambda")
                    if later and not self._bound_before(name, def_pos):
                        self.error(assign, f"`{what}` (line {def_node.lineno}) reads '{name}', "
                                   "which is first assigned here, after it: Python closures "
                                   "read a variable when they run, myir captures its value "
                                   "where the closure is defined",
                                   f"define '{name}' before `{what}`; for functions that call "
                                   "each other, define them at the top level of the module "
                                   "(mutual recursion between top-level functions compiles)")
                    self.error(assign, f"variable '{name}' is captured by the closure "
                               f"`{what}` (line {def_node.lineno}) "
                               f"and assigned again {'here' if later else 'in the same loop'}; "
                               "Python closures would see the new value, myir captures the "
                               "value at definition",
                               f"use a different name for the new value of '{name}', or pass "
                               "it to the closure as an argument")

    def _bound_before(self, name: str, pos: tuple) -> bool:
        """Whether `name` is a parameter of this function or assigned before `pos`."""
        args = self.node.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                  *filter(None, (args.vararg, args.kwarg)))]
        return name in params or any((a.lineno, a.col_offset) < pos
                                     for a, _ in self.assignments.get(name, ()))

    def _used_within_iteration(self, def_node: ast.AST, def_loops: tuple) -> bool:
        """Whether a closure defined in a loop body is only ever called later in the same
        iteration: bound by a statement directly in the innermost loop's body to a name
        assigned nowhere else, and that name only read as `name(...)` further down that
        body.  Then no call can see a later iteration's values, and capturing by value
        agrees with Python."""
        loop = def_loops[-1]
        name = None
        for stmt in loop.body:
            if stmt is def_node and isinstance(stmt, ast.FunctionDef):
                name = stmt.name
            elif isinstance(stmt, ast.Assign) and stmt.value is def_node \
                    and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
        if name is None or len(self.assignments.get(name, ())) != 1:
            return False
        def_pos = (def_node.lineno, def_node.col_offset)
        callees = {id(n.func) for n in _walk_same_function(loop.body)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and (n.lineno, n.col_offset) > def_pos}
        loads = [n for n in _subtree(self.node)
                 if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        return all(id(n) in callees for n in loads)

    # -- statements

    def stmts(self, stmts: list[ast.stmt], block: Block) -> Block | None:
        """Parse statements into `block`; return the block control falls out of, or None."""
        for i, stmt in enumerate(stmts):
            if block is None:
                return None  # unreachable code after return/break/continue/raise
            if isinstance(stmt, ast.If) and _needs_tail_form([stmt]):
                return self.if_tail(stmt, block, stmts[i + 1:])
            if isinstance(stmt, ast.Assert):
                return self.assert_(stmt, block, stmts[i + 1:])
            if isinstance(stmt, (ast.While, ast.For)):
                block = self.parse_loop(stmt, block)
                if isinstance(block, tuple):   # a loop containing `return`
                    flag_block, rest = block
                    return self.after_returning_loop(flag_block, rest, stmts[i + 1:])
                continue
            block = self.stmt(stmt, block)
        return block

    def stmt(self, s: ast.stmt, block: Block) -> Block | None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.unsupported(s)
        return method(s, block)

    def unsupported(self, s: ast.AST):
        kind = type(s).__name__
        what, hint = _UNSUPPORTED.get(kind, (f"`{kind}` constructs", None))
        self.error(s, f"{what} are not supported in compiled functions",
                   hint or "rewrite it with the supported subset: assignments, if/while/for, "
                   "def/lambda, return")

    def stmt_Pass(self, s, block):
        return block

    def stmt_Expr(self, s, block):
        if isinstance(s.value, ast.Constant) and (s.value.value is Ellipsis
                                                  or isinstance(s.value.value, str)):
            return block  # `...` or a string used as a comment
        if isinstance(s.value, (ast.Yield, ast.YieldFrom, ast.Await)):
            self.unsupported(s.value)
        if _is_list_update(s.value) and self.static_value(s.value.func.value, block) is None:
            self.list_update(s.value, block)
            return block
        if isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) \
                and s.value.func.attr in resolve.MUTATING_METHODS \
                and self.static_value(s.value.func.value, block) is None:
            if self.dict_update_call(s.value, block):
                return block
            self.mutating_method(s.value)
        if _is_print(s.value) and PRINTED in self.locals and \
                resolve.lookup_global("print", self.source.globals) is builtins.print:
            return self.print_call(s.value, block)
        what = "call" if isinstance(s.value, ast.Call) else "expression"
        self.error(s, f"the result of this {what} is dropped; compiled functions have no side "
                   "effects other than print(), so it would do nothing",
                   "assign the result to a variable and use it, or delete the statement")

    def loop_iterator(self, e: ast.expr) -> bool:
        """Whether e is a call of the builtin zip, enumerate or reversed (iterators compiled
        code has as the iterable of a loop or comprehension only)."""
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
            and e.func.id in ("zip", "enumerate", "reversed") and e.func.id not in self.locals \
            and resolve.lookup_global(e.func.id, self.source.globals) is getattr(builtins,
                                                                              e.func.id)

    def dict_update_call(self, e: ast.Call, block: Block) -> bool:
        """`d.update({"W": w})`, `d.update(W=w)` on a dict the function made: the keys set
        one after another, as `d["W"] = w` (whose checks it gets).  False for any other
        call."""
        d = e.func.value
        if e.func.attr != "update" or not self.owns(d) or len(e.args) > 1 or (
                e.args and not (isinstance(e.args[0], ast.Dict) and None not in e.args[0].keys)):
            return False
        pairs = list(zip(e.args[0].keys, e.args[0].values)) if e.args else []
        pairs += [(ast.copy_location(ast.Constant(k.arg), k.value), k.value) for k in e.keywords]
        for key, value in pairs:
            target = ast.copy_location(ast.Subscript(d, key, ast.Store()), e)
            self.assign(target, self.expr(value, block), block, e)
        return True

    def mutating_method(self, e: ast.Call):
        """`d.update(e)`, `x.fill(v)`, ...: methods that change their object in place, which
        compiled code does not have; the error says what to write."""
        attr, obj = e.func.attr, ast.unparse(e.func.value)
        args = ", ".join(ast.unparse(a) for a in e.args)
        hint = {
            "clear": f"`{obj} = []` or `{obj} = {{}}`",
            "update": f"set the keys one by one: `for k, v in {args or 'other'}.items(): "
                      f"{obj}[k] = v`",
            "setdefault": f"`if k not in {obj}: {obj}[k] = v`",
            "fill": f"`{obj} = np.full_like({obj}, {args or 'v'})`",
        }.get(attr, "build a new value instead")
        self.error(e, f"`.{attr}()` changes `{obj}` in place, which compiled code does not "
                   "support", hint)

    def print_call(self, e: ast.Call, block: Block) -> Block:
        """`print(...)`: runs after the print before it (`PRINTED`), and is kept like an
        operation that can raise, so the optimizer neither drops nor reorders it."""
        if any(isinstance(a, ast.Starred) for a in e.args):
            self.error(e, "`print(*args)` is not supported", "pass the values one by one")
        options = {"sep": Constant(" "), "end": Constant("\n")}
        for k in e.keywords:
            if k.arg not in options:
                self.error(e, f"print(..., {k.arg}=...) is not supported in compiled code",
                           "print to standard output with sep= and end= only")
            options[k.arg] = self.expr(k.value, block)
        args = [self.expr(a, block) for a in e.args]
        loc = self.loc(e)
        values = block.graph.apply(P["make_tuple"], *args, location=loc)
        node = block.graph.apply(P["print_"], self.value(block, PRINTED), options["sep"],
                                 options["end"], values, location=loc)
        block.env[PRINTED] = node
        self.root.assigned.append((node, None))
        return block

    def stmt_Return(self, s, block):
        value = self.expr(s.value, block) if s.value is not None else Constant(None)
        if self.current_loop is not None:
            value = self.returned(block, value, s)
        block.graph.output = value
        return None

    def stmt_Assign(self, s, block):
        value = self.assigned_value(s.value, s.targets, block)
        for target in s.targets:
            self.assign(target, value, block, s)
        return block

    def stmt_AnnAssign(self, s, block):
        if s.value is None:
            return block
        self.assign(s.target, self.assigned_value(s.value, [s.target], block), block, s)
        return block

    def assigned_value(self, e: ast.expr, targets: list, block: Block) -> Node:
        """The value of an assignment's right side.  `fact = lambda n: ... fact(n - 1)`: the
        lambda reads `fact` when it runs, after the assignment, so it sees itself, like a
        recursive `def`."""
        if isinstance(e, ast.Lambda) and all(isinstance(t, ast.Name) for t in targets):
            return Constant(self.nested_function(e, block, "lambda", [t.id for t in targets]))
        return self.expr(e, block)

    def stmt_AugAssign(self, s, block):
        if isinstance(s.target, ast.Subscript):
            self.refuse_update_under_view(s.target)
        if isinstance(s.target, ast.Subscript) and self.owns(s.target.value):
            d = self.read(block, s.target.value.id, s.target.value)
            key = self.index(s.target.slice, block)
            old = block.graph.apply(P["getitem"], d, key, location=self.loc(s.target))
            value = self.in_place(s.op, old, s, block)
            update = block.graph.apply(P["dict_setitem"], d, key, value, location=self.loc(s))
            self.root.updates.append((update, s.target.value.id, s.target))
            self.assign(s.target.value, update, block, s)
            self.owned.add(s.target.value.id)
            return block
        if isinstance(s.target, ast.Subscript):
            self.update_item(s.target, block, s, op=s.op)
            return block
        if not isinstance(s.target, ast.Name):
            self.error(s.target, "augmented assignment to an attribute mutates it in place, "
                       "which compiled functions cannot do",
                       "build a new value instead, e.g. `x = x + y`")
        current = self.read(block, s.target.id, s.target)
        value = self.binop(s.op, current, self.expr(s.value, block), s, block)
        self.root.augmented.append((value, s))
        self.root.assigned.append((value, s.target.id))
        self.bind(block, s.target.id, value, s.target)
        return block

    def update_item(self, target: ast.Subscript, block: Block, stmt: ast.AST,
                    value: Node | None = None, op: ast.operator | None = None):
        """`y[index] = value` (or `y[index] op= value`, `op` given) on a local variable `y`:
        `y = setitem(y, index, value)`, a new value bound to `y`.  Python changes the object
        `y` holds; `_check_updates` proves nothing else sees that object.  `y[i][j] = value`
        is `y = setitem(y, i, setitem(y[i], j, value))`: Python changes the element `y[i]`,
        which `_check_updates` also proves is seen through `y` alone."""
        base = target.value
        if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name) \
                and base.value.id in self.locals:
            return self.update_element_item(target, block, stmt, value, op)
        if isinstance(base, ast.Subscript):
            self.error(target, "assignment into an element of an element of an element "
                       "(`y[i][j][k] = v`), or of an element of a value no local variable "
                       "holds, is not supported", "for an array write `y[i, j, k] = v`; "
                       "otherwise take the element out, update it and put it back: "
                       "`row = y[i][j]`, `row[k] = v`, `y[i][j] = row`")
        if not isinstance(base, ast.Name):
            self.error(target, "assignment into an element of an expression changes a value "
                       "no variable of this function holds",
                       f"update a local copy: `v = {ast.unparse(base)}.copy()`, then "
                       f"`v[...] = ...`")
        name = base.id
        if name not in self.locals:
            self.error(base, f"assignment into `{name}`, which is not a local variable of "
                       "this function, would change a value the caller or an enclosing "
                       "function sees", f"make a local copy first: `{name}_copy = "
                       f"{name}.copy()`, update it and return it")
        loc = self.loc(target)
        current = self.read(block, name, base)
        index = self.index(target.slice, block)
        if op is not None:
            old = block.graph.apply(P["getitem"], current, index, location=loc)
            value = self.in_place(op, old, stmt, block)
        node = block.graph.apply(P["setitem"], current, index, value, name=name, location=loc)
        self.root.updates.append((node, name, target))
        self.root.assigned.append((node, name))
        self.bind(block, name, node, base)

    def update_element_item(self, target: ast.Subscript, block: Block, stmt: ast.AST,
                            value: Node | None, op: ast.operator | None):
        """`y[i][j] = value` (see `update_item`): the element's update, then y's (a dict's
        `dict_setitem` where y is a dict this function made)."""
        base = target.value
        name, loc = base.value.id, self.loc(target)
        current = self.read(block, name, base.value)
        i = self.index(base.slice, block)
        element = block.graph.apply(P["getitem"], current, i, location=self.loc(base))
        j = self.index(target.slice, block)
        if op is not None:
            old = block.graph.apply(P["getitem"], element, j, location=loc)
            value = self.in_place(op, old, stmt, block)
        inner = block.graph.apply(P["setitem"], element, j, value, location=loc)
        outer = "dict_setitem" if self.owns(base.value) else "setitem"
        node = block.graph.apply(P[outer], current, i, inner, name=name, location=loc)
        self.root.updates.append((node, name, target))
        self.root.assigned.append((node, name))
        self.bind(block, name, node, base.value)

    def _check_updates(self):
        """Updates in place become functional updates where `frontend.ownership` proves
        nothing else sees the object (see there).  `y[i] = v` that cannot be proven is an
        error; `x op= y` becomes `aug_<op>`, which raises a clear error if it meets an array
        (and is the plain operator for numbers)."""
        if not self.updates and not self.augmented:
            return
        flow = ownership.Flow(self.graph, self.function_graphs - self.dict_comprehensions,
                              self.names_of,
                              [n for n, _ in self.assigned] + [n for n, _, _ in self.updates])
        elements: dict[int, tuple[Apply, str, Apply]] = {}
        for node, name, target in self.updates:
            nested = isinstance(target, ast.Subscript) and isinstance(target.value,
                                                                      ast.Subscript)
            try:
                update = ownership.Update(flow, node, node.args[0], name, nested)
                update.check()
                if nested:      # `y[i][j] = v`
                    update.check_items()
                elif update.in_place is not None and update.may_hold_objects():
                    self._in_place_element(flow, update, target)
                elements.update((k, (v, name, node)) for k, v in update.elements.items())
            except ownership.Shared as e:
                method = isinstance(target, ast.Call)     # a list's: `xs.append(v)`
                what = f"`{name}.{target.func.attr}()`" if method \
                    else f"assignment into an element of `{name}`" if nested \
                    else f"assignment into `{name}`"
                if e.items:
                    self.error(target, f"{what} would change an element of `{name}` in place, "
                               f"and that element may be shared with {e.what}: Python would "
                               "change it there too, compiled code would not", "give each "
                               f"element its own copy first, e.g. `{name}[i] = list({name}[i])`"
                               f" or `{name} = [row.copy() for row in {name}]`; for an array, "
                               f"write `{name}[i, j] = v`")

                def copy(x, when):
                    if nested:
                        return f"write `{x} = [row.copy() for row in {x}]` {when}, which " \
                            "copies its elements too"
                    if not method:
                        return f"write `{x} = {x}.copy()` {when}"
                    return f"write `{x} = list({x})` (or `{x} = {x}.copy()`) {when}" + (
                        f"; for an array, `{x} = np.sort({x})` instead of `.sort()`"
                        if target.func.attr == "sort" else "")
                if e.argument is not None:
                    self.error(target, f"{what} would change the argument `{e.argument}` in "
                               "place; the caller's data is never changed",
                               copy(e.argument, "first"))
                self.error(target, f"{what} would change its value in place, and that value "
                           f"is shared with {e.what}: Python would change it there too, "
                           "compiled code would not", copy(name, "before the update"))
        for element, name, update in elements.values():
            self._element_read_after(flow, element, name, update)
        uses = None
        for node, stmt in self.augmented:
            try:
                ownership.Update(flow, node, node.inputs[1], stmt.target.id).check()
                continue
            except ownership.Shared:
                pass
            node.set_inputs([Constant(P["aug_" + node.fn.value.name]), *node.args])
            uses = uses or _use_counts(self.graph)
            if not uses.get(id(node)):
                _keep(node, self.root.function_graphs)  # unused: keep its check

    def _in_place_element(self, flow: ownership.Flow, update: ownership.Update,
                          target: ast.Subscript):
        """`y[i] op= v` on a list or dict: CPython applies `op=` to the element y[i] itself,
        which changes it in place where it is a list or an array.  Unless `check_items`
        proves the element is seen through y alone, inference refuses a mutable element (a
        number gets the plain operator, and nothing else can see the difference)."""
        try:
            update.check_items()
        except ownership.Shared as e:
            item = ast.unparse(target)
            self._not_a_view(flow, update.in_place, (
                f"the augmented assignment into `{item}` would change that element of "
                f"`{update.name}` in place (a list or an array), and it may be shared with "
                f"{e.what}: Python would change it there too, compiled code would not"),
                f"write `{item} = {item} <op> v`, which makes a new value")
        if update.replaces:     # its elements, read after the update: no other is changed
            update.elements.clear()

    def _element_read_after(self, flow: ownership.Flow, element: Apply, name: str,
                            update: Apply):
        """`v = y[i]`, read after `y` is updated: right if v is a number, not if it is a row
        of an array (a view, which sees the update), nor a list or dict that `y[i] op= v`
        may change.  Inference tells (`_not_a_view`)."""
        names = self.names_of.get(id(element))
        held = f"`{names[0][0]}`" if names else "this element"
        line = update.location.line if update.location else "?"
        self._not_a_view(flow, element, (
            f"{held} is a view into `{name}`, which is updated in place (line {line}) before "
            f"{held} is used: Python would see the update through it, compiled code would "
            "not"), f"copy it where it is taken: `{name}[...].copy()`")

    def _not_a_view(self, flow: ownership.Flow, element: Apply, message: str, hint: str):
        """Every use of `element` reads it through `not_a_view`, whose type rule refuses an
        array, a list or a dict (raising `message` with `hint`)."""
        checked = element.graph.apply(P["not_a_view"], element, message, hint,
                                      location=element.location)
        for user, k in flow.uses.get(id(element), ()):
            if user is not checked:
                inputs = list(user.inputs)
                inputs[k] = checked
                user.set_inputs(inputs)
        for g in flow.outputs.get(id(element), ()):
            g.output = checked

    def _keep_what_raises(self):
        """CPython runs every assignment, `if` and loop, so one whose value may never be read
        (no node uses it, or its name is never read) but whose computation can raise
        (`unused = 1 / x`) is tied to its graph's output (see `passes.raising`)."""
        if not self.assigned:
            return
        uses = _use_counts(self.graph)
        read = {n.id for n in _subtree(self.node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for node, name in reversed(self.assigned):   # a loop before what its body assigns
            # a comprehension's own names (`x.1`, its list) are read where it is written
            hidden = name is not None and "." in name
            if isinstance(node, Apply) and (not uses.get(id(node)) or name not in read
                                            and name is not None and not hidden) \
                    and _can_raise(node):
                _keep(node, self.root.function_graphs)
                uses = _use_counts(self.graph)

    def assign(self, target: ast.expr, value: Node, block: Block, stmt: ast.AST):
        if isinstance(target, ast.Name):
            self.owned.discard(target.id)
            if self.makes_dict(value) and id(stmt) not in _in_branches(self.node):
                self.owned.add(target.id)
            if value.debug.name is None and isinstance(value, Apply):
                value.debug.name = target.id
            self.root.assigned.append((value, target.id))
            self.root.names_of.setdefault(id(value), []).append((target.id, target.lineno))
            self.bind(block, target.id, value, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                self.error(target, "starred assignment is not supported",
                           "unpack a fixed number of elements")
            n = len(target.elts)
            checked = block.graph.apply(P["unpack"], value, n, location=self.loc(target))
            for i, elt in enumerate(target.elts):
                item = block.graph.apply(P["getitem"], checked, i, location=self.loc(elt))
                self.assign(elt, item, block, stmt)
        elif isinstance(target, ast.Subscript):
            self.refuse_update_under_view(target)
            if self.owns(target.value):
                self.assign(target.value, self.dict_update(target, value, block), block, stmt)
                self.owned.add(target.value.id)
            else:
                self.update_item(target, block, stmt, value=value)
        elif isinstance(target, ast.Attribute):
            self.error(target, "assignment to an attribute is not supported",
                       "compiled functions cannot mutate objects; return a new value")
        else:
            self.error(target, f"cannot assign to {type(target).__name__}")

    def stmt_Raise(self, s, block):
        if s.exc is None:
            self.error(s, "a bare `raise` is not supported", "raise an exception instance, "
                       "e.g. `raise ValueError('message')`")
        if s.cause is not None:
            self.error(s.cause, "`raise ... from ...` is not supported",
                       "raise the exception without `from`")
        exc = self.expr(s.exc, block)
        block.graph.output = block.graph.apply(P["raise_"], exc, location=self.loc(s))
        return None

    def assert_(self, s: ast.Assert, block: Block, rest: list) -> Block | None:
        """`assert c, msg` ends the block with `switch(c, rest, fail)()`."""
        loc = self.loc(s)
        cond = self.truth(self.expr(s.test, block), s.test, block)
        ok = Block(Graph("assert_ok", block.graph, loc), block)
        fail = Block(Graph("assert_failed", block.graph, loc), block)
        args = [] if s.msg is None else [self.expr(s.msg, fail)]
        exc = fail.graph.apply(P["make_exception"], AssertionError, *args, location=loc)
        fail.graph.output = fail.graph.apply(P["raise_"], exc, location=loc)
        self.tail_switch(block, cond, ok.graph, fail.graph, s)
        return self.stmts(rest, ok)

    def tail_switch(self, block: Block, cond: Node, t: Graph, f: Graph, s: ast.AST):
        block.graph.output = self.value_switch(block, cond, t, f, s)

    def value_switch(self, block: Block, cond: Node, t: Graph, f: Graph, s: ast.AST) -> Apply:
        loc = self.loc(s)
        sw = block.graph.apply(P["switch"], cond, Constant(t), Constant(f), location=loc)
        return block.graph.apply(sw, location=loc)

    def stmt_If(self, s: ast.If, block: Block) -> Block:
        """An `if` with no return/break/continue/raise inside: an expression of its branches."""
        cond = self.truth(self.expr(s.test, block), s.test, block)
        names = [n for n in _assigned_names(s.body + s.orelse) if n in self.locals]
        loc = self.loc(s)
        ends = []
        graphs = []
        for label, body in (("then", s.body), ("else", s.orelse)):
            b = Block(Graph(f"if_{label}", block.graph, loc), block)
            graphs.append(b.graph)
            ends.append(self.stmts(body, b))
        maybe = {n for n in names if any(self.maybe_unbound(e, n) for e in ends)}
        for end in ends:
            end.graph.output = self.pack(end, names, s)
        result = self.value_switch(block, cond, graphs[0], graphs[1], s)
        self.unpack_into(block, result, names, maybe, s)
        return block

    def pack(self, block: Block, names: list[str], s: ast.AST) -> Node:
        values = [self.value(block, n) for n in names]
        if len(values) == 1:
            return values[0]
        return block.graph.apply(P["make_tuple"], *values, location=self.loc(s))

    def unpack_into(self, block: Block, result: Node, names: list[str], maybe: set,
                    s: ast.AST):
        self.root.assigned.append((result, None))  # the `if` or loop, if nothing reads it
        if len(names) == 1:
            result.debug.name = names[0]
            self.rebind(block, names[0], result, names[0] in maybe)
            return
        for i, n in enumerate(names):
            item = block.graph.apply(P["getitem"], result, i, name=n, location=self.loc(s))
            self.rebind(block, n, item, n in maybe)

    def if_tail(self, s: ast.If, block: Block, rest: list) -> Block | None:
        """An `if` containing return/break/continue/raise: the block ends with the switch; the
        code after the `if` becomes a join graph the falling-through branches call."""
        cond = self.truth(self.expr(s.test, block), s.test, block)
        loc = self.loc(s)
        branches = [Block(Graph(f"if_{label}", block.graph, loc), block)
                    for label in ("then", "else")]
        self.tail_switch(block, cond, branches[0].graph, branches[1].graph, s)
        ends = [self.stmts(body, b) for body, b in zip((s.body, s.orelse), branches)]
        live = [e for e in ends if e is not None]
        if not live:
            return None
        names = [n for n in _assigned_names(s.body + s.orelse) if n in self.locals]
        join = Block(Graph("if_after", block.graph, loc), block)
        for n in names:
            param = join.graph.add_parameter(n, loc)
            join.env[n] = MaybeUnbound(param) if any(self.maybe_unbound(e, n) for e in live) \
                else param
        for end in live:
            end.graph.output = end.graph.apply(
                Constant(join.graph), *[self.value(end, n) for n in names], location=loc)
        return self.stmts(rest, join)

    def makes_dict(self, value: Node) -> bool:
        """Whether `value` is a new dict nothing else holds: a literal, `dict(...)`, or a
        dict comprehension (the call of its graph)."""
        return primitive_name(value) in ("make_dict", "dict_cons") \
            or id(value) in self.dict_copies \
            or isinstance(value, Apply) and isinstance(value.inputs[0], Constant) \
            and value.inputs[0].value in self.root.dict_comprehensions

    def owns(self, e: ast.expr) -> bool:
        """Whether `e[k] = v` updates a dict: `e` names one this function made (a dict
        literal or comprehension, `dict(...)`, not in one branch of an `if` only).
        Compiled code then rebinds `e` to the updated dict (`dict_setitem`), which is what
        CPython's in-place update gives where no other name, container, closure or caller
        sees it: `_check_updates` proves that, as for `y[i] = v`."""
        return isinstance(e, ast.Name) and e.id in self.owned

    def refuse_update_under_view(self, target: ast.Subscript):
        """`d[k] = v` inside `for ... in d.items():` (or `d.values()`): CPython's loop reads
        the live view, so the iterations after the update see the new value; compiled code
        iterates over the values `d` had when the loop began.  Refused."""
        d = target.value
        for loop in self.loop_stack:
            it = loop.iter if isinstance(loop, ast.For) else None
            if isinstance(d, ast.Name) and isinstance(it, ast.Call) \
                    and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values") \
                    and isinstance(it.func.value, ast.Name) and it.func.value.id == d.id:
                self.error(target, f"assignment into `{d.id}` inside a loop over "
                           f"`{d.id}.{it.func.attr}()` (line {loop.lineno}): Python's loop "
                           "would see the new value in later iterations, compiled code would "
                           "not", f"loop over a copy, `for ... in {d.id}.copy()."
                           f"{it.func.attr}()`, or over `{d.id}` and read `{d.id}[k]`")

    def dict_update(self, target: ast.Subscript, value: Node, block: Block) -> Node:
        d = self.read(block, target.value.id, target.value)
        key = self.index(target.slice, block)
        update = block.graph.apply(P["dict_setitem"], d, key, value, location=self.loc(target))
        self.root.updates.append((update, target.value.id, target))
        return update

    # -- loops

    def parse_loop(self, s: ast.While | ast.For, block: Block):
        loc = self.loc(s)
        body_names = _assigned_names(s.body + ([ast.Assign([s.target], s.iter)]
                                               if isinstance(s, ast.For) else []))
        # not a comprehension's own variables (`x.1`): assigned by each step, and read by
        # no code after the loop (carried, the loop's last value of one was kept only for
        # what reading it can raise, and that kept the loop from being a loop)
        targets = _assigned_names([ast.Assign([s.target], s.iter)]) \
            if isinstance(s, ast.For) else ()
        carried = [n for n in body_names if n in self.locals
                   and not ("." in n and n in targets)]
        maybe = {n for n in carried if self.maybe_unbound(block, n)}
        has_return = _contains(s.body, ast.Return)
        kind = "while" if isinstance(s, ast.While) else "for"
        loop_graph = Graph(kind, block.graph, loc)
        header = Block(loop_graph, block)

        seq = None
        init = [self.value(block, n) for n in carried]
        # A dict that gains a key each step: inference follows the loop step by step (the
        # keys stay constants), as it does a dict comprehension, so its number of steps must
        # be known when compiling: a `for` loop's length, counted by comp_next, which stops
        # at the end; a `while` loop's condition at each step (see below).
        grown = _adds_keys(s.body, self.owned, body_names)
        if grown is not None:
            loop_graph.unrolled = True
            grows = f"this loop adds keys to `{grown}`, a dict whose keys must be known when " \
                    "compiling"
        # lists the loop appends one item to at each step (lists certainly: a list the
        # function made): their lengths before it
        before = {n: block.graph.apply(P["len"], self.value(block, n), location=loc)
                  for n in (_appended_once(s) if isinstance(s, ast.For) else ())
                  if n in carried and n not in maybe
                  and self.makes_sequence(self.value(block, n))}
        if isinstance(s, ast.For):
            seq = self.iteration(s.iter, block)
            counter = loop_graph.add_parameter("k", loc)
            init = [Constant(0)] + init
            if grown is not None:
                seq = (block.graph.apply(P["comp_length"], seq[0], grows,
                                         location=self.loc(s.iter)), seq[1])
        else:
            counter = None
        for n in carried:
            param = loop_graph.add_parameter(n, loc)
            header.env[n] = MaybeUnbound(param) if n in maybe else param

        outer_loop, self.current_loop = self.current_loop, Loop(
            loop_graph, carried, counter, has_return, seq[0] if seq is not None else None)
        self.loop_stack = self.loop_stack + (s,)
        try:
            body = Block(Graph(f"{kind}_body", loop_graph, loc), header)
            exit_ = Block(Graph(f"{kind}_exit", loop_graph, loc), header)
            exit_.graph.output = self.exit_value(exit_, s)
            if seq is None:
                test = self.truth(self.expr(s.test, header), s.test, header)
                if grown is not None:
                    test = header.graph.apply(P["comp_length"], test, grows,
                                              location=self.loc(s.test))
            else:
                length, element = seq
                test = header.graph.apply(P["lt"], counter, length, location=loc)
                item = element(body, counter)
                self.assign(s.target, item, body, s)
            self.tail_switch(header, test, body.graph, exit_.graph, s)
            end = self.stmts(s.body, body)
            if end is not None:
                end.graph.output = self.continue_call(end, s)
        finally:
            self.current_loop = outer_loop
            self.loop_stack = self.loop_stack[:-1]
        if loop_graph.unrolled:
            for h in scope(loop_graph):    # the steps, on the recursion's cycle too
                h.unrolled = True

        result = block.graph.apply(Constant(loop_graph), *init, location=loc)
        if has_return:
            return block, (result, carried, maybe, s)
        self.unpack_into(block, result, carried, maybe, s)
        for name, n in before.items():  # inference widens a list grown in a loop: its length
            total = block.graph.apply(P["add"], n, seq[0], location=loc)
            grown = block.graph.apply(P["list_of_length"], self.value(block, name), total,
                                      location=loc, name=name)
            self.rebind(block, name, grown, False)
        return block

    def returned(self, block: Block, value: Node, s: ast.AST) -> Node:
        """What a loop that may `return` gives when it returns `value`: (True, value, the
        carried variables).  Its normal exit gives (False, UNBOUND, the carried variables):
        each slot has one type whichever way the loop ends, so the returned value's type
        does not mix with the carried variables' (a gradient needs the float it returns)."""
        packed = self.pack_tuple(block, self.current_loop.carried, s)
        return block.graph.apply(P["make_tuple"], True, value, packed, location=self.loc(s))

    def exit_value(self, block: Block, s: ast.AST) -> Node:
        packed = self.pack_tuple(block, self.current_loop.carried, s)
        if self.current_loop.has_return:
            return block.graph.apply(P["make_tuple"], False, Constant(UNBOUND), packed,
                                     location=self.loc(s))
        carried = self.current_loop.carried
        return packed if len(carried) != 1 else self.value(block, carried[0])

    def pack_tuple(self, block: Block, names: list[str], s: ast.AST) -> Node:
        values = [self.value(block, n) for n in names]
        return block.graph.apply(P["make_tuple"], *values, location=self.loc(s))

    def continue_call(self, block: Block, s: ast.AST) -> Node:
        loop = self.current_loop
        args = [self.value(block, n) for n in loop.carried]
        if loop.counter is not None and loop.graph.unrolled:
            args = [block.graph.apply(P["comp_next"], loop.counter, loop.length,
                                      location=self.loc(s))] + args
        elif loop.counter is not None:
            args = [block.graph.apply(P["add"], loop.counter, 1, location=self.loc(s))] + args
        return block.graph.apply(Constant(loop.graph), *args, location=self.loc(s))

    def stmt_Break(self, s, block):
        block.graph.output = self.exit_value(block, s)
        return None

    def stmt_Continue(self, s, block):
        block.graph.output = self.continue_call(block, s)
        return None

    def after_returning_loop(self, block: Block, info, rest: list) -> Block | None:
        """After a loop that may `return`: if it did, return its value (or pass it on to the
        enclosing loop); otherwise go on with the carried variables."""
        result, carried, maybe, s = info
        loc = self.loc(s)
        flag = block.graph.apply(P["getitem"], result, 0, location=loc)
        ret = Block(Graph("loop_returned", block.graph, loc), block)
        go_on = Block(Graph("loop_done", block.graph, loc), block)
        self.tail_switch(block, flag, ret.graph, go_on.graph, s)
        # UNBOUND only where the loop did not return: the check lets inference drop it
        value = ret.graph.apply(P["check_bound"],
                                ret.graph.apply(P["getitem"], result, 1, location=loc),
                                "the returned value", location=loc)
        if self.current_loop is not None:
            value = self.returned(ret, value, s)
        ret.graph.output = value
        payload = go_on.graph.apply(P["getitem"], result, 2, location=loc)
        for i, n in enumerate(carried):  # a returning loop always packs a tuple
            item = go_on.graph.apply(P["getitem"], payload, i, name=n, location=loc)
            self.rebind(go_on, n, item, n in maybe)
        return self.stmts(rest, go_on)

    def iteration(self, it: ast.expr, block: Block):
        """(length node, element(block, k) -> node) for the iterable of a `for` loop, evaluated
        once before the loop."""
        g = block.graph
        loc = self.loc(it)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords:
            name = it.func.id
            if name == "reversed" and name not in self.locals and \
                    resolve.lookup_global(name, self.source.globals) is reversed:
                if len(it.args) != 1:
                    self.error(it, "reversed() takes one sequence", "write `reversed(xs)`")
                inner = it.args[0]
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and \
                        inner.func.id in ("zip", "enumerate"):
                    self.error(it, f"'{inner.func.id}' object is not reversible",
                               "reverse the sequences instead, e.g. `zip(reversed(xs), "
                               "reversed(ys))` for sequences of the same length")
                length, element = self.iteration(it.args[0], block)
                last = g.apply(P["sub"], length, 1, location=loc)
                return length, lambda b, k: element(
                    b, b.graph.apply(P["sub"], last, k, location=loc))
            if name in ("zip", "enumerate") and name not in self.locals and \
                    resolve.lookup_global(name, self.source.globals) in (zip, enumerate):
                if name == "enumerate":
                    if len(it.args) not in (1, 2):
                        self.error(it, "enumerate() takes an iterable and an optional start",
                                   "write `enumerate(xs)` or `enumerate(xs, 1)`")
                    length, element = self.iteration(it.args[0], block)
                    start = self.expr(it.args[1], block) if len(it.args) == 2 else None

                    def enumerated(b, k):
                        index = k if start is None else b.graph.apply(P["add"], start, k,
                                                                      location=loc)
                        return b.graph.apply(P["make_tuple"], index, element(b, k), location=loc)
                    return length, enumerated
                parts = [self.iteration(a, block) for a in it.args]
                if not parts:
                    self.error(it, "zip() needs at least one iterable")
                length = parts[0][0]
                if len(parts) > 1:
                    length = g.apply(P["builtin_min"], *[p[0] for p in parts], location=loc)
                return length, lambda b, k: b.graph.apply(
                    P["make_tuple"], *[p[1](b, k) for p in parts], location=loc)
        seq = g.apply(P["iter_keys"], self.expr(it, block), location=loc)   # a dict: its keys
        length = g.apply(P["len"], seq, location=loc)
        return length, lambda b, k: b.graph.apply(P["getitem"], seq, k, location=loc)

    # -- nested functions

    def stmt_FunctionDef(self, s: ast.FunctionDef, block: Block) -> Block:
        if s.decorator_list:
            self.error(s.decorator_list[0], "decorators on nested functions are not supported",
                       "apply the decorator's function explicitly, e.g. `g = deco(g)`")
        g = self.nested_function(s, block, s.name, [s.name])
        self.bind(block, s.name, Constant(g), s)
        return block

    def nested_function(self, s, block: Block, name: str, bound_to: list[str] = ()) -> Graph:
        """The graph of a nested `def` or `lambda`; `bound_to`: the names the function is
        assigned to, which its body sees as the function itself (recursion)."""
        g = Graph(name, block.graph, self.loc(s))
        parser = FunctionParser(self.source, (self, block), s, g, self.worklist)
        # Defaults are evaluated where the function is defined, as in Python.  One computed
        # there (`lambda t, i=i: ...` in a loop) is read by the function as a free variable
        # where the call leaves its parameter to the default (UNBOUND, the constant default
        # a call of the closure as a value gets): inference types such calls, and a
        # gradient reaches the default's value as it reaches any captured value.
        names = [a.arg for a in s.args.posonlyargs + s.args.args]
        for n, default in zip(reversed(names), reversed(s.args.defaults)):
            value = self.expr(default, block)
            if not isinstance(value, Constant):
                parser.computed_defaults[n] = value
                value = Constant(UNBOUND)
            g.defaults[n] = value
        for n in bound_to:
            block.env[n] = Constant(g)
        parser.parse()
        return g

    def stmt_ClassDef(self, s, block):
        self.unsupported(s)

    # -- expressions

    def expr(self, e: ast.expr, block: Block) -> Node:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is None:
            self.unsupported(e)
        return method(e, block)

    def expr_Constant(self, e, block):
        return Constant(e.value)

    def expr_Name(self, e, block):
        return self.read(block, e.id, e)

    def expr_Tuple(self, e, block):
        if any(isinstance(x, ast.Starred) for x in e.elts):
            self.error(e, "starred expressions in tuples are not supported",
                       "build the tuple from its elements, e.g. `t[0], t[1], x`")
        elts = [self.expr(x, block) for x in e.elts]
        return block.graph.apply(P["make_tuple"], *elts, location=self.loc(e))

    def expr_Dict(self, e, block):
        if e.keys and e.keys[0] is None and None not in e.keys[1:]:
            # `{**d, "W": w}`: a copy of d with those keys set, as `dict(d, W=w)`
            return self.make_dict([self.expr(e.values[0], block)], {
                self.expr(k, block): self.expr(v, block)
                for k, v in zip(e.keys[1:], e.values[1:])}, e, block)
        if any(k is None for k in e.keys):
            self.error(e, "`**` in dict literals is supported first only (`{**d, k: v}`)",
                       "copy the dict with `dict(d)`, then set the other keys")
        pairs = [self.expr(x, block) for k, v in zip(e.keys, e.values) for x in (k, v)]
        return block.graph.apply(P["make_dict"], *pairs, location=self.loc(e))

    def expr_DictComp(self, e, block):
        """`{key: value for target in it if cond}` over an iterable of a length known when
        compiling (a dict's keys or items, a tuple, `range` of a constant, `zip` and
        `enumerate` of those): the recursion
        `comp(i) = {key_i: value_i, **comp(i + 1)}`, marked `unrolled` so that inference
        gives each i a frame of its own (the keys stay constants) rather than widening it
        like a loop (passes/infer.py); the typed optimizer inlines it into one dict."""
        if len(e.generators) != 1 or e.generators[0].is_async:
            self.error(e, "dict comprehensions with several `for` are not supported",
                       "nest a comprehension in a `for` loop, or use a tuple of pairs")
        gen, loc = e.generators[0], self.loc(e)
        length, element = self.iteration(gen.iter, block)
        n = block.graph.apply(P["comp_length"], length, "a dict comprehension builds a dict "
                              "whose keys must be known when compiling",
                              location=self.loc(gen.iter))
        g = Graph("dictcomp", block.graph, loc)
        g.unrolled = True
        names = _ComprehensionScope(args=ast.arguments(posonlyargs=[], args=[
            ast.arg(name) for name in _assigned_names([ast.Assign([gen.target], gen.iter)])],
            kwonlyargs=[], kw_defaults=[], defaults=[]), body=e)
        ast.copy_location(names, e)     # the comprehension's own scope: its target's names
        parser = FunctionParser(self.source, (self, block), names, g, self.worklist)
        self.root.dict_comprehensions.add(g)
        i = g.add_parameter("i", loc)
        head = Block(g, None)
        step = Block(Graph("dictcomp_step", g, loc), head)
        done = Graph("dictcomp_done", g, loc)
        done.output = done.apply(P["make_dict"], location=loc)
        parser.tail_switch(head, g.apply(P["lt"], i, n, location=loc), step.graph, done, e)
        parser.assign(gen.target, element(step, i), step, e)
        for cond in gen.ifs:
            keep = Block(Graph("dictcomp_if", step.graph, loc), step)
            skip = Graph("dictcomp_skip", step.graph, loc)
            skip.output = skip.apply(Constant(g), skip.apply(P["comp_next"], i, n), location=loc)
            parser.tail_switch(step, parser.truth(parser.expr(cond, step), cond, step),
                               keep.graph, skip, cond)
            step = keep
        key, value = parser.expr(e.key, step), parser.expr(e.value, step)
        rest = step.graph.apply(Constant(g), step.graph.apply(P["comp_next"], i, n), location=loc)
        step.graph.output = step.graph.apply(P["dict_cons"], key, value, rest, location=loc)
        for h in scope(g):    # the steps, on the recursion's cycle too
            h.unrolled = True
        return block.graph.apply(Constant(g), 0, location=loc)

    def expr_List(self, e, block):
        if any(isinstance(x, ast.Starred) for x in e.elts):
            self.error(e, "starred expressions in lists are not supported",
                       "build the list from its elements, or concatenate: `xs + [a]`")
        elts = [self.expr(x, block) for x in e.elts]
        return block.graph.apply(P["make_list"], *elts, location=self.loc(e))

    def expr_ListComp(self, e, block):
        return self.comprehension(e, block)

    def comprehension(self, e: ast.ListComp | ast.GeneratorExp, block: Block) -> Node:
        """`[elt for x in xs if c for y in ys]` is the loop that appends `elt` to a hidden
        list, parsed in place.  The comprehension's variables get hidden names (`x.1`): as
        in CPython, they do not leak into the function, and the first iterable is
        evaluated outside the comprehension."""
        self.root.comprehensions = n = getattr(self.root, "comprehensions", 0) + 1
        acc = f"comprehension.{n}"
        hidden = {}
        for gen in e.generators:
            if gen.is_async:
                self.error(e, "async comprehensions are not supported")
            for name in ast.walk(gen.target):
                if isinstance(name, ast.Name):
                    hidden[name.id] = f"{name.id}.{n}"
        renamed = _Renamer(hidden)
        inner = ast.Expr(ast.Call(ast.Attribute(ast.Name(acc, ast.Load()), "append", ast.Load()),
                                  [renamed.visit(_copy(e.elt))], []))
        body = [ast.copy_location(inner, e)]
        for k, gen in reversed(list(enumerate(e.generators))):
            for cond in reversed(gen.ifs):
                body = [ast.copy_location(ast.If(renamed.visit(_copy(cond)), body, []), cond)]
            it = gen.iter if k == 0 else renamed.visit(_copy(gen.iter))
            loop = ast.For(renamed.visit(_copy(gen.target)), it, body, [])
            body = [ast.copy_location(loop, gen.target)]
        self.locals.update(hidden.values())
        self.locals.add(acc)
        self.bind(block, acc, block.graph.apply(P["make_list"], name="comprehension",
                                                location=self.loc(e)), e)
        end = self.stmts(ast.fix_missing_locations(ast.Module(body, [])).body, block)
        assert end is block, "a comprehension's loop returns to its block"
        result = self.read(block, acc, e)
        result.debug.name = "comprehension"
        self.root.lists_made = getattr(self.root, "lists_made", set()) | {id(result)}
        return result

    def makes_sequence(self, node: Node) -> bool:
        """Whether node certainly is a list or a tuple (so `node * n` is `seq_repeat`): made
        as one, or a slice of one."""
        if primitive_name(node) == "getitem" and primitive_name(node.args[1]) == "make_slice":
            node = node.args[0]
        return primitive_name(node) in _SEQUENCE_MAKERS \
            or id(node) in getattr(self.root, "lists_made", ())

    def list_update(self, e: ast.Call, block: Block) -> Node:
        """`xs.append(v)`, `xs.extend(ys)`, `xs.pop(i)`, `xs.insert(i, v)`, `xs.remove(v)`,
        `xs.sort(key=..., reverse=...)`, `xs.reverse()` on a local list: a new list bound to
        `xs` again (`xs = list_append(xs, v)`; the positions the others need come from
        frontend/builtin_functions.py).  Python changes the list in place, so this is
        refused where another name, container or closure, or the caller, may see it:
        `_check_updates` proves it, as for `y[i] = v`."""
        attr, obj = e.func.attr, e.func.value
        if not isinstance(obj, ast.Name) or obj.id not in self.locals:
            what = ast.unparse(obj)
            self.error(e, f"`{what}.{attr}()` changes a list in place; compiled code can only "
                       "update a list held by a local variable, by making a new one",
                       f"build a local list first: `xs = list({what})`, then `xs.{attr}(...)`")
        name = obj.id
        keywords = ("key", "reverse") if attr == "sort" else ()
        for k in e.keywords:
            if k.arg not in keywords:
                self.error(e, f"`.{attr}()` takes no keyword argument `{k.arg}`",
                           "`.sort()` takes `key=` and `reverse=`" if attr == "sort" else None)
        arity = {"append": (1,), "extend": (1,), "pop": (0, 1), "insert": (2,),
                 "remove": (1,), "sort": (0,), "reverse": (0,)}[attr]
        if len(e.args) not in arity:
            self.error(e, f"`.{attr}()` takes {' or '.join(map(str, arity))} positional "
                       f"argument{'s' if max(arity) != 1 else ''}, got {len(e.args)}")
        loc = self.loc(e)
        args = [self.expr(a, block) for a in e.args]
        xs = self.read(block, name, obj)
        result = Constant(None)

        def position(helper, *operands, **options):
            fn = self.global_value(helper, f"list.{attr}", e)
            return block.graph.apply(fn, *self.bind_graph(fn.value, [xs, *operands], options,
                                                          e), location=loc)

        if attr == "append":
            new = update = block.graph.apply(P["list_append"], xs, args[0], location=loc)
        elif attr == "extend":
            new = update = block.graph.apply(P["list_extend"], xs, args[0], location=loc)
        elif attr == "insert":
            new = update = block.graph.apply(P["list_unpop"], xs, position(
                builtin_functions.insert_position, args[0]), args[1], location=loc)
        elif attr in ("sort", "reverse"):
            order = position(builtin_functions.sort_order, **{
                k.arg: self.expr(k.value, block) for k in e.keywords}) if attr == "sort" \
                else position(builtin_functions.reversed_order)
            new = update = block.graph.apply(P["list_permute"], xs, order, location=loc)
        else:
            if attr == "remove":
                args = [position(builtin_functions.remove_position, args[0])]
            update = block.graph.apply(P["list_pop"], *self.bind_primitive(
                P["list_pop"], [xs] + args, {}, e), location=loc)
            if attr == "pop":
                result = block.graph.apply(P["getitem"], update, 0, location=loc)
            new = block.graph.apply(P["getitem"], update, 1, location=loc)
        if "." not in name:     # a comprehension's own list is never shared
            self.root.updates.append((update, name, e))
        new.debug.name = name
        self.root.assigned.append((new, name))
        self.bind(block, name, new, obj)
        return result

    def binop(self, op: ast.operator, left: Node, right: Node, e: ast.AST, block: Block) -> Node:
        prim = _BINOPS.get(type(op))
        if prim is None:
            self.error(e, f"the operator {type(op).__name__} is not supported")
        return block.graph.apply(P[prim], left, right, location=self.loc(e))

    def in_place(self, op: ast.operator, old: Node, stmt: ast.AugAssign, block: Block) -> Node:
        """`old op= v` on an element `y[k]` (`stmt.value` is v): Python's in-place operator
        on the element, which numpy applies to an array in place (keeping its dtype)."""
        value = self.binop(op, old, self.expr(stmt.value, block), stmt, block)
        value.set_inputs([Constant(P["inplace_" + value.fn.value.name]), *value.args])
        return value

    def expr_BinOp(self, e, block):
        left, right = self.expr(e.left, block), self.expr(e.right, block)
        if isinstance(e.op, ast.Mult) and (self.makes_sequence(left)
                                           or self.makes_sequence(right)):
            xs, n = (left, right) if self.makes_sequence(left) else (right, left)
            return block.graph.apply(P["seq_repeat"], xs, n, location=self.loc(e))
        return self.binop(e.op, left, right, e, block)

    def expr_UnaryOp(self, e, block):
        prim = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not_", ast.Invert: "invert"}
        return block.graph.apply(P[prim[type(e.op)]], self.expr(e.operand, block),
                                 location=self.loc(e))

    def truth(self, value: Node, e: ast.AST, block: Block) -> Node:
        return block.graph.apply(P["truth"], value, location=self.loc(e))

    def branch(self, e: ast.expr | None, block: Block, label: str, value: Node | None = None):
        """A graph nested in `block` computing expression `e` (or returning `value`)."""
        b = Block(Graph(label, block.graph, self.loc(e) if e is not None else None), block)
        b.graph.output = self.expr(e, b) if e is not None else value
        return b.graph

    def expr_IfExp(self, e, block):
        cond = self.truth(self.expr(e.test, block), e.test, block)
        return self.value_switch(block, cond, self.branch(e.body, block, "ifexp_then"),
                                 self.branch(e.orelse, block, "ifexp_else"), e)

    def expr_BoolOp(self, e, block):
        """`a and b` is `b if a else a`, `a or b` is `a if a else b`: b runs only if needed."""
        result = self.expr(e.values[0], block)
        for right in e.values[1:]:
            cond = self.truth(result, e, block)
            lazy = self.branch(right, block, "and_rhs" if isinstance(e.op, ast.And) else "or_rhs")
            keep = self.branch(None, block, "short_circuit", result)
            t, f = (lazy, keep) if isinstance(e.op, ast.And) else (keep, lazy)
            result = self.value_switch(block, cond, t, f, e)
        return result

    def expr_Compare(self, e, block):
        return self.compare_chain(e, self.expr(e.left, block), block)

    def compare_chain(self, e: ast.Compare, left: Node, block: Block) -> Node:
        """`a < b < c` is `a < b and b < c` with b evaluated once."""
        right = self.expr(e.comparators[0], block)
        first = self.compare(e.ops[0], left, right, e, block)
        if len(e.ops) == 1:
            return first
        rest = ast.Compare(left=e.comparators[0], ops=e.ops[1:], comparators=e.comparators[1:])
        ast.copy_location(rest, e)
        rest.end_lineno, rest.end_col_offset = e.end_lineno, e.end_col_offset
        b = Block(Graph("compare_rest", block.graph, self.loc(e)), block)
        b.graph.output = self.compare_chain(rest, right, b)
        keep = self.branch(None, block, "short_circuit", first)
        return self.value_switch(block, self.truth(first, e, block), b.graph, keep, e)

    def compare(self, op, left, right, e, block):
        if isinstance(op, (ast.In, ast.NotIn)):
            found = block.graph.apply(P["contains"], left, right, location=self.loc(e))
            if isinstance(op, ast.In):
                return found
            return block.graph.apply(P["not_"], found, location=self.loc(e))
        prim = _CMPOPS.get(type(op))
        if prim is None:
            self.error(e, f"the comparison `{_OP_TEXT.get(type(op), type(op).__name__)}` is not "
                       "supported", "compare with == and < instead")
        return block.graph.apply(P[prim], left, right, location=self.loc(e))

    def expr_Lambda(self, e, block):
        return Constant(self.nested_function(e, block, "lambda"))

    def expr_Subscript(self, e, block):
        value = self.expr(e.value, block)
        index = self.index(e.slice, block)
        return block.graph.apply(P["getitem"], value, index, location=self.loc(e))

    def index(self, s: ast.expr, block: Block) -> Node:
        if isinstance(s, ast.Slice):
            parts = [self.expr(x, block) if x is not None else Constant(None)
                     for x in (s.lower, s.upper, s.step)]
            return block.graph.apply(P["make_slice"], *parts, location=self.loc(s))
        if isinstance(s, ast.Tuple):
            parts = [self.index(x, block) for x in s.elts]
            return block.graph.apply(P["make_tuple"], *parts, location=self.loc(s))
        return self.expr(s, block)

    def expr_Attribute(self, e, block):
        base = self.static_value(e.value, block)
        if isinstance(base, resolve.Namespace):
            if e.attr in base.values:
                return Constant(base.values[e.attr])
            if e.attr in base.functions:  # a primitive, or a function to parse
                return self.global_value(base.functions[e.attr], f"{base.name}.{e.attr}", e)
            module = getattr(resolve.module_of(base), e.attr, None)
            if resolve.namespace_of(module) is not None:
                return Constant(resolve.namespace_of(module))
            if module is None and base.name.startswith("numpy"):
                self.error(e, f"module '{base.name}' has no attribute '{e.attr}'")
            self.error(e, *resolve.unsupported(base, e.attr))
        if isinstance(base, types.ModuleType):  # another module: its globals
            if not hasattr(base, e.attr):
                self.error(e, f"module '{base.__name__}' has no attribute '{e.attr}'")
            return self.global_value(getattr(base, e.attr), e.attr, e)
        value = self.expr(e.value, block)
        prim = resolve.ATTRIBUTES.get(e.attr)
        if prim is None:    # a field of a dataclass or NamedTuple (checked by inference)
            return block.graph.apply(P["getattr_"], value, e.attr, location=self.loc(e))
        return block.graph.apply(prim, *self.bind_primitive(prim, [value], {}, e),
                                 location=self.loc(e))

    def static_value(self, e: ast.expr, block: Block):
        """The module a global name or dotted name refers to (np, math, myir, a user's
        module), as a Namespace for np/math; None for anything else."""
        if isinstance(e, ast.Name) and e.id not in self.locals and not self.enclosing_has(e.id):
            try:
                value = resolve.lookup_global(e.id, self.source.globals)
            except KeyError:
                return None
        elif isinstance(e, ast.Attribute):
            base = self.static_value(e.value, block)
            if isinstance(base, resolve.Namespace):
                base = resolve.module_of(base)
            if not isinstance(base, types.ModuleType):
                return None
            value = getattr(base, e.attr, None)
        else:
            return None
        if not isinstance(value, types.ModuleType):
            return None
        return resolve.namespace_of(value) or value

    def expr_Call(self, e, block):
        loc = self.loc(e)
        if any(isinstance(a, ast.Starred) for a in e.args) or any(k.arg is None for k in e.keywords):
            self.error(e, "`*args` / `**kwargs` in calls are not supported",
                       "pass the arguments one by one")
        ufunc_method = self.ufunc_method(e.func, block)
        if ufunc_method is not None:    # np.add.reduce(x, axis=1)
            method, leading = ufunc_method
            args = leading + [self.expr(a, block) for a in e.args]
            kwargs = {k.arg: self.expr(k.value, block) for k in e.keywords}
            return block.graph.apply(method, *self.bind_graph(
                method.value, args, kwargs, e), location=loc)
        # Methods of arrays: x.sum(axis=0) -> sum(x, axis=0)
        if isinstance(e.func, ast.Attribute) and self.static_value(e.func.value, block) is None:
            attr = e.func.attr
            if attr == "pop":
                return self.list_update(e, block)
            if attr in resolve.LIST_UPDATES:
                self.error(e, f"`.{attr}()` returns None; compiled code runs it as a statement "
                           "only", f"write `{ast.unparse(e)}` on a line of its own")
            if attr in resolve.MUTATING_METHODS:
                self.mutating_method(e)
            if attr == "_replace":      # a NamedTuple's
                if e.args:
                    self.error(e, "`_replace()` takes keyword arguments", "write "
                               "`p._replace(W=w)`")
                return self.replace_fields(self.expr(e.func.value, block), e, block)
            prim = resolve.METHODS.get(attr)
            if isinstance(prim, Primitive) and self.numpy_keywords(prim, e.args, e.keywords, 1):
                prim = resolve.REDUCTION_KEYWORDS[prim.name]
            if prim is None:
                self.error(e.func, f"unknown method `.{attr}()`",
                           f"supported methods: {', '.join(sorted(resolve.METHODS))}; methods "
                           "of your own classes are not compiled: write a function taking the "
                           f"object instead, e.g. `{attr}(obj, ...)`")
            obj = self.expr(e.func.value, block)
            args = [self.expr(a, block) for a in e.args]
            if not isinstance(prim, Primitive):   # a function of numpy_functions.py
                kwargs = {k.arg: self.expr(k.value, block) for k in e.keywords}
                fn = self.global_value(prim, f"numpy.{attr}", e.func)
                return block.graph.apply(fn, *self.bind_graph(fn.value, [obj] + args, kwargs, e),
                                         location=loc)
            if prim.name in ("reshape", "transpose") and len(args) > 1:
                args = [block.graph.apply(P["make_tuple"], *args, location=loc)]
            kwargs = {k.arg: self.expr(k.value, block) for k in e.keywords}
            return block.graph.apply(prim, *self.bind_primitive(prim, [obj] + args, kwargs, e),
                                     location=loc)
        fn = self.expr(e.func, block)
        if isinstance(fn, Constant) and fn.value is dataclasses.replace:
            if len(e.args) != 1:
                self.error(e, "dataclasses.replace() takes the object, then keyword arguments",
                           "write `dataclasses.replace(p, W=w)`")
            return self.replace_fields(self.expr(e.args[0], block), e, block)
        if isinstance(fn, Constant) and isinstance(fn.value, Macro):
            return self.macro_call(fn.value, e, block)
        if isinstance(fn, Constant) and fn.value is dict and len(e.args) == 1 \
                and not e.keywords and self.loop_iterator(e.args[0]):
            return self.expr_DictComp(_each(e.args[0], pairs=True), block)   # dict(zip(k, v))
        iterable_of = isinstance(fn, Constant) and (
            isinstance(fn.value, Primitive) and fn.value.name in _ITERABLE_BUILTINS
            or _builtin_function(fn.value) == "sorted")
        if iterable_of and _builtin_function(fn.value) == "sorted" and len(e.args) != 1:
            self.error(e, f"sorted expected 1 argument, got {len(e.args)}",
                       "pass `key=` and `reverse=` by keyword")
        args = [self.comprehension(_each(a) if self.loop_iterator(a) else a, block)
                if iterable_of and (isinstance(a, ast.GeneratorExp) or self.loop_iterator(a))
                else self.expr(a, block) for a in e.args]
        kwargs = {k.arg: self.expr(k.value, block) for k in e.keywords}
        target = _macro_target(fn)
        if target is not None:  # grad(f)(...): f's parameters, keywords and defaults
            return block.graph.apply(fn, *self.bind_graph(target, args, kwargs, e),
                                     location=loc)
        if isinstance(fn, Constant):
            value = fn.value
            if isinstance(value, Primitive):
                if value.name == "range" and not 1 <= len(args) <= 3:
                    self.error(e, "range() takes 1 to 3 arguments")
                if value.name in ("to_list", "to_tuple") and not args and not kwargs:
                    kind = "make_list" if value.name == "to_list" else "make_tuple"
                    return block.graph.apply(P[kind], location=loc)    # list(), tuple()
                if self.numpy_keywords(value, args, kwargs, 0):   # np.sum(x, where=m)
                    fn = self.global_value(resolve.REDUCTION_KEYWORDS[value.name],
                                           f"numpy.{value.name}", e.func)
                    return block.graph.apply(fn, *self.bind_graph(fn.value, args, kwargs, e),
                                             location=loc)
                if value.name in resolve.ITERABLE_EXTREMA and len(args) == 1 and not kwargs:
                    fn = self.global_value(resolve.ITERABLE_EXTREMA[value.name],
                                           value.name, e.func)
                    return block.graph.apply(fn, *args, location=loc)
                return block.graph.apply(value, *self.bind_primitive(
                    value, args, kwargs, e, _called_text(e.func)), location=loc)
            if isinstance(value, Graph) and len(args) > 1 and not kwargs \
                    and ownership.numpy_function(value) in resolve.EACH_ARGUMENT:
                return block.graph.apply(P[resolve.EACH_ARGUMENT_KIND], *[
                    block.graph.apply(fn, a, location=loc) for a in args], location=loc)
            if isinstance(value, Graph):
                bound = self.bind_graph(value, args, kwargs, e)
                if PRINTED in self.locals and bound:   # it may print: after the last print
                    bound[0] = block.graph.apply(P["depend"], bound[0],
                                                 self.value(block, PRINTED), location=loc)
                call = block.graph.apply(fn, *bound, location=loc)
                if PRINTED in self.locals:
                    block.env[PRINTED] = call
                if _builtin_function(value) == "sorted":    # a new list
                    self.root.lists_made = getattr(self.root, "lists_made", set()) | {id(call)}
                return call
            if isinstance(value, type) and issubclass(value, Exception):
                if kwargs:
                    self.error(e, "exceptions take positional arguments only")
                return block.graph.apply(P["make_exception"], value, *args, location=loc)
            if isinstance(value, type):
                return self._call_type(value, args, kwargs, e, block)
            if isinstance(value, resolve.Namespace):
                self.error(e.func, f"`{value.name}` is a module, not a function")
            self.error(e.func, f"{value!r} is not callable")
        if kwargs:
            self.error(e, "keyword arguments need a function known when compiling",
                       "pass the arguments positionally when calling a function held in a "
                       "variable")
        return block.graph.apply(fn, *args, location=loc)

    @staticmethod
    def numpy_keywords(prim: Primitive, args, kwargs, bound: int) -> bool:
        """Whether a call of a primitive of resolve.REDUCTION_KEYWORDS passes numpy's
        arguments beyond the primitive's: a positional one past those numpy's signature
        shares with it (numpy's dtype or out after x and axis; out after clip's bounds) or
        another keyword; `bound` counts the object of a method call."""
        shared = 3 if prim.name == "clip" else 2
        return prim.name in resolve.REDUCTION_KEYWORDS and (
            len(args) + bound > shared or any((k.arg if isinstance(k, ast.keyword) else k)
                                              not in prim.params for k in kwargs))

    def ufunc_method(self, func: ast.expr, block: Block):
        """(composition, leading arguments) of `UFUNC.METHOD` for a numpy ufunc reached as
        `np.add` or by a name imported from numpy (`from numpy import add`), or None for any
        other callee.  resolve.UFUNC_METHODS has the methods of their own; the others of a
        binary ufunc are resolve.UFUNC_GENERIC_METHODS, given the ufunc first.  Any other
        method of a ufunc is refused by its full name."""
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Attribute):
            base = self.static_value(func.value.value, block)
            if not isinstance(base, resolve.Namespace) or base.name != "numpy":
                return None
            ufunc = getattr(np, func.value.attr, None)
        elif isinstance(func.value, ast.Name) and self.static_value(func.value, block) is None \
                and func.value.id not in self.locals and not self.enclosing_has(func.value.id):
            ufunc = self.source.globals.get(func.value.id)
        else:
            return None
        if not isinstance(ufunc, np.ufunc):
            return None
        full = f"numpy.{ufunc.__name__}.{func.attr}"
        target = resolve.UFUNC_METHODS.get((ufunc.__name__, func.attr))
        if target is not None:
            return self.global_value(target, full, func), []
        generic = resolve.UFUNC_GENERIC_METHODS.get(func.attr)
        if generic is not None and resolve.is_binary_ufunc(ufunc.__name__):
            return self.global_value(generic, full, func), [
                self.global_value(resolve.NUMPY[ufunc.__name__], f"numpy.{ufunc.__name__}",
                                  func)]
        self.error(func, f"{full} is not supported in compiled code",
                   "the supported ufunc methods: " + ", ".join(
                       f"np.{u}.{m}" for u, m in resolve.UFUNC_METHODS) + ", and "
                   + ", ".join(f".{m}" for m in resolve.UFUNC_GENERIC_METHODS)
                   + " of the binary ufuncs (np.logaddexp.reduce, np.subtract.outer, ...)")

    def macro_call(self, macro: "Macro", e: ast.Call, block: Block) -> Node:
        """`grad(f, 'x', ...)`: the function, then parameter names or positions (constants)."""
        if macro.name == "jvp":
            return self.jvp_call(e, block)
        if macro.name == "vectorize":
            if len(e.args) != 1 or e.keywords:
                self.error(e, "vectorize() takes the scalar function only",
                           "write `vectorize(f)(x, y)`")
            return block.graph.apply(Constant(VectorizeMacro()), self.expr(e.args[0], block),
                                     location=self.loc(e))
        if not e.args or e.keywords:
            self.error(e, f"{macro.name}() takes the function, then the parameters to "
                       "differentiate with respect to", f"write `{macro.name}(f, 'x')`")
        wrt = []
        for a in e.args[1:]:
            if not (isinstance(a, ast.Constant) and isinstance(a.value, (str, int))):
                self.error(a, f"{macro.name}() needs parameter names or positions written as "
                           "constants", f"write `{macro.name}(f, 'x', 'y')` or "
                           f"`{macro.name}(f, 0, 1)`")
            wrt.append(a.value)
        fn = self.expr(e.args[0], block)
        if macro.name in JACOBIANS:
            spec = JacobianMacro(macro.name, tuple(wrt))
        else:
            spec = GradMacro(tuple(wrt), macro.name == "value_and_grad")
        return block.graph.apply(Constant(spec), fn, location=self.loc(e))

    def jvp_call(self, e: ast.Call, block: Block) -> Node:
        """`jvp(f, primals, tangents)`: the function, then two tuples."""
        if len(e.args) != 3 or e.keywords:
            self.error(e, "jvp() takes the function, the tuple of its arguments and the tuple "
                       "of their tangents", "write `jvp(f, (x, y), (dx, dy))`")
        fn, primals, tangents = (self.expr(a, block) for a in e.args)
        loc = self.loc(e)
        jvp = block.graph.apply(Constant(JvpMacro()), fn, location=loc)
        return block.graph.apply(jvp, primals, tangents, location=loc)

    def replace_fields(self, obj: Node, e: ast.Call, block: Block) -> Node:
        """`dataclasses.replace(p, W=w, b=c)`, `p._replace(W=w)`: one record_replace a field."""
        for k in e.keywords:
            obj = block.graph.apply(P["record_replace"], obj, k.arg, self.expr(k.value, block),
                                    location=self.loc(e))
        return obj

    def make_dict(self, args: list, kwargs: dict, e, block) -> Node:
        """`dict(a=x)`, `dict(d)` (a copy), `dict(d, a=x)`; `kwargs` maps the keys (names,
        or nodes for `{**d, k: v}`) to the values."""
        if len(args) > 1:
            self.error(e, "dict() takes at most one positional argument")
        loc = self.loc(e)
        if not args:
            pairs = [x for k, v in kwargs.items() for x in (Constant(k), v)]
            return block.graph.apply(P["make_dict"], *pairs, location=loc)
        d = block.graph.apply(P["copy"], args[0], location=loc)
        for k, v in kwargs.items():
            d = block.graph.apply(P["dict_setitem"], d, k, v, location=loc)
        self.dict_copies.add(id(d))
        return d

    def make_record(self, cls, args: list, kwargs: dict, e, block) -> Node:
        """`Layer(w, b)`, `Layer(W=w)` with defaults: the fields in declaration order."""
        if tree.is_namedtuple(cls):
            names, defaults = list(cls._fields), dict(cls._field_defaults)
        else:
            fields = dataclasses.fields(cls)
            if any(not f.init for f in fields) or hasattr(cls, "__post_init__"):
                self.error(e, f"{cls.__name__} computes some fields itself (`init=False` or "
                           "`__post_init__`), which compiled code does not run",
                           "construct it outside the compiled function, or give every field "
                           "as an argument")
            names = [f.name for f in fields]
            defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
            if any(f.default_factory is not dataclasses.MISSING for f in fields):
                self.error(e, f"{cls.__name__} has a field with a default_factory, which "
                           "compiled code does not call", "pass every such field explicitly")
        if len(args) > len(names):
            self.error(e, f"{cls.__name__}() takes {len(names)} fields but {len(args)} were "
                       "given")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in values:
                self.error(e, f"{cls.__name__}() got an unexpected or repeated field '{k}'")
            values[k] = v
        for n in names:
            if n not in values:
                if n not in defaults:
                    self.error(e, f"{cls.__name__}() missing required field '{n}'")
                values[n] = self.global_value(defaults[n], n, e)
        return block.graph.apply(P["make_record"], cls, *(values[n] for n in names),
                                 location=self.loc(e))

    def _call_type(self, cls, args, kwargs, e, block):
        if cls is dict:
            return self.make_dict(args, kwargs, e, block)
        if tree.is_namedtuple(cls) or dataclasses.is_dataclass(cls):
            return self.make_record(cls, args, kwargs, e, block)
        # np.float32(x) and friends: a cast
        if issubclass(cls, np.generic) and len(args) == 1 and not kwargs:
            return block.graph.apply(P["cast"], args[0], cls, location=self.loc(e))
        self.error(e.func, f"calling {cls.__name__} is not supported")

    def bind_primitive(self, prim: Primitive, args, kwargs, e, called: str | None = None
                       ) -> list:
        if prim.name == "where" and len(args) + len(kwargs) == 1:
            self.error(e, "np.where(condition) with one argument (np.nonzero) is not "
                       "supported in compiled code: its result's shape depends on the values",
                       "write np.where(condition, x, y), or use the mask in arithmetic: "
                       "x * (x > 0), np.sum(x, where=x > 0)")
        name = called or prim.name
        return prim.bind(args, kwargs, lambda msg: self.error(
            e, msg, f"call it as {name}({prim.signature()})"), called)

    def bind_graph(self, g: Graph, args: list, kwargs: dict, e) -> list:
        names = [p.debug.name for p in g.parameters]
        hint = f"call it as {g.name}({shown_parameters(names, g.defaults, _shown_default)})"
        return bind_arguments(g.name, names, g.defaults, args, kwargs,
                              lambda message: self.error(e, message, hint))

    def expr_JoinedStr(self, e, block):
        """f"a{x!r:>5}b" is concat_str("a", format(x, "r", ">5"), "b")."""
        parts = []
        for value in e.values:
            if isinstance(value, ast.Constant):
                parts.append(Constant(value.value))
                continue
            spec = Constant("") if value.format_spec is None else \
                self.expr(value.format_spec, block)
            conversion = chr(value.conversion) if value.conversion > 0 else ""
            parts.append(block.graph.apply(P["format"], self.expr(value.value, block),
                                           conversion, spec, location=self.loc(value)))
        return block.graph.apply(P["concat_str"], *parts, location=self.loc(e))


def _each(iterable: ast.expr, pairs: bool = False) -> ast.expr:
    """`(item for item in iterable)`, or `{k: v for k, v in iterable}` with `pairs`: what
    list(), tuple(), sum() or dict() of `zip(...)`, `enumerate(...)` or `reversed(...)` take
    from it, as the comprehensions that iterate over them."""
    names = [ast.Name(n, ast.Store()) for n in (("key", "value") if pairs else ("item",))]
    target = ast.Tuple(names, ast.Store()) if pairs else names[0]
    loop = [ast.comprehension(target=target, iter=iterable, ifs=[], is_async=0)]
    made = ast.DictComp(ast.Name("key", ast.Load()), ast.Name("value", ast.Load()), loop) \
        if pairs else ast.GeneratorExp(ast.Name("item", ast.Load()), loop)
    for node in ast.walk(made):
        if node is not iterable and not _within(node, iterable):
            ast.copy_location(node, iterable)
    return made


def _within(node: ast.AST, tree_: ast.AST) -> bool:
    return any(node is n for n in ast.walk(tree_))


def _macro_target(fn: Node) -> Graph | None:
    """The function that `fn`, a grad macro applied to it (`grad(f, 'x')`, `grad(grad(f))`),
    differentiates, where it is known when parsing: the gradient takes f's parameters, so a
    call of it binds keywords and defaults as a call of f does."""
    macro = False
    while isinstance(fn, Apply) and isinstance(fn.fn, Constant) \
            and isinstance(fn.fn.value, GradMacro):
        fn, macro = fn.inputs[1], True
    return fn.value if macro and is_graph_constant(fn) else None


# Builtins whose argument may be a generator expression, read as a list comprehension.
_ITERABLE_BUILTINS = frozenset({"builtin_sum", "builtin_min", "builtin_max", "to_list",
                                "to_tuple"})


# What certainly makes a list or a tuple: `xs * n` of one is `seq_repeat`, whose gradient
# sums the copies' (`mul`'s would not).
_SEQUENCE_MAKERS = frozenset({"make_list", "list_append", "list_extend", "seq_repeat",
                              "to_list", "make_tuple", "to_tuple", "list_of_length",
                              "list_permute", "list_unpop"})


def _builtin_function(value) -> str | None:
    """The builtin (`sorted`) whose composition (frontend/builtin_functions.py) value is the
    graph of, if it is one."""
    if isinstance(value, Graph) and value.location is not None \
            and value.location.filename == builtin_functions.__file__:
        return next((name for name, f in resolve.BUILTIN_FUNCTIONS.items()
                     if f.__name__ == value.name), None)
    return None


def _is_list_update(e: ast.AST) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr in resolve.LIST_UPDATES


class _Renamer(ast.NodeTransformer):
    """Renames a comprehension's variables to their hidden names (not inside a lambda that
    binds the same name)."""

    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.copy_location(ast.Name(self.names[node.id], node.ctx), node)
        return node

    def visit_Lambda(self, node):
        bound = {a.arg for a in node.args.args + node.args.posonlyargs}
        if bound & set(self.names):
            inner = _Renamer({k: v for k, v in self.names.items() if k not in bound})
            node.body = inner.visit(node.body)
            return node
        return self.generic_visit(node)


def _copy(e: ast.expr) -> ast.expr:
    """A copy of an expression, to rename without touching the function's own AST."""
    return copy.deepcopy(e)


# The truth of a condition raises only for an array of several elements: an `if` or loop
# whose values go unread is not kept for its conditions alone.
CONDITIONS = frozenset({"truth", "not_"})


def _computed(node: Apply):
    """The nodes computing node reads, node first, also in the branches, loops and closures
    of this function that it calls."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        if is_graph_constant(n) and n.value.parent is not None:
            stack.append(n.value.output)
        elif isinstance(n, Apply):
            stack.extend(n.inputs)


def _can_raise(node: Apply) -> bool:
    """Whether computing node runs an operation that can raise, also in the branches, loops
    and closures of this function that it calls (a call of another function can raise)."""
    for n in _computed(node):
        if isinstance(n, Apply):
            callee = n.fn
            nested = is_graph_constant(callee) and callee.value.parent is not None
            branch = isinstance(callee, Apply) and primitive_name(callee) == "switch"
            if not (nested or branch or primitive_name(n) in CONDITIONS) and raising_node(n):
                return True
    return False


def _keep(node: Apply, functions: set) -> None:
    """Make node's graph evaluate node whenever it runs: its output waits for node, or, where
    the output is a call of a loop or of the code after an `if` (not of a function among
    `functions`), which must stay in tail position, an argument of that call does; where
    it is an `if`'s call of a branch (a loop's body ending in `if ...: break`, whose other
    branch starts the next iteration), the condition does, so that the J transform still
    sees the loop's tail call (passes/ad.py, `loop_region`).  A node computed from that
    call's result (`steps` after `while ...: steps += 1`, read by an unused
    `n = steps if steps else 43` before `return steps`) cannot be waited for by its
    argument: the output waits for it."""
    g = node.graph
    out = g.output
    if evaluates(out, node):
        return
    branch = switch_call(out)
    if branch is not None and branch.switch.graph is g and not _reads(node, out):
        inputs = list(branch.switch.inputs)
        inputs[1] = g.apply(P["depend"], branch.cond, node, location=node.location)
        branch.switch.set_inputs(inputs)
        return
    if isinstance(out, Apply) and is_graph_constant(out.fn) and is_nested_in(g, out.fn.value) \
            and any(evaluates(arg, node) for arg in out.args):
        return      # the loop's next iteration takes it, and an argument that can raise
        #             is never dropped from a loop's call (passes/opt.py, `raising`)
    if isinstance(out, Apply) and is_graph_constant(out.fn) and out.fn.value.parent is not None \
            and out.fn.value not in functions and not _reads(node, out):
        for k, arg in enumerate(out.args):
            if not evaluates(arg, node):
                inputs = list(out.inputs)
                inputs[k + 1] = g.apply(P["depend"], arg, node, location=node.location)
                out.set_inputs(inputs)
                return
    g.output = g.apply(P["depend"], out, node, location=node.location)


def _reads(node: Apply, value: Node) -> bool:
    """Whether computing node reads value, also in the branches and closures it uses."""
    return any(n is value for n in _computed(node))


def _use_counts(graph: Graph) -> dict[int, int]:
    """How often each node is used (as an input or a graph's output) within `graph` and the
    graphs nested in it, free variables included.  Other top-level functions may still be
    half-parsed (mutual recursion), so unlike `analysis.users` this never leaves the
    function."""
    counts: dict[int, int] = {id(graph.output): 1}
    seen_graphs = {id(graph)}
    stack, seen = [graph.output], set()
    while stack:
        node = stack.pop()
        if id(node) in seen or not isinstance(node, Apply):
            continue
        seen.add(id(node))
        for inp in node.inputs:
            counts[id(inp)] = counts.get(id(inp), 0) + 1
            stack.append(inp)
            if isinstance(inp, Constant) and isinstance(inp.value, Graph) \
                    and inp.value.parent is not None and id(inp.value) not in seen_graphs:
                seen_graphs.add(id(inp.value))
                out = inp.value.output
                counts[id(out)] = counts.get(id(out), 0) + 1
                stack.append(out)
    return counts


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
           ast.BitAnd: "bitand", ast.BitOr: "bitor", ast.BitXor: "bitxor", ast.LShift: "lshift",
           ast.RShift: "rshift"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
           ast.NotEq: "ne", ast.Is: "is_", ast.IsNot: "is_not"}
_OP_TEXT = {ast.In: "in", ast.NotIn: "not in"}

# Constructs outside the subset: AST node type -> (what they are, as a plural noun phrase:
# "<what> are not supported in compiled functions", and what to write instead).
_UNSUPPORTED = {
    "Try": ("`try` statements", "check conditions with `if` and raise errors explicitly"),
    "TryStar": ("`try` statements", "check conditions with `if` and raise errors explicitly"),
    "With": ("`with` statements", "move the context manager outside the compiled function"),
    "AsyncWith": ("`async with` statements", None),
    "AsyncFor": ("`async for` loops", None),
    "AsyncFunctionDef": ("`async def` functions", "use a plain `def`"),
    "Await": ("`await` expressions", None),
    "Yield": ("`yield` expressions (generators)", "return a tuple of the values instead"),
    "YieldFrom": ("`yield from` expressions (generators)", "return a tuple of the values instead"),
    "Global": ("`global` declarations", "pass the value as an argument and return the new value"),
    "Nonlocal": ("`nonlocal` declarations",
                 "return the new value from the inner function instead of assigning it"),
    "ClassDef": ("class definitions",
                 "define classes outside; compiled code works on numbers, tuples and arrays"),
    "Delete": ("`del` statements", "just stop using the variable"),
    "Import": ("imports", "import at module level"),
    "ImportFrom": ("imports", "import at module level"),
    "Match": ("`match` statements", "use `if`/`elif`"),
    "SetComp": ("set comprehensions", "use a tuple and a `for` loop"),
    "GeneratorExp": ("generator expressions", "use a list comprehension `[... for ...]`"),
    "Set": ("set literals", "use a tuple"),
    "NamedExpr": ("assignment expressions (`:=`)", "assign in a separate statement"),
    "Starred": ("starred expressions", "pass the elements one by one"),
    "Slice": ("slices outside of indexing", None),
    "FormattedValue": ("f-strings", "use a plain string"),
    "TypeAlias": ("`type` statements", None),
}
