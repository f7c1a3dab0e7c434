"""`python -m myir demo`: train a small neural network with a training step myir compiled.

The classifier is a one-hidden-layer MLP; the data are two interleaved spirals (a standard
problem no linear model can solve).  `train_step` is ordinary Python that calls
`value_and_grad` *inside* the compiled function: the compiler expands it into the gradient
code, optimizes the whole step, and generates Python from it.  The demo times that step
against the same step written by hand in numpy (backward pass derived on paper), and draws
the step's optimized graph as SVG.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import myir
from myir import value_and_grad
from myir.cli import backend_options


def loss(params, x, onehot):
    """Softmax cross-entropy of a tanh MLP, averaged over the batch."""
    W1, b1, W2, b2 = params
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    z = logits - np.max(logits, axis=1, keepdims=True)
    log_p = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_p, axis=1))


def train_step(params, x, onehot, lr):
    """One step of gradient descent; the gradient is taken inside compiled code."""
    value, grads = value_and_grad(loss)(params, x, onehot)
    W1, b1, W2, b2 = params
    dW1, db1, dW2, db2 = grads
    return (W1 - lr * dW1, b1 - lr * db1, W2 - lr * dW2, b2 - lr * db2), value


def numpy_train_step(params, x, onehot, lr):
    """The same step by hand: the backward pass of `loss` derived on paper."""
    W1, b1, W2, b2 = params
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    z = logits - np.max(logits, axis=1, keepdims=True)
    e = np.exp(z)
    total = np.sum(e, axis=1, keepdims=True)
    value = -np.mean(np.sum(onehot * (z - np.log(total)), axis=1))
    dlogits = (e / total * np.sum(onehot, axis=1, keepdims=True) - onehot) / x.shape[0]
    da = (dlogits @ W2.T) * (1.0 - h * h)
    return (W1 - lr * (x.T @ da), b1 - lr * da.sum(axis=0),
            W2 - lr * (h.T @ dlogits), b2 - lr * dlogits.sum(axis=0)), value


def predict(params, x):
    W1, b1, W2, b2 = params
    return np.argmax(np.tanh(x @ W1 + b1) @ W2 + b2, axis=1)


def spirals(n: int, turns: float, noise: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """`n` points on each of two interleaved spiral arms; labels 0 and 1."""
    t = np.sqrt(rng.uniform(0.0, 1.0, n)) * turns * 2 * np.pi
    arm = np.stack([np.cos(t), np.sin(t)], axis=1) * (t / (turns * 2 * np.pi))[:, None]
    x = np.concatenate([arm, -arm]) + rng.normal(0.0, noise, (2 * n, 2))
    return x, np.repeat([0, 1], n)


def init_params(hidden: int, rng) -> tuple:
    return (rng.normal(0.0, 2.0, (2, hidden)), np.zeros(hidden),
            rng.normal(0.0, hidden ** -0.5, (hidden, 2)), np.zeros(2))


class Progress:
    """A one-line progress bar with the loss (redrawn in place on a terminal; a few plain
    lines otherwise, so logs stay short)."""

    def __init__(self, total: int, stream=sys.stdout, width: int = 30):
        self.total, self.stream, self.width = total, stream, width
        self.live = stream.isatty()
        self.every = max(1, total // (50 if self.live else 5))

    def update(self, step: int, loss_value: float) -> None:
        if step % self.every and step != self.total:
            return
        done = self.width * step // self.total
        bar = "#" * done + "-" * (self.width - done)
        line = f"  [{bar}] {step:>5}/{self.total}  loss {loss_value:.4f}"
        if self.live:
            self.stream.write("\r" + line + ("\n" if step == self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def per_step_ms(step, args, repeat: int) -> float:
    """The best of five means over `repeat` calls, in milliseconds."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            step(*args)
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e3


def main(argv=()) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m myir demo",
        description="Train an MLP on two spirals with a training step compiled by myir "
                    "(value_and_grad inside compiled code), compare its speed with numpy, "
                    "and draw its optimized graph.")
    parser.add_argument("--short", action="store_true",
                        help="a quick run (300 steps on an easier, 1-turn spiral) that "
                             "reaches over 95%% accuracy; used by the tests")
    parser.add_argument("--steps", type=int, help="training steps (default 1500; short: 300)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units (default 32)")
    parser.add_argument("--lr", type=float, default=1.0, help="learning rate (default 1.0)")
    parser.add_argument("--target", metavar="T",
                        help="the TVM target to compile the step for (llvm, native, cuda, "
                             "...); default: $MYIR_TARGET, else llvm (this machine's CPU)")
    parser.add_argument("--svg", metavar="PATH", default="train_step.svg",
                        help="where to write the optimized graph of the training step "
                             "(default: train_step.svg); '' to skip")
    args = parser.parse_args(list(argv))

    steps = args.steps or (300 if args.short else 1500)
    turns = 1.0 if args.short else 1.5
    rng = np.random.default_rng(0)
    x, labels = spirals(200, turns, 0.04, rng)
    onehot = np.eye(2)[labels]
    params = init_params(args.hidden, rng)

    step = myir.compile(train_step, **backend_options(args.target))
    from backends.tvm.target import default_target

    where = f"TVM, target {args.target or default_target()}"
    print(f"myir {myir.__version__}: an MLP (2-{args.hidden}-2, tanh) on two spirals "
          f"({len(x)} points, {turns:g} turn{'s' * (turns != 1)}), {steps} steps of gradient descent, {where}")

    t0 = time.perf_counter()
    step.lower(params, x, onehot, args.lr)
    print(f"compiled train_step (value_and_grad inside) in {time.perf_counter() - t0:.2f} s")
    progress = Progress(steps)
    for i in range(1, steps + 1):
        params, value = step(params, x, onehot, args.lr)
        progress.update(i, float(value))

    accuracy = float(np.mean(predict(params, x) == labels))
    print(f"final loss {float(value):.4f}, accuracy {accuracy:.1%} on the training set")

    check = step(params, x, onehot, args.lr)
    by_hand = numpy_train_step(params, x, onehot, args.lr)
    agree = all(np.allclose(a, b) for a, b in zip(check[0] + (check[1],),
                                                  by_hand[0] + (by_hand[1],)))
    print(f"compiled step == hand-written numpy step: {agree}")
    repeat = 20 if args.short else 100
    ours = per_step_ms(step, (params, x, onehot, args.lr), repeat)
    numpy = per_step_ms(numpy_train_step, (params, x, onehot, args.lr), repeat)
    print(f"time per step: myir {ours:.3f} ms, hand-written numpy {numpy:.3f} ms "
          f"({ours / numpy:.2f}x)")

    if args.svg:
        from myir.viz import to_svg

        # the last stage: optimized again once types are known (no closure is left)
        graph = step.lower(params, x, onehot, args.lr).graph("typed")
        try:
            svg = to_svg(graph, callees=False)
        except myir.MyirError as e:
            print(f"no picture of the graph: {e}")
        else:
            with open(args.svg, "w") as f:
                f.write(svg)
            print(f"wrote {os.path.abspath(args.svg)}: the training step's optimized graph, "
                  "gradient included")
    return 0 if agree else 1
