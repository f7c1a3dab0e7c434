"""Beyond one machine: data-parallel training over MPI, through mpi4py (the optional extra
`myir[dist]`: mpi4py, and the MPI library from PyPI's `mpich` wheel or the cluster's own).

Every process runs the same script (`mpiexec -n 4 python train.py`, or srun under Slurm), as
with `torchrun` and DDP or `jax.distributed`: each compiles its step (one per node compiles,
the others load its saved program: `compile_once`), starts from rank 0's parameters
(`broadcast`), computes the gradient of its own rows of the batch (`shard`), and the ranks
combine their gradients (`allreduce`) before the same update everywhere:

    from myir import distributed as dist
    dist.init()
    step = myir.value_and_grad(loss)
    params = dist.broadcast(init_params())
    xs, ys = dist.shard(x, y)
    dist.compile_once(step, params, xs, ys)
    for _ in range(steps):
        value, g = step(params, xs, ys)
        g = dist.allreduce(g, op="mean", weight=len(xs))
        params = update(params, g)

Parameters and gradients are trees (`myir/tree.py`: tuples, lists, dicts, NamedTuples,
dataclasses) of arrays and numbers.  `allreduce` packs a tree's leaves into one flat buffer
per dtype and reduces it with `Allreduce` in place, in pieces of `PIECE_BYTES`: a few large
messages, which MPI reduces at its bandwidth-optimal algorithm, rather than a message per
leaf, each piece reduced as soon as it is packed.  Before any data moves,
the ranks compare a digest of the tree (structure, shapes, dtypes): trees that differ would
otherwise reduce one rank's weights into another's biases, a wrong answer with no error.
Where each leaf goes in the buffers, and the digest, are worked out once per structure and
leaf shapes and dtypes (`_layout`): a training loop's later steps only copy the leaves in,
exchange 24 bytes per rank (the digest and the weight of a mean), and reduce.

Without a launcher, a plain `python train.py` (or a notebook) is one process of size 1 —
with mpi4py installed or not — and every function here works unchanged.

A rank that raises ends the whole job (`init` installs the hook): the others would otherwise
wait forever in their next collective call.  The job exits non-zero, and the error is
printed with its rank.  A rank that calls `sys.exit(n)` alone raises nothing a hook can see
(Python runs no hook for SystemExit), and MPI cannot tell its exit from a finished rank's:
start such a script with mpi4py's runner, `mpiexec -n 2 python -m mpi4py train.py`, which
aborts the job on a non-zero exit too.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time

import numpy as np

from myir import tree
from myir.errors import MyirError

# Set by MPI launchers (MPICH's hydra, Open MPI, Slurm's PMI/PMIx): a process started by one
# without mpi4py would otherwise train alone, believing it is the only rank.
_LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE")

_comm = None        # COMM_WORLD once init() ran with mpi4py; None for a single process
_started = False


def _mpi():
    """mpi4py's MPI module, or None when mpi4py is not installed and no launcher started
    this process (a single process)."""
    try:
        from mpi4py import MPI
    except ImportError:
        launcher = [v for v in _LAUNCHER_VARIABLES if v in os.environ]
        if launcher:
            raise MyirError(f"this process was started by an MPI launcher (${launcher[0]} is "
                            "set) but mpi4py is not installed, so it cannot reach the other "
                            "ranks", hint="pip install 'myir[dist]' (mpi4py and mpich)") from None
        return None
    return MPI


def init() -> None:
    """Join the job: COMM_WORLD of the processes `mpiexec` started (one process without a
    launcher).  Calling it again does nothing.  The other functions call it when needed; call
    it first anyway, so that a rank raising before its first collective ends the job too."""
    global _comm, _started
    if _started:
        return
    MPI = _mpi()
    _started = True
    if MPI is None:
        return
    _comm = MPI.COMM_WORLD
    if _comm.Get_size() > 1:
        previous = sys.excepthook

        def end_the_job(kind, value, traceback):
            """An uncaught exception on one rank: print it with the rank, and abort every
            rank (MPI_Abort), rather than leave the others waiting in a collective."""
            previous(kind, value, traceback)
            sys.stderr.write(f"myir.distributed: rank {_comm.Get_rank()} of "
                             f"{_comm.Get_size()} raised {kind.__name__}; ending the job\n")
            sys.stderr.flush()
            # mpiexec forwards each rank's output through a pipe it reads on its own time,
            # and the abort kills the job at once: without this pause, a loaded machine cut
            # the traceback short
            time.sleep(0.2)
            _comm.Abort(1)

        sys.excepthook = end_the_job


def _world():
    init()
    return _comm


def rank() -> int:
    """This process's number, 0 to size() - 1."""
    comm = _world()
    return 0 if comm is None else comm.Get_rank()


