"""Timing helper shared by the benchmarks."""
import time

import numpy as np


def best_of(fn, repeat: int = 3) -> float:
    """The fastest of ``repeat`` wall-clock timings of ``fn()``, in seconds (the least disturbed by other load)."""
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
