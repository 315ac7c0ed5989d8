"""Reuse the methods attrs generates for pitrio's classes across processes (start-up time).

attrs builds every class's ``__init__``, ``__eq__``, ``__repr__``, ``__hash__``, ... by
compiling generated source: about 0.3 ms per class, ~90 ms of the ~270 ms a ``pitrio``
process took to answer its first command (issue 7, cold start). The compiled code depends only
on that source text and its file name, so it is kept in a cache file beside the package's own
bytecode (``pitrio/__pycache__/``, named after the interpreter's cache tag; it records the
size and mtime of attrs' code generator and is ignored when they change), found by a digest of
the source and file name.
The code objects come back exactly as ``compile`` made them (``marshal`` is how Python caches
bytecode too), and they are evaluated the way attrs does.

One value differs between processes: the salt attrs writes into ``__hash__`` (``hash()`` of a
string, randomised per process). It is replaced by a placeholder before the digest and the
compile, and the current process's salt is put back into the code's constants.

Active while the SDK (:mod:`pitrio.sdk.agent`) imports its modules (:func:`begin` /
:func:`uninstall`), and again around a module imported on first use (:func:`caching`);
anything unexpected (another attrs, an unreadable or unwritable cache, ``sys.dont_write_bytecode``
for writing, ``PITRIO_ATTRS_CACHE=0``) means attrs compiles as usual.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import re
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ENV = "PITRIO_ATTRS_CACHE"
"""``0`` turns the cache off."""

try:  # the C module itself: hashlib would load OpenSSL first (~4 ms)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python
    from hashlib import blake2b

_SALT = re.compile(r"hash\(\(\n([ \t]*)(-?\d+),")
_PLACEHOLDER = 7_291_037_815_312_446_921  # stands for the salt in keys and cached code
_FORMAT = 1


class _Cache:
    def __init__(self, path: Path, stamp: tuple[int, int]) -> None:
        self.path = path
        self.stamp = stamp  # attrs' code generator, as installed: its size and mtime
        self.entries: dict[bytes, types.CodeType] = {}
        self.used: dict[bytes, types.CodeType] = {}
        self.added = 0
        self.original: Any = None
        self.module: Any = None

    def load(self) -> None:
        try:
            data = marshal.loads(self.path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return
        if (
            isinstance(data, tuple)
            and len(data) == 3
            and data[0] == _FORMAT
            and data[1] == self.stamp
            and isinstance(data[2], dict)
        ):
            self.entries = {
                key: code
                for key, code in data[2].items()
                if isinstance(key, bytes) and isinstance(code, types.CodeType)
            }

    def save(self) -> None:
        # Entries this process did not use are kept (another process may import modules this
        # one left for their first use, issue 38) until they outnumber the used ones: then
        # only what was used is written, and entries of classes that changed since drop out.
        stale = len(self.entries) - len(self.used) > len(self.used)
        if not (self.added or stale) or sys.dont_write_bytecode:
            return
        kept = self.used if stale else self.entries
        import tempfile  # here: most starts write nothing (start-up time, issue 38)

        try:
            self.path.parent.mkdir(exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".")
            os.fchmod(fd, 0o644)  # like the bytecode beside it (mkstemp makes it private)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(marshal.dumps((_FORMAT, self.stamp, kept)))
                os.replace(temp, self.path)
            except BaseException:
                os.unlink(temp)
                raise
        except OSError:
            pass  # a read-only installation: attrs just compiles next time too
        self.added = 0

    def compile_and_eval(
        self,
        script: str,
        globs: dict[str, Any] | None,
        locs: Mapping[str, object] | None = None,
        filename: str = "",
    ) -> None:
        salts = _SALT.findall(script)
        salt: int | None = None
        if len(salts) == 1:
            salt = int(salts[0][1])
            script = _SALT.sub(lambda m: f"hash((\n{m.group(1)}{_PLACEHOLDER},", script)
        elif salts:
            self.original(script, globs, locs, filename)  # not a shape this cache knows
            return
        key = blake2b(filename.encode() + b"\0" + script.encode(), digest_size=20).digest()
        code = self.entries.get(key)
        if code is None:
            code = compile(script, filename, "exec")
            self.entries[key] = code
            self.added += 1
        self.used[key] = code
        if salt is not None:
            code = _replace_constant(code, _PLACEHOLDER, salt)
        eval(code, globs, locs)  # what attrs does with the code it compiles


def _replace_constant(code: types.CodeType, old: int, new: int) -> types.CodeType:
    # Only the code objects on the way to the constant are rebuilt (the class's __hash__ and
    # the module code holding it); the others are returned as they are: ~1 ms less of a start.
    consts = code.co_consts
    replaced: list[object] | None = None
    for index, value in enumerate(consts):
        if type(value) is int and value == old:
            value = new
        elif type(value) is types.CodeType:
            inner = _replace_constant(value, old, new)
            if inner is value:
                continue
            value = inner
        else:
            continue
        if replaced is None:
            replaced = list(consts)
        replaced[index] = value
    return code if replaced is None else code.replace(co_consts=tuple(replaced))


_active: _Cache | None = None
_idle: _Cache | None = None  # after uninstall(): what caching() serves from


def cache_path(package_dir: Path) -> Path:
    """Where the cache of this interpreter lives (it also records which attrs it is for)."""
    tag = sys.implementation.cache_tag or "unknown"
    return package_dir / "__pycache__" / f"attrs-methods.{tag}.marshal"


def install(package_dir: Path) -> None:
    """Serve attrs' compilations from the cache until :func:`uninstall`."""
    global _active
    if _active is not None or os.environ.get(ENV, "1") == "0":
        return
    try:
        import attr._make as make

        # Not attr.__version__: reading it imports importlib.metadata (~25 ms).
        generator = os.stat(make.__file__)
    except (ImportError, OSError, TypeError):
        return
    original = getattr(make, "_compile_and_eval", None)
    if original is None or not callable(original):
        return  # another attrs: leave it alone
    stamp = (generator.st_size, generator.st_mtime_ns)
    cache = _Cache(cache_path(package_dir), stamp)
    cache.load()
    cache.original = original
    cache.module = make
    make._compile_and_eval = cache.compile_and_eval
    _active = cache


