"""Kernel-claim benchmarks, on one core, measured in one run:

- the cost curve of ``check --kernel`` over d (the CLI defaults: 20 random trees of H = 6, stationary μ₀;
  Dirichlet(0.5) rows): per claim and d of a ladder, the seconds in-process (``check_kernel_claims``) and of the whole
  command (``bma-verify check CLAIM --kernel K.npy`` in a fresh process, start-up included), with the cost estimate
  that decides refusals (``numerics.large_kernels.check_cost``), and the largest d checked within 10 s each way
  (target d = 2000 for Lemmas 3, 4 and Theorem 3);
- δ(π) and the stationary law against the methods they replaced (``benchmarks/kernel_baseline.py``) on the same
  kernel, d = 2000;
- the batched Lemma 3 sweep over many small random kernels (d = 3–5, H = 3–10, both μ₀) against the current sweep
  (``lemma3_sweep_chunk`` without η_KL) on the same ranges: (tree, pair) checks per second and their ratio
  (target 2·10^6 checks/s end to end); and its pair computation ``lemma3_ratio_batch`` against the one it replaced
  (``benchmarks/lemma3_baseline.py``) on the same instances, with the share of the core's measured matmul rate
  (a 512 × 512 float64 product) that its joint products, 2d³ flops per check, reach.

Run: ``python -m benchmarks kernels`` (or ``make bench``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.kernel_baseline import dobrushin_before, stationary_before
from benchmarks.lemma3_baseline import ratio_batch_before
from benchmarks.timing import best_of
from bma_verify.numerics.dpi_sweep import (LEMMA3_RANGES, draw_lemma3_batch, lemma3_batched_sweep, lemma3_ratio_batch,
                                           lemma3_sweep_chunk)
from bma_verify.numerics.large_kernels import MAX_OPERATIONS, check_cost, dobrushin_coefficient_blocked
from bma_verify.numerics.task import stationary_distribution
from bma_verify.reports.kernel_report import KERNEL_CLAIMS, PAIR_CLAIMS, check_kernel_claims

SECONDS = 10.0
LADDER = (250, 500, 750, 1000, 1250, 1500, 1750, 2000, 2250, 2500, 2750)
SMALL_KERNELS = dict(LEMMA3_RANGES, d=(3, 5))
COMMAND = str(Path(sys.executable).with_name("bma-verify"))


def _kernel(d: int) -> np.ndarray:
    return np.random.default_rng(d).dirichlet(np.full(d, 0.5), size=d)


def _command_seconds(claim: str, kernel: np.ndarray) -> float:
    """Wall-clock seconds of ``bma-verify check CLAIM --kernel K.npy`` on one core, start-up included."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "K.npy")
        np.save(path, kernel)
        start = time.perf_counter()
        subprocess.run([COMMAND, "check", claim, "--kernel", path], env=dict(os.environ, OMP_NUM_THREADS="1"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - start


def _cost_curve(claim: str) -> tuple[list[str], int, int, str]:
    """Per d of the ladder: in-process and whole-command seconds and the cost estimate; the largest d within
    SECONDS each way, and what stopped the ladder."""
    lines, best, best_command, stop = [], 0, 0, f"the ladder ends at d = {LADDER[-1]}"
    for d in LADDER:
        kernel = _kernel(d)
        operations = check_cost(d, 6, 20, pairs=claim in PAIR_CLAIMS)["operations"]
        start = time.perf_counter()
        try:
            check_kernel_claims(kernel, claims=(claim,))
        except ValueError:
            stop = f"refused at d = {d} (over the size limits)"
            break
        seconds = time.perf_counter() - start
        command = _command_seconds(claim, kernel)
        lines.append(f"  d = {d:5d}: {seconds:6.2f} s in-process, {command:6.2f} s whole command, estimate "
                     f"{operations:.2e} operations ({operations / MAX_OPERATIONS:.0%} of the limit)")
        best = d if seconds <= SECONDS else best
        best_command = d if command <= SECONDS else best_command
        if min(seconds, command) > SECONDS:
            stop = f"d = {d} took {seconds:.1f} s"
            break
    return lines, best, best_command, stop


def _against_baselines(d: int = 2000) -> None:
    kernel = _kernel(d)
    for name, new, old in (("δ(π)", dobrushin_coefficient_blocked, dobrushin_before),
                           ("stationary law", stationary_distribution, stationary_before)):
        assert np.allclose(new(kernel), old(kernel), rtol=0, atol=1e-12)  # tested on d = 2..50 in tests/
        seconds = {f: best_of(lambda: f(kernel), repeat=2) for f in (new, old)}
        print(f"{name}, d = {d}: {seconds[new]:.2f} s, before {seconds[old]:.2f} s: {seconds[old] / seconds[new]:.1f}x")


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
    _against_baselines()
    for claim in KERNEL_CLAIMS:
        lines, d, d_command, stop = _cost_curve(claim)
        aim = " (aim d >= 2000)" if claim in ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm3-init-gradient") else ""
        print(f"{claim}: largest d in {SECONDS:g} s on one core = {d} in-process, {d_command} whole command{aim}; "
              f"{stop}")
        print("\n".join(lines))
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
