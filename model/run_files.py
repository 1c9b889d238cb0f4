"""The files of a training run, written so that an interrupted run never leaves half a file: the run folder
(refused when it already holds a run, unless resuming or forced), JSON records and torch checkpoints, each written
through a temporary file and an atomic rename. Claim ids served: ``exp-*``, ``prop2-ds-quadratic``.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from bma_verify.numerics.atomic import write_atomic, write_text_atomic


def prepare_run_dir(out, *, resume: bool, force: bool):
    """The folder a preset trains into: refused when it already holds files, unless resuming or ``force``.

    Output files are never silently overwritten (``--resume`` continues the run there, ``--force`` replaces it).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a folder, but {out} is a file")
    if out.exists() and any(out.iterdir()) and not (resume or force):
        raise FileExistsError(f"{out} already holds a run; pass --resume to continue it or --force to replace it")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_json_atomic(path, data) -> None:
    """Write ``data`` as JSON through a temporary file and an atomic rename."""
    write_text_atomic(path, json.dumps(data, indent=1, default=float))


def torch_save_atomic(obj, path) -> None:
    """torch.save through a temporary file and an atomic rename (an interrupted save keeps the old file)."""
    write_atomic(path, lambda tmp: torch.save(obj, tmp))