def size() -> int:
    """How many processes the job has."""
    comm = _world()
    return 1 if comm is None else comm.Get_size()


def shard(*arrays):
    """This rank's rows of each array, split as `np.array_split(a, size())` splits them: the
    first `len(a) % size()` ranks have one row more.  One array gives one array back, several
    a tuple.  The arrays must have the same number of rows (the rows of a batch)."""
    if not arrays:
        raise MyirError("shard() takes the arrays to split, e.g. shard(x, y)")
    arrays = [np.asarray(a) for a in arrays]
    rows = {len(a) if a.ndim else None for a in arrays}
    if len(rows) != 1 or None in rows:
        raise MyirError(f"shard() splits rows, so its arrays need the same number of rows; "
                        f"they have {', '.join(str(a.shape) for a in arrays)}",
                        hint="shard the arrays of one batch together: xs, ys = shard(x, y)")
    r, w = rank(), size()
    parts = tuple(np.array_split(a, w)[r] for a in arrays)
    return parts[0] if len(parts) == 1 else parts


def _leaves(value, where: str = "") -> list:
    """(path, leaf) for each leaf of `value`, the path as it would be written in Python
    (`[0]['W']`, `.weights`)."""
    kind = tree.kind(value)
    if kind is tree.LEAF:
        return [(where or "the value", value)]
    attribute = kind not in (tuple, list, dict) and not tree.is_namedtuple(kind)
    out = []
    for key, child in zip(tree.keys(value), tree.children(value)):
        out += _leaves(child, f"{where}.{key}" if attribute else f"{where}[{key!r}]")
    return out


def _describe(leaf) -> tuple[np.dtype | None, str]:
    """The leaf's dtype as an array (None when it is not numbers), and what every rank's leaf
    at this place must agree on."""
    array = None
    if not isinstance(leaf, (bool, np.bool_)) and isinstance(leaf, (int, float, np.number,
                                                                    np.ndarray)):
        array = np.asarray(leaf)
    if array is None or array.dtype.kind not in "iufc":
        what = f"an array of {leaf.dtype}" if isinstance(leaf, np.ndarray) \
            else f"{type(leaf).__name__} {leaf!r:.60}"
        return None, f"{what}, not a number or an array of numbers"
    if isinstance(leaf, np.ndarray):
        return array.dtype, f"a {array.dtype} array of shape {array.shape}"
    return array.dtype, f"a {'numpy ' * isinstance(leaf, np.generic)}{type(leaf).__name__}"


def _signature(leaf):
    """What a leaf's place in a `_Layout` depends on: its type, shape and dtype (a Python
    number's dtype is numpy's for it: an int beyond int64 is no number here)."""
    if isinstance(leaf, np.ndarray):
        return type(leaf), leaf.shape, leaf.dtype
    if type(leaf) is float:
        return float
    return type(leaf), np.asarray(leaf).dtype


