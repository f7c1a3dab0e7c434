"""`np.einsum` subscripts in explicit form, and einsum's gradient as einsums.

The type rule (the output's shape) and the python backend (the gradient) read subscripts the
same way, here: `...` becomes letters the subscripts do not use, right-aligned across the
operands as numpy broadcasts them, and an implicit output (no `->`) becomes numpy's: the
broadcast dimensions, then the labels used once, in the order of their character codes.
"""

from __future__ import annotations

import string

import numpy as np

_LETTERS = string.ascii_letters


def explicit(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    """Each operand's labels and the output's, `...` spelled out; ValueError as numpy's."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: {len(terms)} operands in the subscripts, {len(ndims)} given")
    unused = [c for c in _LETTERS if c not in subscripts]
    widths = [ndim - len(term.replace("...", "")) for term, ndim in zip(terms, ndims)]
    width = max([w for term, w in zip(terms, widths) if "..." in term], default=0)
    broadcast = "".join(unused[:width])
    labels = []
    for term, w, ndim in zip(terms, widths, ndims):
        if "..." in term:
            term = term.replace("...", broadcast[width - w:] if w else "")
        if len(term) != ndim:
            raise ValueError(f"einsum: subscripts '{term}' for an operand of {ndim} dimensions")
        labels.append(term)
    if arrow:
        output = output.replace("...", broadcast)
    else:
        counts = {c: "".join(labels).count(c) for c in "".join(labels)}
        output = broadcast + "".join(sorted(c for c, n in counts.items()
                                            if n == 1 and c not in broadcast))
    return labels, output


def output_shape(subscripts: str, shapes: list[tuple]) -> tuple:
    """The shape of einsum's result (None for a dimension no operand knows)."""
    labels, output = explicit(subscripts, [len(s) for s in shapes])
    dims: dict[str, list] = {}
    for term, shape in zip(labels, shapes):
        for c, d in zip(term, shape):
            dims.setdefault(c, []).append(d)

    def size(c):
        known = {d for d in dims[c] if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"einsum: dimensions of sizes {sorted(known)} for the label '{c}'")
        return known.pop() if known else None if None in dims[c] else 1
    sizes = {c: size(c) for c in dims}
    if any(c not in sizes for c in output):
        raise ValueError(f"einsum: output subscript not in any operand: '{output}'")
    return tuple(sizes[c] for c in output)


def gradients(subscripts: str, *operands_and_dout) -> tuple:
    """The gradient of each operand of `np.einsum(subscripts, *operands)` given the output's,
    dout: an einsum of the other operands and dout into the operand's labels (the output's
    subscripts swapped in), spread with ones over labels only that operand has, onto the
    diagonal (with identity matrices) where it repeats a label, and summed over the
    dimensions it broadcast."""
    *operands, dout = (np.asarray(a) for a in operands_and_dout)
    labels, output = explicit(subscripts, [a.ndim for a in operands])
    terms = labels + [output]
    arrays = operands + [dout]
    grads = []
    for i, (term, a) in enumerate(zip(labels, operands)):
        rest = [k for k in range(len(terms)) if k != i]
        elsewhere = set("".join(terms[k] for k in rest))
        unique = "".join(dict.fromkeys(term))
        kept = "".join(c for c in unique if c in elsewhere)
        r = np.einsum(",".join(terms[k] for k in rest) + "->" + kept, *(arrays[k] for k in rest))
        size = dict(zip(term, a.shape))
        parts, operands_ = [kept], [r]
        for c in unique:
            if c not in elsewhere:
                parts.append(c)
                operands_.append(np.ones(size[c], r.dtype))
        fresh = iter(c for c in _LETTERS if c not in "".join(terms))
        target, seen = [], set()
        for c in term:
            if c in seen:
                f = next(fresh)
                parts.append(c + f)
                operands_.append(np.eye(size[c], dtype=r.dtype))
                target.append(f)
            else:
                seen.add(c)
                target.append(c)
        g = np.einsum(",".join(parts) + "->" + "".join(target), *operands_)
        spread = tuple(k for k, (n, m) in enumerate(zip(a.shape, g.shape)) if n == 1 != m)
        if spread:
            g = g.sum(axis=spread, keepdims=True)
        grads.append(g)
    return tuple(grads)


def tensordot_subscripts(ndim_a: int, ndim_b: int, axes) -> str:
    """The einsum subscripts of `np.tensordot(a, b, axes)`: a's free axes, then b's."""
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(ndim_a - axes, ndim_a)), list(range(axes))
    else:
        axes_a, axes_b = ([k] if isinstance(k, (int, np.integer)) else list(k) for k in axes)
    if len(axes_a) != len(axes_b):
        raise ValueError("shape-mismatch for sum")
    axes_a = [k % ndim_a for k in axes_a]
    axes_b = [k % ndim_b for k in axes_b]
    letters = iter(_LETTERS)
    a = [next(letters) for _ in range(ndim_a)]
    b = [next(letters) for _ in range(ndim_b)]
    for i, j in zip(axes_a, axes_b):
        b[j] = a[i]
    out = [c for k, c in enumerate(a) if k not in axes_a] + \
        [c for k, c in enumerate(b) if k not in axes_b]
    return "".join(a) + "," + "".join(b) + "->" + "".join(out)


def tensordot_gradients(a, b, axes, dout) -> tuple:
    """The gradients of `np.tensordot(a, b, axes)`: einsum's."""
    return gradients(tensordot_subscripts(np.ndim(a), np.ndim(b), axes), a, b, dout)
