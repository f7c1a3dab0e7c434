"""Target selection: what a user may write for `target=` (and `MYIR_TARGET`, and the CLI's
`--target`), turned into one `tvm.target.Target`.

Accepted spellings, because users arrive with all of them:

* ``"llvm"`` (the default) or its alias ``"native"``: LLVM for this machine's CPU (AVX2 on
  these znver3 machines; TVM's own "llvm" without an mcpu emits SSE2 only, 2–4x slower
  kernels — write ``"llvm -mcpu=x86-64"`` for that portable baseline),
* ``"llvm -mcpu=znver3"`` / ``"cuda -arch=sm_90"``: the classic TVM flag style, which TVM 0.27
  itself no longer parses (we turn it into a dict),
* a dict such as ``{"kind": "llvm", "mcpu": "znver3"}`` or ``{"kind": "cuda", "arch": "sm_80"}``,
* a TVM tag (``"nvidia/nvidia-h100"``), or a ready `tvm.target.Target`,
* ``"cuda"`` alone: the local GPU's architecture, or sm_90 where there is no GPU (a CUDA target
  without an arch would mean sm_50, which current nvcc rejects).

CUDA targets get an LLVM host for the glue TVM generates around the kernels.
"""

from __future__ import annotations

import os

from backends.tvm import load_tvm
from myir.errors import MyirError

DEFAULT = "llvm"
DEFAULT_CUDA_ARCH = "sm_90"
ACCEPTED = ('"llvm" (default), "native", "llvm -mcpu=<cpu>", {"kind": "llvm", "mcpu": ...}, '
            '"cuda", "cuda -arch=sm_XY", {"kind": "cuda", "arch": "sm_XY"}, a TVM tag such as '
            '"nvidia/nvidia-h100", or a tvm.target.Target')
KINDS = ("llvm", "cuda")


def default_target():
    """The target used when `compile` is given none: $MYIR_TARGET, else LLVM for the CPU."""
    return os.environ.get("MYIR_TARGET") or DEFAULT


def _bad(spec, why: str) -> MyirError:
    return MyirError(f"bad TVM target {spec!r}: {why}", hint=f"accepted: {ACCEPTED}")


def _flag_style(spec: str) -> dict | str:
    """"llvm -mcpu=znver3 -opt-level=3" → {"kind": "llvm", "mcpu": "znver3", ...}."""
    kind, *flags = spec.split()
    if not flags:
        return kind
    out = {"kind": kind}
    for flag in flags:
        key, eq, value = flag.lstrip("-").partition("=")
        if not flag.startswith("-") or not eq or not key:
            raise _bad(spec, f"cannot read the flag {flag!r} (write -key=value)")
        out[key] = value
    return out


def check(spec) -> None:
    """A spelling check that does not import TVM (which takes a second): unknown kinds and
    unreadable flags are reported when `compile` is called; `resolve` checks the rest when
    the first region is compiled."""
    if spec is None or isinstance(spec, dict) or type(spec).__name__ == "Target":
        return
    if not isinstance(spec, str):
        raise _bad(spec, f"a target is a string or a dict, not {type(spec).__name__}")
    spelled = _flag_style(spec.strip()) if spec.strip() else ""
    kind = spelled.get("kind") if isinstance(spelled, dict) else spelled
    if kind not in (*KINDS, "native") and "/" not in kind:
        raise _bad(spec, f"unknown target kind {kind!r}")


def resolve(spec=None):
    """The `tvm.target.Target` for a user's target spec (see the module docstring)."""
    tvm = load_tvm()

    spec = default_target() if spec is None else spec
    if isinstance(spec, tvm.target.Target):
        target = spec
    else:
        if isinstance(spec, str):
            spec = _flag_style(spec.strip())
        if spec in ("llvm", "native") or (isinstance(spec, dict) and spec.get("kind") == "llvm"
                                          and spec.get("mcpu", "native") == "native"):
            spec = {**(spec if isinstance(spec, dict) else {"kind": "llvm"}),
                    "mcpu": tvm.target.codegen.llvm_get_system_cpu()}
        if spec == "cuda" or (isinstance(spec, dict) and spec.get("kind") == "cuda"
                              and "arch" not in spec):
            spec = {**(spec if isinstance(spec, dict) else {"kind": "cuda"}), "arch": _cuda_arch()}
        if not isinstance(spec, (str, dict)):
            raise _bad(spec, f"a target is a string or a dict, not {type(spec).__name__}")
        try:
            target = tvm.target.Target(spec)
        except Exception as e:  # TVM raises ValueError or its own errors: say it our way
            raise _bad(spec, str(e).splitlines()[0]) from None
    if target.kind.name not in KINDS:
        raise _bad(spec, f"myir compiles for {' and '.join(KINDS)}, not {target.kind.name}")
    if target.kind.name == "cuda" and target.host is None:
        target = tvm.target.Target(target, host="llvm")
    return target


def _cuda_arch() -> str:
    tvm = load_tvm()

    dev = tvm.cuda(0)
    if dev.exist:
        return "sm_" + dev.compute_version.replace(".", "")
    return DEFAULT_CUDA_ARCH


def is_gpu(target) -> bool:
    return target.kind.name == "cuda"