class _Layout:
    """What `allreduce` and `broadcast` work out about a tree once per structure and leaf
    signatures (`_layout`), rather than at every step of a training loop, which sends trees
    of one structure each time: where each leaf goes in the flat buffers, and the digest the
    ranks compare.

    `groups`: (dtype, values in all, [(leaf index, offset, size, shape)]) per dtype, in the
    order the dtypes first appear; a leaf that is a number has shape (), and `numbers` gives
    the type its value goes back as (None for an array).  `digest`: 16 bytes of the structure
    and each leaf's path, shape and dtype.  `described`: (path, description) per leaf, sent
    in full only when the ranks' digests differ; `shown`: the structure as printed.  `bad`:
    the first leaf that is not numbers, as (path, description), or None."""

    __slots__ = ("groups", "numbers", "digest", "described", "shown", "bad")

    def __init__(self, value, structure, leaves: list):
        dtypes = []
        self.described = []
        for (path, _), leaf in zip(_leaves(value), leaves):
            dtype, text = _describe(leaf)
            dtypes.append(dtype)
            self.described.append((path, text))
        self.shown = repr(structure)
        self.digest = hashlib.sha256("\n".join(
            [self.shown] + [f"{path}: {text}" for path, text in self.described]).encode()
        ).digest()[:16]
        self.bad = next((d for d, dtype in zip(self.described, dtypes) if dtype is None), None)
        self.numbers = [None if isinstance(leaf, np.ndarray) else type(leaf) for leaf in leaves]
        members: dict = {}
        for i, dtype in enumerate(dtypes):
            members.setdefault(dtype, []).append(i)
        self.groups = []
        for dtype, indices in ([] if self.bad else members.items()):
            at, placed = 0, []
            # the smallest first: the large ones, at the end, may be reduced from where
            # they are (`DIRECT_BYTES`), the small ones packed in one piece before them
            for i in sorted(indices, key=lambda i: math.prod(np.shape(leaves[i]))):
                shape = np.shape(leaves[i])
                placed.append((i, at, math.prod(shape), shape))
                at += placed[-1][2]
            self.groups.append((dtype, at, placed))


_LAYOUTS: dict = {}     # (structure, leaf signatures) -> _Layout, the oldest first
_LAYOUTS_KEPT = 64


def _layout(value) -> tuple[list, object, _Layout]:
    """`value`'s leaves, structure and `_Layout`, the layout kept from an earlier tree of the
    same structure and leaf signatures.  The key keeps a copy of the structure that holds
    none of the tree's containers (`Structure.detached`), so no earlier tree's leaves stay
    alive with it."""
    leaves, structure = tree.flatten(value)
    signatures = tuple(_signature(leaf) for leaf in leaves)
    layout = _LAYOUTS.get((structure, signatures))
    if layout is None:
        layout = _Layout(value, structure, leaves)
        if not layout.bad:      # a layout with a leaf to refuse holds its value: not kept
            if len(_LAYOUTS) >= _LAYOUTS_KEPT:
                del _LAYOUTS[next(iter(_LAYOUTS))]
            _LAYOUTS[(structure.detached(), signatures)] = layout
    return leaves, structure, layout


def _check_same_everywhere(comm, what: str, layout: _Layout, weight: float) -> np.ndarray:
    """Every rank's `weight`, once the ranks' trees are known to agree; else the same
    MyirError on every rank, naming the first leaf (in depth-first order) that differs.
    One Allgather carries each rank's 16-byte digest of its tree and its weight (so that a
    mean's total weight is known before the data moves); the trees travel in full only when
    the digests differ."""
    message = np.frombuffer(layout.digest + np.float64(weight).tobytes(), np.uint8)
    everyone = np.empty((comm.Get_size(), message.size), np.uint8)
    comm.Allgather(message, everyone)
    if (everyone[:, :16] == message[:16]).all():
        return everyone[:, 16:].copy().view(np.float64).ravel()
    everyone = comm.allgather((layout.shown, layout.described))
    structures = [s for s, _ in everyone]
    for i in range(max(len(d) for _, d in everyone)):
        at = [d[i] if i < len(d) else None for _, d in everyone]
        if len({a for a in at}) > 1:
            differing = [f"rank {r} has {a[0]}: {a[1]}" if a else f"rank {r} has no leaf there"
                         for r, a in enumerate(at)]
            break
    else:
        differing = [f"rank {r}'s is {s}" for r, s in enumerate(structures)]
    raise MyirError(f"{what}: the ranks' trees differ (structure, shapes or dtypes); the "
                    "first difference: " + "; ".join(differing),
                    hint="every rank passes a tree of the same structure, shapes and dtypes "
                         "(shard the batch, not the parameters)")


