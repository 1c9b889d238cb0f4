"""Start-up of the ``bma-verify`` command, measured in one run: wall-clock seconds (best of 3) of ``--help``,
``--version``, ``check --list`` and refused arguments, against a bare Python start and against importing every claim
(what each of them cost before the command imported its heavy packages only in the command that needs them; target:
under 1 s each).

Run: ``python -m benchmarks startup`` (or ``make bench``).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.timing import best_of

TARGET_S = 1.0


def _seconds(argv: list[str]) -> float:
    return best_of(lambda: subprocess.run([sys.executable, *argv], capture_output=True, check=False))


def main() -> None:
    command = ["-m", "bma_verify.reports.entry"]
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.npy"
        empty.write_bytes(b"")
        kernel = Path(folder) / "K.npy"
        np.save(kernel, np.array([[0.9, 0.1], [0.3, 0.7]]))
        bare = _seconds(["-c", "pass"])
        claims = _seconds(["-c", "import bma_verify.reports.registry"])
        print(f"python start {bare:.2f} s; importing every claim {claims:.2f} s")
        for argv in (["--help"], ["--version"], ["check", "--help"], ["check", "--list"],
                     ["report", "--jobs", "0"], ["check", "--kernel", str(empty)],
                     ["check", "--kernel", str(kernel), "--parents=-1,5"]):
            seconds = _seconds(command + argv)
            shown = " ".join(argv).replace(folder, "DIR")
            print(f"bma-verify {shown}: {seconds:.2f} s ({seconds / claims:.2f}x importing every claim); "
                  f"target < {TARGET_S:g} s: {'met' if seconds < TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
