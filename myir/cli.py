"""The command line: `python -m myir show|run|demo|cache`.

    python -m myir show model.py:loss --grad w --stage optimized --format svg -o loss.svg
    python -m myir run model.py:loss "[1.0, 2.0]" 3.0 --grad w
    python -m myir demo
    python -m myir cache [--clear]

Mistakes in the input (a missing file, an unknown function, an argument that is not a
literal, a program outside the subset) are reported as one clear message and exit status
1, never as a traceback from inside myir.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import traceback
import warnings

import numpy as np

STAGES = ("parsed", "expanded", "optimized", "typed", "source")


class CliError(Exception):
    """A mistake in the command line or in what it points at: printed, exit status 1."""


def load_function(spec: str):
    """`FILE.py:FUNC` → the function, with its file imported as a module so that myir can
    read the source (and the file's own imports and globals work)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise CliError(f"expected FILE.py:FUNCTION, got {spec!r}")
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")
    module_name = os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
    if module_spec is None:
        raise CliError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:  # the user's module failed while importing: say where
        raise CliError(f"importing {path} failed: {_where_in(e, path)}") from None
    fn = getattr(module, name, None)
    if fn is None:
        found = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == module_name)
        raise CliError(f"{path} has no function {name!r}"
                       + (f" (functions there: {', '.join(found)})" if found else ""))
    if not callable(fn):
        raise CliError(f"{path}:{name} is a {type(fn).__name__}, not a function")
    return fn


def _where_in(error: BaseException, path: str) -> str:
    """`file:line: Type: message`, at the innermost frame in the user's file."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(f.filename) == os.path.abspath(path)]
    if isinstance(error, SyntaxError) and error.lineno:
        return f"{path}:{error.lineno}: SyntaxError: {error.msg}"
    where = f"{path}:{frames[-1].lineno}: " if frames else ""
    return f"{where}{type(error).__name__}: {error}"


def parse_literal(text: str):
    """A command-line argument as a Python literal; a (nested) list becomes a numpy array."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise CliError(f"argument {text!r} is not a Python literal (write numbers like 2.0, "
                       "tuples like '(1.0, 2.0)', arrays as lists like '[[1.0, 2.0]]')") from None
    if not isinstance(value, list):
        return value
    try:
        array = np.asarray(value)
    except ValueError:      # ragged: numpy cannot make one array of it
        raise CliError(f"argument {text!r} is not an array: its lists must have the same "
                       "length at each depth, like '[[1.0, 2.0], [3.0, 4.0]]'") from None
    if array.dtype.kind not in "biufc":
        raise CliError(f"argument {text!r} is not an array of numbers: its lists must hold "
                       "only numbers (or True/False), like '[1.0, 2.0]'")
    return array


def parse_wrt(text: str | None) -> tuple:
    """`x,y` or `0,2` → ('x', 'y') or (0, 2); None when --grad was not given."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise CliError("--grad needs parameter names or positions, like --grad x,y")
    return tuple(int(p) if p.isdigit() else p for p in parts)


def backend_options(target: str | None, fastmath: bool = False) -> dict:
    """`compile` options for `--target` (the TVM backend for that target, or the default
    backend and target) and `--fastmath`."""
    options = {} if target is None else {"backend": "tvm", "target": target}
    return {**options, "fastmath": True} if fastmath else options


def compiled(fn, wrt, target, fastmath=False):
    """The function to lower or run, differentiated when `wrt` is given."""
    import myir

    f = myir.compile(fn, **backend_options(target, fastmath))
    return myir.grad(f, *wrt) if wrt is not None else f


def example_args(fn, given: list[str]) -> tuple:
    """The arguments to specialise on: those given, else each parameter's default, else 1.0."""
    import inspect

    if given:
        return tuple(parse_literal(a) for a in given)
    params = inspect.signature(fn).parameters.values()
    return tuple(1.0 if p.default is inspect.Parameter.empty else p.default for p in params)


def cmd_show(args) -> int:
    from myir.viz import render, to_dot

    fn = load_function(args.function)
    fmt = args.format or _format_from_suffix(args.output)
    lowered = compiled(fn, parse_wrt(args.grad), None, args.fastmath).lower(
        *example_args(fn, args.args))
    if args.stage == "source":
        if fmt != "text":
            raise CliError("--stage source is Python code: it has only the text format")
        out = lowered.source
    else:
        if args.stage not in lowered.stages and args.stage != "optimized":
            raise CliError(f"no {args.stage} stage here (stages: {', '.join(lowered.stages)}); "
                           "the expanded stage is where a gradient appears: add --grad")
        graph = lowered.graph(args.stage)
        options = dict(graph=args.graph, callees=not args.no_callees,
                       collapse=True if args.collapse else ())
        if fmt == "text":
            out = str(graph)
        elif fmt == "dot":
            out = to_dot(graph, **options)
        else:
            out = render(to_dot(graph, **options)).decode()
    if args.output:
        with open(args.output, "w") as f:
            f.write(out if out.endswith("\n") else out + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(out)
    return 0


def _format_from_suffix(path: str | None) -> str:
    suffix = os.path.splitext(path or "")[1].lower()
    return {".svg": "svg", ".dot": "dot", ".gv": "dot"}.get(suffix, "text")


def cmd_run(args) -> int:
    fn = load_function(args.function)
    f = compiled(fn, parse_wrt(args.grad), args.target, args.fastmath)
    values = tuple(parse_literal(a) for a in args.args)
    try:
        result = f(*values)
    except Exception as e:
        from myir.errors import MyirError

        if isinstance(e, MyirError):
            raise
        raise CliError(_where_in(e, os.path.abspath(args.function.rpartition(":")[0]))) \
            from None
    print(_text(result))
    return 0


def _text(value) -> str:
    """A result as a user reads it: numpy scalars as plain numbers, arrays as numpy prints."""
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_text, value)) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, np.ndarray):
        return np.array2string(value)
    return repr(value.item() if isinstance(value, np.generic) else value)


