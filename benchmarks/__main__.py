"""Run every benchmark module (benchmarks/bench_*.py) on one core, each printing ratios measured in one run.

Run from the repository root (``python -m benchmarks [NAME ...]``, ``make bench``): the benchmarks are a folder of
the repository, not part of the installed package.
"""
import importlib
import os
import pkgutil
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before NumPy and torch start their thread pools

import torch  # noqa: E402

import benchmarks  # noqa: E402


def main(names=None) -> None:
    torch.set_num_threads(1)
    modules = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    for name in modules:
        if names and name.removeprefix("bench_") not in names and name not in names:
            continue
        print(f"== {name}")
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
