"""Which documents passed a schema before, remembered across processes (issue 38: start-up).

A start with a ``models.json`` or a ``settings.json`` checks it against pi 1.6.0's published
schema, and ``jsonschema`` (with ``referencing`` and ``rpds``) took ~40 ms to import for it:
most starts check the same file as the start before. A document that passed is remembered
by a digest of its JSON, the schema's bytes and the installed ``jsonschema`` (its size and
modification time, read without importing it); the next check of the same three passes
without importing anything. Only passes are kept: a document that fails is checked again
(its problems need the validator to be named). The file lives beside pitrio's bytecode
(``pitrio/__pycache__/schema-verdicts``), written the way the bytecode is (atomically, never
when ``sys.dont_write_bytecode``); anything unreadable or unwritable only means checking again.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import orjson

try:  # the C module itself: hashlib would load OpenSSL first (~4 ms)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python
    from hashlib import blake2b

VERDICTS_PATH = Path(__file__).resolve().parents[1] / "__pycache__" / "schema-verdicts"
KEPT = 64
"""How many passes are remembered (the newest)."""
_SIZE = 20


@functools.cache
def _validator_stamp() -> bytes | None:
    """The installed jsonschema's package file, as size and mtime (``None``: not found)."""
    try:
        spec = importlib.util.find_spec("jsonschema")
        origin = spec.origin if spec is not None else None
        if origin is None:
            return None
        found = os.stat(origin)
    except (ImportError, OSError, ValueError):
        return None
    return f"{found.st_size}:{found.st_mtime_ns}".encode()


@functools.cache
def _schema_bytes(schema_path: Path) -> bytes:
    return schema_path.read_bytes()


def verdict_key(document: Any, schema_path: Path) -> bytes | None:
    """The digest a pass of ``document`` against the schema is remembered by (``None`` when
    there is none to make: the document is not JSON, the schema or jsonschema not found)."""
    stamp = _validator_stamp()
    if stamp is None:
        return None
    try:
        text = orjson.dumps(document)
        schema = _schema_bytes(schema_path)
    except (TypeError, OSError):  # orjson's encode error is a TypeError
        return None
    digest = blake2b(digest_size=_SIZE)
    for part in (stamp, schema, text):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.digest()


def _read(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if len(data) % _SIZE:
        return []  # not a file this module wrote
    return [data[i : i + _SIZE] for i in range(0, len(data), _SIZE)]


def passed_before(key: bytes) -> bool:
    """Whether a document with ``key`` passed its schema in this or an earlier process."""
    return key in _read(VERDICTS_PATH)


def remember_pass(key: bytes) -> None:
    """Remember that the document with ``key`` passed (the newest :data:`KEPT` are kept)."""
    if sys.dont_write_bytecode:
        return
    path = VERDICTS_PATH
    kept = [known for known in _read(path) if known != key][-(KEPT - 1) :]
    import tempfile  # here: a start that checks nothing new writes nothing

    try:
        path.parent.mkdir(exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
        os.fchmod(fd, 0o644)  # like the bytecode beside it (mkstemp makes it private)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(b"".join([*kept, key]))
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError:
        pass  # a read-only installation: the next start checks again
