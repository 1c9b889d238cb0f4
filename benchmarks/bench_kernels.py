"""Kernel-claim benchmarks, on one core, measured in one run:

- the largest d each claim of ``check --kernel`` handles in 10 s (the CLI defaults: 20 random trees of H = 6,
  stationary μ₀; Dirichlet(0.5) rows), over a ladder of d, and where a size is refused (target d ≥ 1000 for Lemma 3
  and Theorem 3);
- the batched Lemma 3 sweep over many small random kernels (d = 3–5, H = 3–10, both μ₀) against the current sweep
  (``lemma3_sweep_chunk`` without η_KL) on the same ranges: (tree, pair) checks per second and their ratio
  (target 2·10^6 checks/s end to end); and its pair computation ``lemma3_ratio_batch`` against the one it replaced
  (``benchmarks/lemma3_baseline.py``) on the same instances, with the share of the core's measured matmul rate
  (a 512 × 512 float64 product) that its joint products, 2d³ flops per check, reach.

Run: ``python -m benchmarks kernels`` (or ``make bench``).
"""
from __future__ import annotations

import time

import numpy as np

from benchmarks.lemma3_baseline import ratio_batch_before
from benchmarks.timing import best_of
from bma_verify.numerics.dpi_sweep import (LEMMA3_RANGES, draw_lemma3_batch, lemma3_batched_sweep, lemma3_ratio_batch,
                                           lemma3_sweep_chunk)
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


def _matmul_flops_per_second(n: int = 512) -> float:
    a = np.random.default_rng(0).random((n, n))
    return 2 * n**3 / best_of(lambda: a @ a, repeat=5)


def _pair_computation(batches: list) -> tuple[float, float, float]:
    """Checks per second of lemma3_ratio_batch and of its baseline on the same batches, and the flops per second
    of the new one's joint products (2d³ per check)."""
    checks = [int(b["inits"].shape[1] * (b["parents"].shape[1] - 1) * (b["parents"].shape[1] - 2) // 2
                  * b["parents"].shape[0]) for b in batches]
    for b in batches[:2]:  # the same values within rounding (tests/test_large_kernels.py checks it on every key)
        new, old = (f(b["kernels"], b["parents"], b["inits"]) for f in (lemma3_ratio_batch, ratio_batch_before))
        assert np.allclose(new["mi_candidate"], old["mi_candidate"], rtol=0, atol=1e-13)
    seconds = {f: best_of(lambda: [f(b["kernels"], b["parents"], b["inits"]) for b in batches])
               for f in (lemma3_ratio_batch, ratio_batch_before)}
    flops = sum(n * 2 * b["kernels"].shape[1] ** 3 for n, b in zip(checks, batches))
    return sum(checks) / seconds[lemma3_ratio_batch], sum(checks) / seconds[ratio_batch_before], \
        flops / seconds[lemma3_ratio_batch]


def main() -> None:
    for claim in KERNEL_CLAIMS:
        d, stop = _largest_d(claim)
        aim = " (aim d >= 1000)" if claim in ("lemma3-strict-dpi", "thm3-init-gradient") else ""
        print(f"{claim}: largest d in {SECONDS:g} s on one core = {d}{aim}; {stop}")
    current, current_pairs = _rate(lambda: lemma3_sweep_chunk(0, 0, 1500, compute_sdpi=False, ranges=SMALL_KERNELS))
    batched, batched_pairs = _rate(lambda: lemma3_batched_sweep(0, 0, 12, batch_size=2048, ranges=SMALL_KERNELS))
    print(f"lemma3 sweep, d = 3-5: current {current:,.0f} checks/s ({current_pairs} pairs), batched over kernels and "
          f"pairs {batched:,.0f} checks/s ({batched_pairs} pairs): {batched / current:.1f}x the current sweep; "
          f"target 2*10^6/s: {'met' if batched >= 2e6 else 'NOT met'}")
    rng = np.random.default_rng(0)
    batches = [draw_lemma3_batch(rng, 2048, int(rng.integers(3, 6)), int(rng.integers(3, 11))) for _ in range(12)]
    new, before, flops = _pair_computation(batches)
    peak = _matmul_flops_per_second()
    print(f"lemma3_ratio_batch, d = 3-5, H = 3-10, same instances: {new:,.0f} checks/s, the one it replaced "
          f"{before:,.0f} checks/s: {new / before:.1f}x; its joint products run at {flops / 1e9:.2f} GFLOP/s, "
          f"{flops / peak:.1%} of this core's matmul rate ({peak / 1e9:.1f} GFLOP/s, 512 x 512 float64)")


if __name__ == "__main__":
    main()
