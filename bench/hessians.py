"""Hand-derived Hessians of the workloads that have a `--mode hessian` row: the reference
each system's Hessian is checked against, and the "limit" baseline.  (A file of its own:
workloads/ holds copies of the shared workloads, never edited here.)"""

import numpy as np


def logsumexp(x):
    """softmax p: diag(p) - p pᵀ."""
    e = np.exp(x - np.max(x))
    p = e / np.sum(e)
    return np.diag(p) - np.outer(p, p)


HESSIANS = {"logsumexp": logsumexp}
