"""Region splitting: the maximal straight-line regions of array primitives in a typed graph.

A node can join a region when its primitive has a TVM lowering for the target
(`backends.tvm.lowering.LOWERINGS`), type inference knows its result as an array of static
shape or a numpy scalar, and every operand is usable: a static constant where the rule needs
one, otherwise a value of known dtype and shape.  Calls of graphs and `switch` never join, so
regions are straight-line code inside one graph (a loop body's regions run once per iteration).

Regions grow greedily in the graph's evaluation order and stay *convex*: a node joins a
region only if none of its outside operands depends on that region (otherwise the region
would have to run both before and after that operand).  A region is then kept only if TVM is
expected to beat numpy on it (`worth_compiling`), and is replaced in the graph by one call of
its compiled `Region` (plus `getitem`s when several values leave it).
"""

from __future__ import annotations

import warnings

import numpy as np

from backends.tvm.lowering import LOWERINGS, Rule
from backends.tvm.program import Op, Program, Ref, Spec
from backends.tvm.region import Region
from backends.tvm.target import is_gpu
from myir.ir.analysis import OUTPUT, primitive_name, reachable_graphs, toposort, users
from myir.ir.edit import replace
from myir.ir.graph import Apply, Constant, Debug, Graph, Node

# Cost rule, from measurements on these machines (python -m bench, tvm-0.27.md): a region call
# costs ~3 µs of fixed overhead (argument checks, VM dispatch, results back to numpy), where a
# numpy call costs ~1 µs; per element, a fused kernel is ~2–10x cheaper than numpy's separate
# passes over memory.  So a region must either replace several numpy calls or touch enough data.
FIXED_COST_US = 3.0
NUMPY_CALL_US = 1.0
MIN_ELEMENTS = 4096
# A region of one operation fuses nothing: only its threads beat numpy, on large arrays.
# Measured on a 2-core znver5 (numpy 2.4, one add or exp, float32 and float64): TVM took
# 2.9-4.4 µs for 4,096 elements where numpy took 0.6-2.7, about even at 65,536 (float32 add
# 7.0 against 5.9 µs, float64 add 9.2 against 14.6), and 1.6-2.5x faster from 262,144 on.
# The lstm gradient's lone adds of 16x256 and 64x256 gradients made it 1.46x JAX's time.
LONE_OP_MIN_ELEMENTS = 1 << 17
# Operations numpy does as views (no data touched): alone they never pay for a region; and a
# lone transpose feeding numpy's matmul would even cost a copy BLAS does not need (measured:
# swapaxes of a 64x784 float32 array, 1.6 ms in TVM vs 4 µs for numpy's view).
VIEWS = {"reshape", "transpose", "swapaxes", "expand_dims", "squeeze", "broadcast_to",
         "getitem", "grad_check_input"}


def spec_of(abstract) -> Spec | None:
    """The Spec of a value inference typed as an array of static shape or a number."""
    from passes.abstract import AArray, AScalar

    if isinstance(abstract, AArray):
        if any(d is None for d in abstract.shape):
            return None
        return Spec(np.dtype(abstract.dtype), tuple(abstract.shape))
    if isinstance(abstract, AScalar):
        try:
            dtype = np.dtype(abstract.pytype)
        except TypeError:
            return None
        if dtype.kind in "biuf":
            return Spec(dtype, (), abstract.pytype)
    return None


def static_value(node: Node, abstract):
    """(True, value) when a node's value is known at compile time, else (False, None)."""
    from passes.abstract import ANY, AScalar

    if isinstance(node, Constant) and not isinstance(node.value, Graph):
        return True, node.value
    if isinstance(abstract, AScalar) and abstract.value is not ANY:
        return True, abstract.value
    return False, None


