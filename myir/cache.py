"""The disk cache: a directory of files only this user's myir wrote, so a second process
skips work the first one did (TVM's compilation of regions, `backends/tvm/cache.py`; the
whole pipeline of a compiled function, `myir/saved.py`).

Loading what is cached runs its code (a shared library, a pickled program), so the cache
only ever loads files it wrote itself:

* the directory is created owner-only (0700) and refused if anyone else owns it or can
  write to it;
* every file is written with an HMAC-SHA256 signature (`<name>.sig`) under a per-user secret
  kept in the directory (0600); a file whose signature does not verify is ignored (and
  rebuilt).  Another user cannot plant a file: they can neither write the directory nor
  sign without the secret.
* the signature covers the file's name with its contents: a file's name is its key (what it
  was compiled from), so a file and its signature copied under another name — one function's
  program over another's — do not verify, and are ignored like any file not signed.
* writes go to a temporary file first and are renamed into place, so a concurrent reader
  never sees half a file.

The cache lives in `$MYIR_CACHE_DIR`, else `$XDG_CACHE_HOME/myir`, else `~/.cache/myir`;
`MYIR_CACHE_DIR=off` disables it.  It keeps under `$MYIR_CACHE_LIMIT_MB` (default 1024): when
a write takes it over, the least recently used files go (a read marks a file used).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import tempfile
import warnings
from pathlib import Path


def directory() -> Path | None:
    configured = os.environ.get("MYIR_CACHE_DIR")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "myir"


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

    def _signature(self, name: str, data: bytes) -> str:
        return hmac.new(self.secret, name.encode() + b"\0" + data, hashlib.sha256).hexdigest()

    def path(self, name: str) -> Path:
        return self.root / name

    def read(self, name: str) -> bytes | None:
        """The contents of file `name`, or None when absent or not signed by this user."""
        try:
            data, expected = self.path(name).read_bytes(), self.path(f"{name}.sig").read_text()
        except OSError:
            return None
        if not hmac.compare_digest(self._signature(name, data), expected):
            return None
        try:
            os.utime(self.path(name))   # used now: the last to go when the cache is trimmed
        except OSError:
            pass
        return data

    def write(self, name: str, data: bytes) -> None:
        """Store `data` as file `name`, signed; readers see the old file or the new one."""
        fd, tmp = tempfile.mkstemp(dir=self.root)
        sig_tmp = Path(f"{tmp}.sig")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            sig_tmp.write_text(self._signature(name, data))
            os.replace(sig_tmp, self.path(f"{name}.sig"))   # before the file: the new file
            os.replace(tmp, self.path(name))                 # never meets an old signature
        finally:
            for leftover in (Path(tmp), sig_tmp):
                leftover.unlink(missing_ok=True)
        self.trim()

    def trim(self) -> None:
        """Keep the cache under its size limit: when over it, remove the least recently
        used files down to 3/4 of it.  (A file whose companion went with it — a library's
        signature, say — is absent to `read`, and made again when next needed.)"""
        limit = _limit_mb() << 20
        files = []
        for entry in os.scandir(self.root):
            if entry.name != "secret" and entry.is_file():
                info = entry.stat()
                files.append((info.st_mtime_ns, info.st_size, entry.path))
        total = sum(size for _, size, _ in files)
        if total <= limit:
            return
        for _, size, path in sorted(files):
            if total <= limit * 3 // 4:
                break
            try:
                os.unlink(path)
            except OSError:     # another process removed it meanwhile
                pass
            total -= size

    def contents(self) -> dict[str, list[Path]]:
        """The files in the cache by kind: saved programs and compiled regions (with their
        signatures and shown sources)."""
        kinds: dict[str, list[Path]] = {"programs": [], "regions": []}
        for path in self.root.iterdir():
            if path.name.startswith("program-"):
                kinds["programs"].append(path)
            elif path.name.split(".", 1)[-1] in ("so", "so.sig", "txt"):
                kinds["regions"].append(path)
        return kinds

    def clear(self) -> int:
        """Remove every saved program and compiled region; the number of files removed."""
        files = [p for paths in self.contents().values() for p in paths]
        for path in files:
            path.unlink(missing_ok=True)
        return len(files)

    def write_text(self, name: str, text: str) -> None:
        """An unsigned text file, for show only (never executed or unpickled)."""
        self.path(name).write_text(text)


def _limit_mb() -> int:
    try:
        return int(os.environ.get("MYIR_CACHE_LIMIT_MB", ""))
    except ValueError:      # unset or not a number: the default
        return 1024


def source_version(*directories: str) -> str:
    """A hash of the contents of every Python file under these directories, with its path
    relative to its directory: what a cached file was made by.  Contents, not places or
    times: two copies of the same code — another checkout, install or node — share what they
    cache, and any edit changes it.  (It reads a few hundred kB once per process.)"""
    digest = hashlib.sha256()
    for d in directories:
        for path in _source_files(d):
            with open(path, "rb") as f:
                contents = f.read()
            digest.update(f"{os.path.basename(d)}/{os.path.relpath(path, d)} "
                          f"{len(contents)}\n".encode())
            digest.update(contents)
    return digest.hexdigest()


def _source_files(directory: str):
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_dir():
            yield from _source_files(entry.path)
        elif entry.name.endswith(".py"):
            yield entry.path


_caches: dict[Path, DiskCache | None] = {}
_unusable: dict[Path, str] = {}     # why a directory could not be used


def open_cache() -> DiskCache | None:
    """The user's disk cache, or None when disabled or unusable.  Unusable (it cannot be
    created, or another user could plant files in it), work is redone in every process:
    slower, never wrong, and said once per process in a warning, since a directory the user
    chose is silently not used otherwise."""
    root = directory()
    if root is None:
        return None
    if root not in _caches:
        try:
            _caches[root] = DiskCache(root)
        except OSError as e:
            _caches[root] = None
            _unusable[root] = str(e)
            warnings.warn(f"myir: the disk cache at {root} cannot be used ({e}); compiling "
                          "without it (MYIR_CACHE_DIR moves it, MYIR_CACHE_DIR=off turns it "
                          "off)", RuntimeWarning, stacklevel=2)
    return _caches[root]


def why_unusable(root: Path) -> str | None:
    """Why `open_cache` could not use the directory `root`."""
    return _unusable.get(root)