def uninstall() -> None:
    """Restore attrs and write what was compiled meanwhile; collect garbage again, over what
    the process builds from now on (what the imports built is frozen)."""
    global _active, _collecting, _idle
    if _collecting:
        _collecting = False
        # What the imports built lives as long as the process: moved out of the collector's
        # generations, so the first collection after the imports does not walk it all (a
        # full collection, ~20-30 ms of a cold start, issue 38).
        gc.freeze()
        gc.enable()
    cache, _active = _active, None
    if cache is None:
        return
    if cache.module._compile_and_eval == cache.compile_and_eval:
        cache.module._compile_and_eval = cache.original
    cache.save()
    _idle = cache


@contextlib.contextmanager
def caching() -> Iterator[None]:
    """Serve attrs' compilations from the cache again meanwhile, then write what was added:
    for modules pitrio imports on first use (the RPC server, ...), whose classes would
    otherwise be compiled in every process (issue 38). Nothing happens without a cache
    (turned off, or :func:`uninstall` not called yet) or when one is active already."""
    global _active
    cache = _idle
    if cache is None or _active is not None:
        yield
        return
    make = cache.module
    if make._compile_and_eval != cache.original:
        yield  # someone else replaced attrs' function since: leave it alone
        return
    make._compile_and_eval = cache.compile_and_eval
    _active = cache
    try:
        yield
    finally:
        _active = None
        if make._compile_and_eval == cache.compile_and_eval:
            make._compile_and_eval = cache.original
        cache.save()


_begun = False
_collecting = False  # begin() turned the collector off: uninstall() turns it on again


def begin() -> None:
    """The start of pitrio's bulk imports (:mod:`pitrio._import_start`): the cache on, and
    the cyclic collector off, until :func:`uninstall`. The imports allocate ~110,000
    long-lived objects and no garbage, so the collections they would trigger only walk them
    again (~20 ms of a cold start; issue 38). Once per process."""
    global _begun, _collecting
    if _begun:
        return
    _begun = True
    _collecting = gc.isenabled()
    gc.disable()
    install(Path(__file__).resolve().parent)