class Splitter:
    def __init__(self, root: Graph, types: dict, target):
        self.root = root
        self.types = types
        self.target = target
        self.gpu = is_gpu(target)
        self.users = users(root)

    # -- which nodes may join a region

    def operand(self, i: int, arg: Node, rule: Rule, inside=()) -> Ref | None:
        """How operand `i` of a node under `rule` enters a region whose nodes are `inside`:
        only its shape, the value of an op inside, a compile-time constant (where the rule
        needs one, and Python numbers written in the program), or a region input.  None
        when it cannot (not constant where it must be, or no known dtype and shape)."""
        abstract = self.types.get(arg)
        if i in rule.shape_only:
            spec = spec_of(abstract)
            return None if spec is None else Ref("shape", value=spec)
        if arg in inside:
            return Ref("op")
        known, value = static_value(arg, abstract)
        if i in rule.static or (known and isinstance(value, (bool, int, float))
                                and not isinstance(arg, Apply)):
            return Ref("const", value=value) if known else None
        return Ref("in") if spec_of(abstract) is not None else None

    def operands(self, node: Apply, rule: Rule):
        """The operand view a rule's `accepts` sees (Specs and static values), or None when
        some operand is unusable."""
        seen = []
        for i, arg in enumerate(node.args):
            ref = self.operand(i, arg, rule)
            if ref is None:
                return None
            seen.append(spec_of(self.types.get(arg)) if ref.kind == "in" else ref.value)
        return seen

    def lowerable(self, node: Node) -> bool:
        if not isinstance(node, Apply):
            return False
        rule = LOWERINGS.get(primitive_name(node) or "")
        if rule is None or (rule.gpu_only and not self.gpu):
            return False
        out = spec_of(self.types.get(node))
        if out is None or (out.scalar is not None and out.weak):
            return False     # Python numbers stay Python numbers
        seen = self.operands(node, rule)
        try:
            return seen is not None and bool(rule.accepts(seen, out))
        except (TypeError, ValueError, IndexError):
            return False

    # -- growing regions

    def split(self, g: Graph) -> list[list[Apply]]:
        """Grow regions in evaluation order; a node joins (and so merges) the regions of its
        operands as long as the result stays convex.  Each step costs what the node's
        operands and the merged regions' outside operands cost, not the regions' sizes: a
        node joins the largest region it merges, whose list of members is extended, and a
        region's membership is read through the union-find (a gradient's region of 16,000
        operations took longer to find than to compile when each step copied the region)."""
        parent: dict[int, int] = {}          # union-find over region ids

        def find(r: int) -> int:
            while parent[r] != r:
                parent[r] = r = parent[parent[r]]
            return r

        region_of: dict[Node, int] = {}
        members: dict[int, list[Apply]] = {}
        outside: dict[int, set] = {}         # operands from outside the region that
                                             # depend on some region (only they can break
                                             # convexity)
        depends: dict[Node, set] = {}        # regions a node's value depends on
        for node in toposort(g):
            if not isinstance(node, Apply) or node.graph is not g:
                continue
            deps = set()
            for a in node.inputs:
                deps.update(find(d) for d in depends.get(a, ()))
                if a in region_of:
                    deps.add(find(region_of[a]))
            depends[node] = deps
            if not self.lowerable(node):
                continue
            candidates = sorted({find(region_of[a]) for a in node.args if a in region_of},
                                key=lambda r: -len(members[r]))
            merged: list[int] = []
            for r in candidates:
                if self._convex(node, {*merged, r}, outside, depends, region_of, find):
                    merged.append(r)
            if merged:
                rid = merged[0]     # the largest
                members[rid].append(node)
            else:
                rid = len(parent)
                parent[rid] = rid
                members[rid], outside[rid] = [node], set()
            for r in merged[1:]:
                parent[r] = rid
                members[rid].extend(members.pop(r))
                outside[rid] |= outside.pop(r)
            region_of[node] = rid

            def out(b):
                return b not in region_of or find(region_of[b]) != rid
            if len(merged) > 1:     # what one merged region used from another is inside now
                outside[rid] = {b for b in outside[rid] if out(b)}
            outside[rid].update(b for b in node.args if depends.get(b) and out(b))
        return [sorted(m, key=lambda n: n.debug.id) for m in members.values()
                if self.worth_compiling(m)]

    @staticmethod
    def _convex(node, merged, outside, depends, region_of, find) -> bool:
        """Whether `node` plus the regions `merged` form a convex set: no value they use
        from outside depends on any of them."""
        used = set(node.args).union(*(outside[r] for r in merged))
        return all(not any(find(d) in merged for d in depends.get(b, ()))
                   for b in used if b not in region_of or find(region_of[b]) not in merged)

    def worth_compiling(self, nodes: list[Apply]) -> bool:
        if all(primitive_name(n) in VIEWS for n in nodes):
            return False    # numpy makes these views without touching the data
        specs = [spec_of(self.types[n]) for n in nodes]
        arrays = [s for s in specs if s.scalar is None]
        if not arrays:
            return False    # numbers only: Python/numpy scalar code is faster than any call
        elements = max(s.size for s in arrays)
        if self.gpu:
            return True
        if len(nodes) == 1:
            return elements >= LONE_OP_MIN_ELEMENTS
        if elements >= MIN_ELEMENTS:
            return True
        # Small arrays: worth it when the region replaces several numpy calls and hands back
        # few values (each result leaving the region is another array numpy would not have
        # had to keep: an lstm step's region with 14 of its 25 values leaving was slower than
        # numpy).
        inside = set(nodes)
        leaving = sum(1 for n in nodes if self.leaves(n, inside))
        return len(nodes) * NUMPY_CALL_US > FIXED_COST_US and leaving * 3 <= len(nodes)

    # -- replacing a region by a call

    def leaves(self, node: Apply, inside) -> bool:
        """Whether the value of `node` is used outside the nodes `inside`."""
        return any(i == OUTPUT or u not in inside for u, i in self.users.get(node, ()))

    def program(self, nodes: list[Apply]):
        index = {n: i for i, n in enumerate(nodes)}
        inputs: list[Node] = []
        ops = []
        for n in nodes:
            rule = LOWERINGS[primitive_name(n)]
            refs = []
            for i, arg in enumerate(n.args):
                ref = self.operand(i, arg, rule, index)
                if ref.kind == "op":
                    ref = Ref("op", index[arg])
                elif ref.kind == "in":
                    if arg not in inputs:
                        inputs.append(arg)
                    ref = Ref("in", inputs.index(arg))
                refs.append(ref)
            ops.append(Op(primitive_name(n), tuple(refs), spec_of(self.types[n])))
        outputs = [n for n in nodes if self.leaves(n, index)]
        program = Program(tuple(spec_of(self.types[a]) for a in inputs), tuple(ops),
                          tuple(index[n] for n in outputs))
        return program, inputs, outputs

    def replace_region(self, g: Graph, nodes: list[Apply], number: int,
                       lowered: set) -> Region | None:
        """`lowered`: the nodes of every region; a GPU region's result that only they use
        stays on the device.  A region TVM fails to compile stays as it was (numpy), with a
        warning: None."""
        program, inputs, outputs = self.program(nodes)
        on_device = [self.gpu and all(i != OUTPUT and u in lowered
                                      for u, i in self.users.get(o, ())) for o in outputs]
        try:
            region = Region(f"region{number}", program, self.target,
                            [_name(n) for n in inputs], [_name(n) for n in outputs], on_device)
        except Exception as e:  # noqa: BLE001 - TVM's own errors must not reach the user
            lines = str(e).strip().splitlines()
            why = lines[-1] if lines else type(e).__name__
            prims = ", ".join(op.prim for op in program.ops)
            warnings.warn(f"TVM could not compile a region ({prims}); it runs in numpy "
                          f"instead: {why}", RuntimeWarning, stacklevel=2)
            return None
        first = min(n.debug.id for n in nodes)
        call = Apply([Constant(region), *inputs], g, Debug(f"region{number}", nodes[0].location,
                                                          id=first))
        if len(outputs) == 1:
            replace(self.root, outputs[0], call)
            self.types[call] = self.types[outputs[0]]
        else:
            for k, out in enumerate(outputs):
                item = Apply([Constant(_getitem()), call, Constant(k)], g,
                             Debug(out.debug.name, out.location, id=first + (k + 1) * 1e-6))
                replace(self.root, out, item)
                self.types[item] = self.types[out]
        return region