# The flat buffers are sent in pieces of this many bytes, each reduced as soon as it is
# packed: a size measured, not derived.  On 2 ranks of a node with 32 MB of L3 (MPICH,
# glibc; medians of interleaved calls, other work on the machine), a tree of 10^7 float64
# values (80 MB) reduced in 32 MiB pieces took about 0.7x the time of mpi4py's one raw
# Allreduce of a flat buffer of as many values, against 0.8x in 16 MiB pieces, 0.9x in
# 8 MiB, 1.1x in 64 MiB and 1.1-1.2x in one piece; at 2·10^6 to 4·10^6 values (one 32 MiB
# piece) 8 MiB pieces took 1.4-1.9x and one piece 1.1-1.4x, each piece being another call
# for the ranks to meet in.  Pieces a core's cache holds (1-4 MiB: packed, then reduced
# while still in cache) were no faster: at 10^6 values 1.4-2.0x the raw call against
# 1.1-1.4x in one piece, at 10^7 2 MiB pieces as fast as 32 MiB ones (calls in random
# order, load average 5-7).  What the raw call loses above 32 MiB: MPICH allocates a
# temporary as large as the call's buffer, which glibc maps afresh (above its mmap
# threshold, 32 MB at most) and the kernel faults in page by page, on every call.  Across
# nodes a piece of this size takes far longer to send than to start.
PIECE_BYTES = 32 << 20

# A sum's leaves of this many bytes or more are reduced from where they are into the result's
# buffer, a copy fewer than packing them (a mean scales each leaf as it copies it, so it
# packs); below it, a leaf's own call costs more than its copy.  On 2 ranks of this 2-core
# machine (a tree of 10^6 float64 values in four leaves, calls interleaved, 4 runs) that
# took 0.83-1.11x the raw Allreduce of one flat buffer, against 0.85-1.08x packed: the same
# within the noise here, where both ranks share one memory bus.
DIRECT_BYTES = 1 << 20


# The buffers of the last call's result, kept for the next call of the same layout: a
# training loop drops each step's reduced gradient before the next step reduces another,
# and a buffer reused is memory already mapped.  A fresh one of 8 MB (10^6 float64 values)
# cost its pages' faults and zeroing on every call, 2-2.5 ms on top of a 3-7 ms Allreduce
# (measured on 2 ranks of this 2-core machine): reusing it brought the call to the raw
# Allreduce's time.
_kept: tuple = (None, [])     # (layout, its buffers)


def _buffers(layout: _Layout) -> list:
    """A flat buffer per dtype of `layout`: the last call's, where it had this layout and
    nothing holds them any more (the result's leaves are views of them, so a result still
    alive holds its buffer: `sys.getrefcount` counts the views' `base`), else fresh ones."""
    global _kept
    kept_layout, kept = _kept
    if kept_layout is layout and all(sys.getrefcount(b) == 3 for b in kept):
        # 3: the list `kept` holds it, the loop variable b, getrefcount's argument
        buffers = kept
    else:
        buffers = [np.empty(total, dtype) for dtype, total, _ in layout.groups]
    _kept = (layout, buffers)
    return buffers


