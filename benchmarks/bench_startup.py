"""Start-up of the ``bma-verify`` command, measured in one run: wall-clock seconds (best of 3) of ``--help``,
``--version``, ``check --list`` and refused arguments, against a bare Python start and against importing every claim
(what each of them cost before the command imported its heavy packages only in the command that needs them; target:
under 1 s each). A refused kernel file is also timed against the same refusal after importing every public name of
``numerics`` (what it cost when the package imported SciPy with itself, before its names were imported on first use).

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


#: The refusal of ARGV after importing every name of ``numerics`` first: the baseline of a refused kernel file.
EAGER_NUMERICS = """
import sys
import bma_verify.numerics as nm
[getattr(nm, name) for name in nm.__all__]
from bma_verify.reports.entry import main
sys.exit(main(sys.argv[1:]))
"""


def _refused_file(folder: str, garbled: Path) -> None:
    """Time of ``check lemma3-strict-dpi --kernel GARBLED`` against its baseline with ``numerics`` imported eagerly."""
    argv = ["check", "lemma3-strict-dpi", "--kernel", str(garbled)]
    lazy = _seconds(["-m", "bma_verify.reports.entry", *argv])
    eager = _seconds(["-c", EAGER_NUMERICS, *argv])
    shown = " ".join(argv).replace(folder, "DIR")
    print(f"bma-verify {shown} (a malformed .npy): {lazy:.2f} s against {eager:.2f} s with numerics imported eagerly "
          f"({eager / lazy:.1f}x faster); target < {TARGET_S:g} s: {'met' if lazy < TARGET_S else 'NOT met'}")


def main() -> None:
    command = ["-m", "bma_verify.reports.entry"]
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.npy"
        empty.write_bytes(b"")
        kernel = Path(folder) / "K.npy"
        np.save(kernel, np.array([[0.9, 0.1], [0.3, 0.7]]))
        garbled = Path(folder) / "garbled.npy"
        garbled.write_bytes(b"\x93NUMPY not an array")
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
        _refused_file(folder, garbled)


if __name__ == "__main__":
    main()
