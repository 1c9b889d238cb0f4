"""Atomic file writes shared by ``model`` (checkpoints, metrics) and ``reports`` (reports, tables, instances).

A file is written to a temporary sibling and renamed over its target in one step, so an interrupted write leaves
the previous file as it was, never half a file, and the temporary sibling is removed. It lives in ``numerics``,
the lowest layer both can import.
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Callable

#: Name of a temporary sibling (``.NAME.tmp-PID``) or of a folder being replaced (``.NAME.old-PID``).
_SIBLING = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-\d+$")


def temporary_sibling(path, kind: str = "tmp") -> Path:
    """``.NAME.tmp-PID`` (or ``.NAME.old-PID``) beside ``path``: where ``path`` is built before one rename."""
    path = Path(path)
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}")


def destination(path) -> Path:
    """The path a user asked for, from it or from one of its temporary siblings (messages name the former)."""
    path = Path(path)
    match = _SIBLING.match(path.name)
    return path.with_name(match["name"]) if match else path


def write_atomic(path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it over ``path`` atomically."""
    path = Path(path)
    tmp = temporary_sibling(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:  # an error or an interruption: no temporary file is left beside the target
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path, text: str, *, overwrite: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; with ``overwrite=False`` an existing file is refused."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; refusing to overwrite it")
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
