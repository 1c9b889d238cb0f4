"""What the command reads from and writes to disk: a user's kernels, vectors and JSON files, and atomic writes.

Every reader turns a bad file into a ``ValueError`` that names the option, the file and the fix (the command
prints it on one line and exits 2). Writers go through a temporary file or folder and one rename, so an
interrupted run never leaves half a report (:mod:`numerics.atomic` holds the single file writer).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from bma_verify.numerics.validation import check_kernel
from bma_verify.numerics.atomic import destination, temporary_sibling, write_text_atomic

__all__ = ["KERNEL_SUFFIXES", "check_output", "destination", "load_kernel", "load_kernels", "read_json",
           "read_vector", "replace_dir", "write_text_atomic"]

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


def _load_npy(path: Path, option: str) -> np.ndarray:
    """The array of a .npy file; pickled Python objects are refused (loading them can run code), and an empty,
    foreign or cut-short file is named as such (NumPy says EOFError or a message about its internals)."""
    with path.open("rb") as f:
        magic = f.read(6)
    if not magic:
        raise ValueError(f"{option} file {path} is empty (0 bytes); write the array with numpy.save(path, K)")
    if magic != b"\x93NUMPY":
        raise ValueError(f"{option} file {path} is not a NumPy .npy file; write it with numpy.save")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as exc:
        if "allow_pickle" in str(exc):
            raise ValueError(f"{option} file {path} holds pickled Python objects (an object array), which are not "
                             "loaded; save a numeric array: numpy.save(path, numpy.asarray(K, dtype=float))") from None
        raise ValueError(f"{option} file {path} is cut short or damaged; write it again with numpy.save") from None


def _npz_kernels(path: Path) -> dict[str, np.ndarray]:
    """The kernels of a .npz archive, keyed by name; an empty or unreadable archive is refused."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, zipfile.BadZipFile, EOFError):
        raise ValueError(f"--kernel file {path} is not a .npz archive; write it with numpy.savez(path, name=K, ...)"
                         ) from None
    with archive:
        if not archive.files:
            raise ValueError(f"--kernel file {path} holds no arrays; save at least one kernel with "
                             "numpy.savez(path, name=K)")
        kernels = {}
        for name in archive.files:
            try:
                array = archive[name]
            except ValueError:
                raise ValueError(f"--kernel file {path}: array {name!r} holds pickled Python objects, which are not "
                                 "loaded; save numeric arrays (dtype float)") from None
            kernels[name] = check_kernel(array, name=f"kernel {name!r} of --kernel file {path}", single=True)
    return kernels


#: What a .csv or .json kernel must hold, in the words of every refusal.
KERNEL_ROWS = "a d×d list of numbers (row i holds π(· | i))"


def _what_it_holds(rows) -> str:
    """What a kernel file holds instead of rows, in a few words."""
    if isinstance(rows, dict):
        return f"an object with keys {', '.join(map(repr, list(rows)[:4]))}"
    if isinstance(rows, list):
        return "no rows" if not rows else "a list whose entries are not all rows (lists)"
    return f"the single value {rows!r:.40}"


def _number_rows(rows, where: str) -> np.ndarray:
    """``rows``, a list of equal-length lists of numbers (parsed from a .csv or .json kernel), as an array; anything
    else is refused naming the first row or entry that is wrong."""
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
        raise ValueError(f"{where}: expected {KERNEL_ROWS}, got {_what_it_holds(rows)}")
    for i, row in enumerate(rows, start=1):
        if len(row) != len(rows[0]):
            raise ValueError(f"{where}: expected {KERNEL_ROWS}; row {i} has {len(row)} entries where row 1 has "
                             f"{len(rows[0])}")
        for j, entry in enumerate(row, start=1):
            if isinstance(entry, bool) or not isinstance(entry, (int, float)):
                raise ValueError(f"{where}: expected {KERNEL_ROWS}; row {i}, entry {j} is {entry!r:.40}, not a number")
    return np.asarray(rows, dtype=float)


