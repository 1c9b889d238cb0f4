"""What the command reads from and writes to disk: a user's kernels, vectors and JSON files, and atomic writes.

Every reader turns a bad file into a ``ValueError`` that names the option, the file and the fix (the command
prints it on one line and exits 2). Writers go through a temporary file or folder and one rename, so an
interrupted run never leaves half a report (:mod:`numerics.atomic` holds the single file writer).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from bma_verify.numerics._validate import check_kernel
from bma_verify.numerics.atomic import write_text_atomic

__all__ = ["KERNEL_SUFFIXES", "load_kernel", "load_kernels", "read_json", "read_vector", "replace_dir",
           "write_text_atomic"]

#: File types a kernel may come in (a .npz holds many, keyed by name).
KERNEL_SUFFIXES = (".npy", ".csv", ".json", ".npz")


def read_json(path, option: str):
    """JSON from a file given by the user, or a ValueError naming the option, the file and the fix."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{option} file {path} does not exist; give the path of a JSON file")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{option} file {path} is not valid JSON ({exc}); fix or regenerate it") from None


def _kernel_array(path: Path) -> np.ndarray:
    """The raw array of a .npy, .csv (comma-separated rows) or .json (rows, or {"kernel": rows}) file."""
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".csv":
        try:
            return np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError as exc:
            raise ValueError(f"--kernel file {path}: not a CSV of numbers ({str(exc).splitlines()[0]}); write one "
                             "row of π per line, comma-separated, with no header") from None
    if suffix == ".json":
        data = read_json(path, "--kernel")
        rows = data.get("kernel") if isinstance(data, dict) else data
        try:
            return np.asarray(rows, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"--kernel file {path}: expected a list of equal-length rows of numbers (or "
                             '{"kernel": rows}), got ragged or non-numeric rows') from None
    raise ValueError(f"--kernel must be a .npy, .csv or .json file, got {path.name}")


def load_kernel(path) -> np.ndarray:
    """A user's kernel from .npy, .csv (comma-separated rows) or .json (a list of rows, or {"kernel": rows})."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"--kernel file {path} does not exist")
    kernel = check_kernel(_kernel_array(path), name="kernel (from --kernel)")
    if kernel.ndim != 2:
        raise ValueError(f"kernel (from --kernel) must be one (d, d) matrix, got shape {kernel.shape}")
    return kernel


def load_kernels(path) -> dict[str, np.ndarray]:
    """Kernels from one file (.npy, .csv, .json), a .npz with many, or a folder of such files, keyed by name."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in KERNEL_SUFFIXES)
        if not files:
            raise ValueError(f"--kernel folder {path} holds no .npy, .csv, .json or .npz file")
        out = {}
        for file in files:
            out.update({f"{file.name}:{k}" if file.suffix == ".npz" else file.name: v
                        for k, v in load_kernels(file).items()})
        return out
    if path.suffix.lower() == ".npz":
        if not path.is_file():
            raise ValueError(f"--kernel file {path} does not exist")
        with np.load(path, allow_pickle=False) as archive:
            return {name: check_kernel(archive[name], name=f"kernel {name!r} of --kernel {path}", single=True)
                    for name in archive.files}
    return {path.name: load_kernel(path)}


def read_vector(text: str, option: str) -> np.ndarray:
    """A vector from a file (.npy, .csv, .json) or an inline comma list."""
    path = Path(text)
    if path.suffix.lower() in (".npy", ".csv", ".json"):
        if not path.is_file():
            raise ValueError(f"{option} file {path} does not exist")
        if path.suffix.lower() == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix.lower() == ".json":
            return np.asarray(read_json(path, option))
        text = path.read_text()
    try:
        return np.asarray([float(x) for x in text.replace("\n", ",").split(",") if x.strip()])
    except ValueError:
        raise ValueError(f"{option} must be a file or a comma-separated list of numbers, got {text[:60]!r}") from None


def replace_dir(new: Path, target: Path) -> None:
    """Move ``new`` to ``target``; an existing ``target`` is swapped out first and deleted only afterwards."""
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)
