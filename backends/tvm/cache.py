"""The persistent cache of compiled regions: a second process skips TVM compilation.

A compiled region is exported as a shared library, `<cache>/<key>.so`, where the key hashes
the region's program (structure, dtypes, shapes), the target, TVM's version and the source of
this backend (a change to a lowering or the schedule must not find old kernels).  Loading a
shared library runs its code, so the cache only ever loads files it wrote itself:

* the directory is created owner-only (0700) and refused if anyone else owns it or can
  write to it;
* every library is written with an HMAC-SHA256 signature (`<key>.sig`) under a per-user
  secret kept in the directory (0600); a library whose signature does not verify is ignored
  and recompiled.  Another user cannot plant a library: they can neither write the directory
  nor sign without the secret.
* writes go to a temporary file first and are renamed into place, so a concurrent reader
  never sees half a library.

The cache lives in `$MYIR_CACHE_DIR`, else `$XDG_CACHE_HOME/myir/tvm`, else `~/.cache/myir/tvm`;
`MYIR_CACHE_DIR=off` disables it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import stat
import tempfile
from pathlib import Path

from backends.tvm import load_tvm


def directory() -> Path | None:
    configured = os.environ.get("MYIR_CACHE_DIR")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "myir" / "tvm"


def key(program_key: str, target, tvm_version: str) -> str:
    text = f"{program_key}\n{target.export()}\n{tvm_version}\n{_backend_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def _backend_version() -> str:
    """A hash of this package's source: what turns a program into kernels."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


class DiskCache:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.stat()
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError(f"{root} is not owned by this user or is writable by others")
        self.secret = self._secret()

    def _secret(self) -> bytes:
        path = self.root / "secret"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        return path.read_bytes()

    def _signature(self, data: bytes) -> str:
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def load(self, name: str):
        """(the loaded module, its generated source), or (None, None) when absent or not
        ours.  The source (LLVM IR or CUDA C, for `Region.source`) is text: only shown."""
        tvm = load_tvm()

        lib, sig, src = (self.root / f"{name}{ext}" for ext in (".so", ".sig", ".txt"))
        try:
            data, expected = lib.read_bytes(), sig.read_text()
        except OSError:
            return None, None
        if not hmac.compare_digest(self._signature(data), expected):
            return None, None
        try:
            module = tvm.runtime.load_module(str(lib))
        except RuntimeError:   # e.g. built by another TVM runtime: compile afresh
            return None, None
        try:
            return module, src.read_text()
        except OSError:
            return module, None

    def store(self, name: str, executable, source: str) -> None:
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=self.root)
        os.close(fd)
        try:
            (self.root / f"{name}.txt").write_text(source)
            executable.export_library(tmp)
            data = Path(tmp).read_bytes()
            sig_tmp = Path(tmp).with_suffix(".sig")
            sig_tmp.write_text(self._signature(data))
            os.replace(tmp, self.root / f"{name}.so")
            os.replace(sig_tmp, self.root / f"{name}.sig")
        finally:
            for leftover in (Path(tmp), Path(tmp).with_suffix(".sig")):
                leftover.unlink(missing_ok=True)


_caches: dict[Path, DiskCache | None] = {}


def open_cache() -> DiskCache | None:
    """The user's disk cache, or None when disabled or unusable (then regions compile in
    every process: slower, never wrong)."""
    root = directory()
    if root is None:
        return None
    if root not in _caches:
        try:
            _caches[root] = DiskCache(root)
        except OSError:
            _caches[root] = None
    return _caches[root]