def cmd_demo(args) -> int:
    from myir.demo import main as demo

    return demo(args.demo_args)


def cmd_cache(args) -> int:
    from myir.cache import directory, open_cache, why_unusable

    with warnings.catch_warnings():     # the error below says the same
        warnings.simplefilter("ignore")
        disk = open_cache()
    if disk is None:
        where = directory()
        raise CliError("the disk cache is off (MYIR_CACHE_DIR=off)" if where is None
                       else f"the disk cache at {where} cannot be used: {why_unusable(where)}")
    if args.clear:
        print(f"removed {disk.clear()} files from {disk.root}")
        return 0
    print(disk.root)
    for kind, paths in disk.contents().items():
        count = sum(not p.name.endswith((".sig", ".txt")) for p in paths)
        size = sum(p.stat().st_size for p in paths if p.exists())
        print(f"  {kind}: {count} ({size / 2**20:.1f} MiB)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m myir",
        description="myir: compile a differentiable subset of Python; look at its graphs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name, summary, description, args_help, grad_help):
        """A subcommand that takes FILE.py:FUNC, ARGs and --grad."""
        p = sub.add_parser(name, help=summary, description=description)
        p.add_argument("function", metavar="FILE.py:FUNC", help="the function to compile")
        p.add_argument("args", nargs="*", metavar="ARG", help=args_help)
        p.add_argument("--grad", metavar="X,Y", help=grad_help)
        p.add_argument("--fastmath", action="store_true",
                       help="compile with fastmath=True: the optimizer may use real-number "
                            "algebra that rounds differently (see the typed stage)")
        return p

    show = command(
        "show", "print or draw a function's graph at one stage of the pipeline",
        "Print or draw the graph of FILE.py:FUNC at one stage of the pipeline.",
        "example arguments (Python literals; lists become numpy arrays) to specialise on; "
        "default: each parameter's default, else 1.0",
        "show the gradient with respect to these parameters (names or positions) instead "
        "of the function")
    show.add_argument("--stage", choices=STAGES, default="optimized",
                      help="parsed: straight from the source; expanded: grad macros replaced "
                           "by the J transform (backpropagator closures); optimized: after "
                           "the optimizer (default); typed: specialised to the arguments' "
                           "types and optimized again, the graph the backend compiles; "
                           "source: the generated Python")
    show.add_argument("--format", choices=("text", "dot", "svg"),
                      help="text: the readable IR (default); dot: Graphviz source; svg: a "
                           "picture (needs Graphviz's dot or the pip package graphviz-pure). "
                           "Default: from the -o suffix (.svg, .dot), else text")
    show.add_argument("-o", "--output", metavar="OUT", help="write to this file, not stdout")
    show.add_argument("--graph", metavar="NAME",
                      help="dot/svg: draw only this graph (a name from the text form, "
                           "e.g. bprop_f) and the graphs nested in it")
    show.add_argument("--collapse", action="store_true",
                      help="dot/svg: draw each nested graph as one box in its parent")
    show.add_argument("--no-callees", action="store_true",
                      help="dot/svg: leave out the other top-level functions it calls")
    show.set_defaults(run=cmd_show)

    run = command(
        "run", "compile a function and call it with literal arguments",
        "Compile FILE.py:FUNC, call it with ARGS, print the result.",
        "arguments as Python literals: 2.0, 3, '(1.0, 2.0)'; lists become numpy arrays: "
        "'[[1.0, 2.0]]'",
        "print the gradient with respect to these parameters (names or positions) instead")
    run.add_argument("--target", metavar="T",
                     help="compile with the TVM backend for this target (llvm, cuda, "
                          "'llvm -mcpu=...'); default: the python backend")
    run.set_defaults(run=cmd_run)

    demo = sub.add_parser(
        "demo", help="train a small classifier with a compiled training step",
        description="Train an MLP on two spirals with a compiled training step "
                    "(options: python -m myir demo --help).", add_help=False)
    demo.set_defaults(run=cmd_demo)
    cache = sub.add_parser(
        "cache", help="show or clear the disk cache of saved programs and compiled regions",
        description="Show where the disk cache is and what it holds: programs saved by "
                    "compiled functions (loaded by later processes instead of compiling) "
                    "and regions compiled by TVM.")
    cache.add_argument("--clear", action="store_true", help="remove them all")
    cache.set_defaults(run=cmd_cache)
    parser.commands = {"show": show, "run": run, "demo": demo, "cache": cache}
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":  # it has its own options (python -m myir demo --help)
        args.demo_args = rest
    else:  # again, so that ARGs may come after the options too
        command = parser.commands[args.command]
        args = command.parse_intermixed_args(argv[argv.index(args.command) + 1:])
    from myir import progress
    from myir.errors import MyirError

    try:
        with progress.shown():  # a compile of more than 2 s says what it is doing
            return args.run(args)
    except (CliError, MyirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