def _csv_rows(path: Path) -> list[list]:
    """The rows of a comma-separated file, each entry a float where it reads as one (blank lines skipped)."""
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise ValueError(f"--kernel file {path} is not text; write one row of π per line, comma-separated") from None

    def number(text: str):
        try:
            return float(text)
        except ValueError:
            return text.strip()  # left as text, for the refusal to quote

    return [[number(field) for field in line.split(",")] for line in lines]


def _kernel_array(path: Path) -> np.ndarray:
    """The raw array of a .npy, .csv (comma-separated rows) or .json (rows, or {"kernel": rows}) file."""
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _load_npy(path, "--kernel")
    if suffix == ".csv":
        return _number_rows(_csv_rows(path), f"--kernel file {path} (one row per line, comma-separated, no header)")
    if suffix == ".json":
        data = read_json(path, "--kernel")
        rows = data["kernel"] if isinstance(data, dict) and "kernel" in data else data
        return _number_rows(rows, f'--kernel file {path} (rows, or {{"kernel": rows}})')
    raise ValueError(f"--kernel must be a .npy, .csv or .json file (or a .npz of many), got {path}")


def load_kernel(path) -> np.ndarray:
    """A user's kernel from .npy, .csv (comma-separated rows) or .json (a list of rows, or {"kernel": rows}).

    Every error names the file (in a folder of kernels, the one that is wrong)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--kernel file {path} does not exist")
    name = f"--kernel file {path}"
    kernel = check_kernel(_kernel_array(path), name=name)
    if kernel.ndim != 2:
        raise ValueError(f"{name} must hold one (d, d) matrix, got shape {kernel.shape} (many kernels go in a .npz "
                         "or a folder)")
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
            out.update({f"{file.name}:{k}" if file.suffix.lower() == ".npz" else file.name: v
                        for k, v in load_kernels(file).items()})
        return out
    if path.suffix.lower() == ".npz":
        if not path.is_file():
            raise ValueError(f"--kernel file {path} does not exist")
        return _npz_kernels(path)
    return {path.name: load_kernel(path)}


def read_vector(text: str, option: str) -> np.ndarray:
    """A vector from a file (.npy, .json, or text: comma- or line-separated numbers) or an inline comma list."""
    path = Path(text)
    if path.is_file():
        if path.suffix.lower() == ".npy":
            return _load_npy(path, option)
        if path.suffix.lower() == ".json":
            return np.asarray(read_json(path, option))
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise ValueError(f"{option} file {path} is not text; give a .npy, .json or a text file of numbers"
                             ) from None
    elif path.suffix.lower() in (".npy", ".csv", ".json", ".txt") or "," not in text and not _is_number(text):
        raise ValueError(f"{option} file {path} does not exist; give a file (.npy, .csv, .json, .txt) or a "
                         "comma-separated list of numbers")
    try:
        return np.asarray([float(x) for x in text.replace("\n", ",").split(",") if x.strip()])
    except ValueError:
        source = f"file {path}" if path.is_file() else repr(text[:60])
        raise ValueError(f"{option} must be a file or a comma-separated list of numbers; {source} holds "
                         "something else") from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_output(path, option: str, kind: str = "folder") -> Path:
    """Refuse, before any work, an output ``kind`` ("folder" or "file") that is the other kind or cannot be created
    (a read-only place such as /proc): a ValueError naming the option and the user's path. Creates nothing that
    stays."""
    path = Path(path).expanduser()
    if path.exists() and path.is_dir() != (kind == "folder"):
        raise ValueError(f"{option} {path} is a {'file' if kind == 'folder' else 'folder'}; give a {kind}")
    ancestor = path.parent if kind == "file" else path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{option} {path}: {ancestor} is a file, so nothing can be created under it; give a {kind} "
                         "in a folder")
    try:  # a folder created and removed at once: the only test that /proc, /sys or a read-only mount answer honestly
        tempfile.TemporaryDirectory(dir=ancestor, prefix=f".{path.name}.probe-").cleanup()
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write under {ancestor} ({exc.strerror or exc}); choose a {kind} "
                         "you can write") from None
    return path


def replace_dir(new: Path, target: Path) -> None:
    """Move ``new`` to ``target``; an existing ``target`` is swapped out first and deleted only afterwards."""
    if target.exists():
        old = temporary_sibling(target, "old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)
