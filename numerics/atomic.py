"""Atomic file writes shared by ``model`` (checkpoints, metrics) and ``reports`` (reports, tables, instances).

A file is written to a temporary sibling and renamed over its target in one step, so an interrupted write leaves
the previous file as it was, never half a file. It lives in ``numerics``, the lowest layer both can import.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_atomic(path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it over ``path`` atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def write_text_atomic(path, text: str, *, overwrite: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; with ``overwrite=False`` an existing file is refused."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; refusing to overwrite it")
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