def _getitem():
    from myir.ir.primitives import PRIMITIVES
    return PRIMITIVES["getitem"]


def _name(node: Node) -> str:
    return node.debug.name or f"%{int(node.debug.id)}"


def compile_regions(root: Graph, types: dict, target, report) -> list[Region]:
    """Replace every worthwhile region of the program by a call of its compiled Region
    (mutates `root`'s graphs; `types` gains the new nodes), telling `report` each one as it
    starts (`myir/progress.py`).  Returns the regions."""
    splitter = Splitter(root, types, target)
    plans = [(g, nodes) for g in reachable_graphs(root) for nodes in splitter.split(g)]
    lowered = {n for _, nodes in plans for n in nodes}
    regions = []
    for k, (g, nodes) in enumerate(plans):
        report.stage(f"tvm region {k + 1}/{len(plans)}")
        region = splitter.replace_region(g, nodes, len(regions), lowered)
        if region is not None:
            regions.append(region)
            splitter.users = users(root)
    return regions


def has_candidates(root: Graph, types: dict) -> bool:
    """Whether any node could start a region: an array-valued primitive with a lowering.
    Checked before anything imports TVM, so scalar programs never pay for importing it."""
    from passes.abstract import AArray

    return any(isinstance(types.get(node), AArray) and primitive_name(node) in LOWERINGS
               or primitive_name(node) == "vectorize_call"
               for g in reachable_graphs(root) for node in toposort(g)
               if isinstance(node, Apply) and node.graph is g)
