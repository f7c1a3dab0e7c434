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

import difflib
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
    """The target used when `compile` is given none: $MYIR_TARGET, else LLVM for the CPU.
    A blank MYIR_TARGET counts as unset, as for most environment variables (`MYIR_TARGET=`
    on a command line asks for the default)."""
    return os.environ.get("MYIR_TARGET", "").strip() or DEFAULT


def _bad(spec, why: str, hint: str = f"accepted: {ACCEPTED}") -> MyirError:
    return MyirError(f"bad TVM target {spec!r}: {why}", hint=hint)


def _from_environment(use):
    """`use(default_target())`, its errors saying that the target came from MYIR_TARGET."""
    try:
        return use(default_target())
    except MyirError as e:
        raise MyirError(f"MYIR_TARGET: {e.message}", hint=e.hint) from None


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
        out[key] = value.split(",") if key in LIST_FLAGS else value
    return out


# Flags whose value TVM takes as a list, written comma-separated: -mattr=+avx2,-fma
LIST_FLAGS = frozenset({"mattr", "keys", "libs"})


def check(spec) -> None:
    """The target's check when `compile` is called (`spec` None: MYIR_TARGET's), so that a bad
    target is reported there and not at the first call.  Spelling is checked without
    importing TVM (which takes a second).  A target that names an LLVM CPU or triple, or a
    ready `Target`, is resolved, TVM imported: only LLVM knows its CPUs (see `_check_llvm`).
    Other dicts and tags are checked by `resolve` when the first region is compiled."""
    if spec is None:
        return _from_environment(check)
    if type(spec).__name__ == "Target":
        resolve(spec)
        return
    if isinstance(spec, dict):
        spelled = spec
    elif not isinstance(spec, str):
        raise _bad(spec, f"a target is a string or a dict, not {type(spec).__name__}")
    else:
        spelled = _flag_style(spec.strip()) if spec.strip() else ""
        kind = spelled.get("kind") if isinstance(spelled, dict) else spelled
        if kind not in (*KINDS, "native") and "/" not in kind:
            raise _bad(spec, f"unknown target kind {kind!r}")
    if isinstance(spelled, dict) and spelled.get("kind") == "llvm" \
            and (spelled.get("mcpu", "native") != "native" or "mtriple" in spelled
                 or "mattr" in spelled):
        resolve(spec)


def resolve(spec=None):
    """The `tvm.target.Target` for a user's target spec (see the module docstring)."""
    if spec is None:
        return _from_environment(resolve)
    tvm = load_tvm()

    given = spec
    if isinstance(spec, tvm.target.Target):
        target = spec
    else:
        if isinstance(spec, str):
            spec = _flag_style(spec.strip())
        if spec in ("llvm", "native") or (isinstance(spec, dict) and spec.get("kind") == "llvm"
                                          and spec.get("mcpu", "native") == "native"
                                          and not _foreign(spec.get("mtriple"))):
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
    if target.kind.name == "llvm":
        _check_llvm(target, given)
    if target.kind.name == "cuda" and target.host is None:
        target = tvm.target.Target(target, host="llvm")
    return target


def _foreign(triple) -> bool:
    """Whether `triple` names another architecture than this machine's (whose CPU then is no
    default: LLVM's generic CPU for that architecture is)."""
    host = str(load_tvm().target.codegen.llvm_get_system_triple())
    return bool(triple) and triple.split("-")[0] != host.split("-")[0]


def _check_llvm(target, spec) -> None:
    """An LLVM target's triple and CPU, checked against LLVM: TVM takes any name, prints a
    note on stderr for one LLVM does not know and compiles for a generic CPU (SSE2 only on
    x86: 2-4x slower kernels, and no error)."""
    tvm = load_tvm()
    codegen = tvm.target.codegen
    host = str(codegen.llvm_get_system_triple())
    triple = str(target.attrs.get("mtriple") or host)
    architectures = sorted(str(a) for a in codegen.llvm_get_targets())
    # "arm64-apple-macos" is LLVM's aarch64: an alias passes the second test (which prints
    # TVM's note for a triple it does not know)
    if triple.split("-")[0] not in architectures \
            and not codegen.llvm_is_valid_cpu("generic", triple):
        raise _bad(spec, f"LLVM knows no target triple {triple!r}",
                   hint=f"this machine's is {host!r}; LLVM's architectures: "
                        f"{', '.join(architectures)}")
    cpus = sorted(str(c) for c in codegen.llvm_get_cpu_archlist(
        tvm.target.Target({"kind": "llvm", "mtriple": triple})))
    _check_features(target, spec, triple, cpus)
    cpu = target.attrs.get("mcpu")
    if cpu is None or codegen.llvm_is_valid_cpu(str(cpu), triple):
        return
    close = difflib.get_close_matches(str(cpu), cpus, n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    if triple == host:
        hint += (f"this machine's CPU is {str(codegen.llvm_get_system_cpu())!r} "
                 '("llvm" or "native" compiles for it); ')
    raise _bad(spec, f"LLVM knows no CPU {str(cpu)!r} for {triple}",
               hint=hint + f"LLVM's CPUs for {triple}: {', '.join(cpus)}")


def _check_features(target, spec, triple: str, cpus: list[str]) -> None:
    """`-mattr=+avx2,-fma`: each a feature some CPU of the triple has, with its sign.  LLVM
    warns on stderr of a name it does not know and ignores it."""
    attrs = [str(a) for a in (target.attrs.get("mattr") or ())]
    if not attrs:
        return
    codegen = load_tvm().target.codegen
    known = set()
    for cpu in cpus:
        known |= {str(f) for f in codegen.llvm_get_cpu_features(
            load_tvm().target.Target({"kind": "llvm", "mtriple": triple, "mcpu": cpu}))}
    for attr in attrs:
        name = attr[1:]
        if attr[:1] in "+-" and attr[:1] and name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=3)
        hint = f"did you mean {' or '.join('+' + c for c in close)}? " if close else ""
        raise _bad(spec, f"LLVM knows no CPU feature {attr!r} for {triple}",
                   hint=hint + "write each feature with its sign, as in "
                        "\"llvm -mattr=+avx2,-fma\"")


def _cuda_arch() -> str:
    tvm = load_tvm()

    dev = tvm.cuda(0)
    if dev.exist:
        return "sm_" + dev.compute_version.replace(".", "")
    return DEFAULT_CUDA_ARCH


def is_gpu(target) -> bool:
    return target.kind.name == "cuda"
