"""Kernel-claim benchmarks, on one core, measured in one run:

- the largest d each claim of ``check --kernel`` handles in 10 s (the CLI defaults: 20 random trees of H = 6,
  stationary μ₀; Dirichlet(0.5) rows), over a ladder of d, and where a size is refused (target d ≥ 1000 for Lemma 3
  and Theorem 3);
- the batched Lemma 3 sweep over many small random kernels (d = 3–5, H = 3–10, both μ₀) against the current sweep
  (``lemma3_sweep_chunk`` without η_KL) on the same ranges: (tree, pair) checks per second and their ratio
  (target 10^6 checks/s).

Run: ``python -m benchmarks kernels`` (or ``make bench``).
"""
from __future__ import annotations

import time

import numpy as np

from bma_verify.numerics.dpi_sweep import LEMMA3_RANGES, lemma3_batched_sweep, lemma3_sweep_chunk
from bma_verify.reports.kernel_report import KERNEL_CLAIMS, check_kernel_claims

SECONDS = 10.0
LADDER = (125, 250, 500, 750, 1000, 1250, 1500, 2000, 2500)
SMALL_KERNELS = dict(LEMMA3_RANGES, d=(3, 5))


def _largest_d(claim: str) -> tuple[int, str]:
    """The largest d of the ladder checked within SECONDS, and what stopped the ladder."""
    best, stop = 0, f"the ladder ends at d = {LADDER[-1]}"
    for d in LADDER:
        kernel = np.random.default_rng(d).dirichlet(np.full(d, 0.5), size=d)
        start = time.perf_counter()
        try:
            check_kernel_claims(kernel, claims=(claim,))
        except ValueError:
            return best, f"refused at d = {d} (over the size limits)"
        seconds = time.perf_counter() - start
        if seconds > SECONDS:
            return best, f"d = {d} took {seconds:.1f} s"
        best = d
    return best, stop


def _rate(sweep) -> tuple[float, int]:
    start = time.perf_counter()
    result = sweep()
    seconds = time.perf_counter() - start
    return result.counts["pairs"] / seconds, result.counts["pairs"]


def main() -> None:
    for claim in KERNEL_CLAIMS:
        d, stop = _largest_d(claim)
        aim = " (aim d >= 1000)" if claim in ("lemma3-strict-dpi", "thm3-init-gradient") else ""
        print(f"{claim}: largest d in {SECONDS:g} s on one core = {d}{aim}; {stop}")
    current, current_pairs = _rate(lambda: lemma3_sweep_chunk(0, 0, 1500, compute_sdpi=False, ranges=SMALL_KERNELS))
    batched, batched_pairs = _rate(lambda: lemma3_batched_sweep(0, 0, 12, batch_size=2048, ranges=SMALL_KERNELS))
    print(f"lemma3 sweep, d = 3-5: current {current:,.0f} checks/s ({current_pairs} pairs), batched over kernels and "
          f"pairs {batched:,.0f} checks/s ({batched_pairs} pairs): {batched / current:.1f}x the current sweep; "
          f"target 10^6/s: {'met' if batched >= 1e6 else 'NOT met'}")


if __name__ == "__main__":
    main()