def _pack(layout: _Layout, leaves: list, send=None, scale=None, fill: bool = True,
          direct=None) -> list:
    """A flat buffer per dtype of `layout` (`_buffers`: one no earlier result holds, for the
    result's leaves are views of it), holding the leaves (times `scale` when given), or left
    as it comes when not `fill` (a Bcast's receiving ranks).  `send(piece)` is called on
    each PIECE_BYTES piece of a buffer as soon as it is filled (an Allreduce or Bcast in
    place).  With `direct(source, target)`, a leaf of DIRECT_BYTES or more is not copied
    in: each piece of it goes to `direct` with the piece of the buffer where its result goes
    (an Allreduce from the leaf itself)."""
    buffers = _buffers(layout)
    for (dtype, total, placed), buffer in zip(layout.groups, buffers):
        packed = len(placed)
        if direct is not None:      # the large leaves are the last ones (`_Layout`)
            while packed and placed[packed - 1][2] * dtype.itemsize >= DIRECT_BYTES:
                packed -= 1
        end = placed[packed][1] if packed < len(placed) else total
        _fill(buffer, dtype, placed[:packed], end, leaves, send, scale, fill)
        step = max(1, PIECE_BYTES // dtype.itemsize)
        for i, at, n, shape in placed[packed:]:
            # every rank calls `direct` alike (MPI wants IN_PLACE on all ranks or none): a
            # leaf that is not C-contiguous is raveled into a copy first
            flat = np.ravel(leaves[i])
            for start in range(0, n, step):
                end = min(start + step, n)
                direct(flat[start:end], buffer[at + start:at + end])
    return buffers


def _fill(buffer, dtype, placed: list, total: int, leaves: list, send, scale, fill) -> None:
    """Copy the leaves `placed` into `buffer[:total]` (times `scale`), calling `send` on
    each PIECE_BYTES piece as soon as it is filled (see `_pack`)."""
    step = max(1, PIECE_BYTES // dtype.itemsize)
    member, flat = 0, None      # the first leaf not yet wholly copied; it raveled, once
                                # a piece ends inside it
    for start in range(0, total, step):
        end = min(start + step, total)
        while fill and member < len(placed) and placed[member][1] < end:
            i, at, n, shape = placed[member]
            low, high = max(at, start), min(at + n, end)
            if low == at and high == at + n:        # the whole leaf in this piece
                source, target = leaves[i], buffer[at:high].reshape(shape)
            else:
                if flat is None:
                    flat = np.ravel(leaves[i])
                source, target = flat[low - at:high - at], buffer[low:high]
            if scale is None:
                np.copyto(target, source)
            elif scale == 0:    # a rank without rows: its mean (nan) must not count
                target[...] = 0
            else:
                np.multiply(source, scale, out=target, casting="unsafe")
            if high < at + n:
                break           # the rest of this leaf goes in the next piece
            member, flat = member + 1, None
        if send is not None:
            send(buffer[start:end])


def _unpack(layout: _Layout, buffers: list, structure):
    """The tree of `structure` whose leaves are views of the flat buffers, each in the form
    its original had (array, numpy scalar or Python number)."""
    out = [None] * len(layout.numbers)
    for (_, _, placed), buffer in zip(layout.groups, buffers):
        for i, at, n, shape in placed:
            number = layout.numbers[i]
            if number is None:
                out[i] = buffer[at:at + n].reshape(shape)
            elif issubclass(number, np.generic):
                out[i] = buffer[at]
            else:
                out[i] = number(buffer[at])
    return tree.unflatten(structure, out)


def _prepare(what: str, value, weight: float = 1.0):
    """(COMM_WORLD or None, the leaves, the structure, its `_Layout`, every rank's
    `weight`), once the ranks' trees are known to agree.  A leaf that is not numbers raises
    after that check, so on every rank alike."""
    comm = _world()
    leaves, structure, layout = _layout(value)
    weights = np.array([weight])
    if comm is not None and comm.Get_size() > 1:
        weights = _check_same_everywhere(comm, what, layout, weight)
    if layout.bad:
        path, text = layout.bad
        raise MyirError(f"{what}: {path} is {text}: only numbers can be reduced or "
                        "broadcast", hint="keep other values out of the tree you send")
    return comm, leaves, structure, layout, weights


def allreduce(value, op: str = "sum", weight: float | None = None):
    """The tree of the ranks' sums (op="sum") or means (op="mean") of `value`'s leaves, the
    same on every rank.

    The mean is weighted: each rank's values count `weight` times (default 1), so with
    `weight=` the number of rows this rank's gradient was averaged over, the mean of the
    ranks' mean-loss gradients is the gradient of the mean loss over the whole batch, also
    when the batch does not split evenly (`shard` of 101 rows on 2 ranks: 51 and 50).  The
    weights travel with the check that the ranks' trees agree, so each rank scales its
    values by its share of the total as it packs them: the sum of the shares is the mean.

    Leaves are numbers or numeric arrays; the result's leaves have their types (an array, a
    numpy scalar, a Python float) and dtypes.  Integer leaves are summed exactly; their mean
    is a float and raises.  Trees that differ between ranks raise a MyirError on every rank.
    """
    if op not in ("sum", "mean"):
        raise MyirError(f"allreduce() op={op!r}: the ops are 'sum' and 'mean'")
    if weight is not None and op != "mean":
        raise MyirError("allreduce(weight=) weighs the ranks in a mean", hint='use op="mean"')
    what = f"allreduce(op={op!r})"
    comm, leaves, structure, layout, weights = _prepare(
        what, value, 1.0 if weight is None else float(weight))
    if op == "mean":
        integers = [dtype for dtype, _, _ in layout.groups if dtype.kind in "iu"]
        if integers:
            raise MyirError(f"allreduce(op='mean') of {integers[0]} values: a mean of "
                            "integers is not an integer", hint="sum them, or send floats")
        bad = [f"rank {r}'s weight is {w}" for r, w in enumerate(weights)
               if not np.isfinite(w) or w < 0]
        if bad or weights.sum() == 0:
            raise MyirError(f"{what}: {'; '.join(bad) or 'every weight is 0'}: the weights "
                            "are the numbers of rows, at least one of them above 0",
                            hint="weight=len(xs), the rows of this rank's shard")
    if comm is None or comm.Get_size() == 1:
        return _unpack(layout, _pack(layout, leaves), structure)
    scale = weights[comm.Get_rank()] / weights.sum() if op == "mean" else None
    from mpi4py import MPI

    buffers = _pack(layout, leaves,
                    lambda piece: comm.Allreduce(MPI.IN_PLACE, piece, op=MPI.SUM), scale,
                    direct=None if scale is not None else
                    lambda source, target: comm.Allreduce(source, target, op=MPI.SUM))
    return _unpack(layout, buffers, structure)


def broadcast(value, root: int = 0):
    """`value` as rank `root` has it, on every rank (each rank passes a tree of the same
    structure, shapes and dtypes, e.g. its own initial parameters): the way every rank
    starts from the same parameters."""
    comm, leaves, structure, layout, _ = _prepare(f"broadcast(root={root})", value)
    if comm is None or comm.Get_size() == 1:
        return _unpack(layout, _pack(layout, leaves), structure)
    buffers = _pack(layout, leaves, lambda piece: comm.Bcast(piece, root=root),
                    fill=comm.Get_rank() == root)
    return _unpack(layout, buffers, structure)


def compile_once(compiled, *args, **kwargs):
    """The program of `compiled` for these arguments, compiled by one rank per node and
    loaded by the others from the node's disk cache (`myir/saved.py`), rather than every rank
    compiling the same program at once.  Ranks with other argument types (an uneven shard)
    compile their own.  Returns `compiled`."""
    comm = _world()
    if comm is None or comm.Get_size() == 1:
        compiled.prepare(*args, **kwargs)
        return compiled
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        if node.Get_rank() == 0:
            compiled.prepare(*args, **kwargs)
        node.Barrier()
        if node.Get_rank() != 0:
            compiled.prepare(*args, **kwargs)
    finally:
        node.Free()
    return compiled
