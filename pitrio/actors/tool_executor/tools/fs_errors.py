"""Filesystem error texts in the form pi shows them (Node.js: ``ENOENT: no such file ...``).

pi's tools let Node's filesystem errors through as the tool result text, e.g.
``ENOENT: no such file or directory, access '/home/user/project/missing.txt'``. The
descriptions are libuv's. Pure.
"""

from __future__ import annotations

import errno

# libuv's uv_strerror() texts for the codes a file tool meets.
_DESCRIPTIONS = {
    "EACCES": "permission denied",
    "EBADF": "bad file descriptor",
    "EBUSY": "resource busy or locked",
    "EEXIST": "file already exists",
    "EFBIG": "file too large",
    "EINVAL": "invalid argument",
    "EIO": "i/o error",
    "EISDIR": "illegal operation on a directory",
    "ELOOP": "too many symbolic links encountered",
    "EMFILE": "too many open files",
    "ENAMETOOLONG": "name too long",
    "ENFILE": "file table overflow",
    "ENODEV": "no such device",
    "ENOENT": "no such file or directory",
    "ENOMEM": "not enough memory",
    "ENOSPC": "no space left on device",
    "ENOTDIR": "not a directory",
    "ENOTEMPTY": "directory not empty",
    "ENXIO": "no such device or address",
    "EPERM": "operation not permitted",
    "EROFS": "read-only file system",
    "ETXTBSY": "text file is busy",
}


def error_code(exc: OSError) -> str:
    """The symbolic errno name (``ENOENT``), or ``UNKNOWN``."""
    if exc.errno is None:
        return "UNKNOWN"
    return errno.errorcode.get(exc.errno, "UNKNOWN")


def node_error_text(exc: OSError, syscall: str, path: str | None = None) -> str:
    """``<CODE>: <description>, <syscall> '<path>'`` (without the path part when ``None``)."""
    code = error_code(exc)
    description = _DESCRIPTIONS.get(code) or (exc.strerror or "unknown error").lower()
    if path is None:
        return f"{code}: {description}, {syscall}"
    return f"{code}: {description}, {syscall} '{path}'"
