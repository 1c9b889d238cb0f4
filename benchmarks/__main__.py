"""Run every benchmark module (benchmarks/bench_*.py) on one core, each printing ratios measured in one run."""
import importlib
import os
import pkgutil
import sys

from bma_verify import benchmarks


def main(names=None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    modules = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    for name in modules:
        if names and name.removeprefix("bench_") not in names and name not in names:
            continue
        print(f"== {name}")
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
