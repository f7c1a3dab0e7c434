"""myir's own workloads, beyond the shared ten (programs.py, a copy never edited here).

Written as programs.py is: numpy reached only through the module-level `np`, so that
`load_programs` runs the very same bodies on every peer; `WORKLOADS`, `WRT`, `DTYPE`,
`make_inputs` and the hand-written `GRADS` as programs.py and handwritten.py have them.
"""

import numpy as np

from bench.workloads import handwritten, programs

WORKLOADS = ("mlp_dict",)
WRT = {"mlp_dict": (0,)}
DTYPE = {"mlp_dict": "float32"}


def mlp_dict(params, x, onehot):
    """mlp with its parameters in a dict {"W1", "b1", "W2", "b2"}: its gradient is a dict."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    m = np.max(logits, axis=1, keepdims=True)
    z = logits - m
    lse = np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * (z - lse), axis=1))


def make_inputs(name, seed=0):
    assert name == "mlp_dict", name
    x, W1, b1, W2, b2, onehot = programs.make_inputs("mlp", seed)
    return ({"W1": W1, "b1": b1, "W2": W2, "b2": b2}, x, onehot)


def mlp_dict_grad(params, x, onehot):
    """The shared mlp's hand-written gradient, as a dict."""
    dW1, db1, dW2, db2 = handwritten.mlp(x, params["W1"], params["b1"], params["W2"],
                                         params["b2"], onehot)
    return ({"W1": dW1, "b1": db1, "W2": dW2, "b2": db2},)


GRADS = {"mlp_dict": mlp_dict_grad}
