"""Claim-sweep benchmarks (the targets of the Lemma 3 and Theorem 3 sweeps), measured in one run on one core.

- Lemma 3 sweep: (kernel, tree, μ₀, pair) checks per second for d ≤ 5, H ≤ 10 (target ≥ 1e4/s), with the
  vectorised candidates (ratio, η_χ² and δ of the channel, δ(π), Doeblin, Lemma 4 identity); the numerical
  η_KL is timed separately since it runs only where the ratio exceeds η_χ²;
- the same mutual informations computed with ``dit`` (target: the sweep ≥ 100x faster);
- ``init_gradient(method="exact")`` for d = 3, h = 8 (target < 1 s).
"""
from __future__ import annotations

import time

import numpy as np

from bma_verify.numerics.claim_sweeps import draw_instance, item_rng
from bma_verify.numerics.dpi_sweep import LEMMA3_RANGES, lemma3_pairs, lemma3_sweep_chunk
from bma_verify.numerics.gradient import init_gradient
from bma_verify.numerics.task import random_kernel, random_parents


def _lemma3_rate(n_instances: int, compute_sdpi: bool) -> tuple[float, int, float]:
    start = time.perf_counter()
    result = lemma3_sweep_chunk(0, 0, n_instances, compute_sdpi=compute_sdpi)
    seconds = time.perf_counter() - start
    return result.counts["pairs"] / seconds, result.counts["pairs"], seconds


def _dit_rate(n_pairs: int) -> float:
    """Pairs per second when the two mutual informations of each pair are computed by dit from the joints."""
    import dit  # optional (the test extra): only this comparison needs it

    joints = []
    index = 0
    while len(joints) < n_pairs:
        instance = draw_instance(item_rng(0, 3, index), LEMMA3_RANGES)
        pairs = lemma3_pairs(instance["kernel"], instance["parents"])
        joints += list(zip(pairs["joint_candidate_child"], pairs["joint_parent_child"]))
        index += 1
    joints = joints[:n_pairs]
    start = time.perf_counter()
    for candidate, parent in joints:
        dit.shannon.mutual_information(dit.Distribution.from_ndarray(candidate), [0], [1])
        dit.shannon.mutual_information(dit.Distribution.from_ndarray(parent), [0], [1])
    return n_pairs / (time.perf_counter() - start)


def main() -> None:
    rate, pairs, seconds = _lemma3_rate(2000, compute_sdpi=False)
    print(f"lemma3 sweep (vectorised candidates): {rate:,.0f} checks/s ({pairs} pairs in {seconds:.2f} s); "
          f"target >= 10,000/s: {'met' if rate >= 1e4 else 'NOT met'}")
    rate_kl, pairs_kl, seconds_kl = _lemma3_rate(100, compute_sdpi=True)
    print(f"lemma3 sweep with numerical eta_KL where ratio > eta_chi2: {rate_kl:,.0f} checks/s "
          f"({pairs_kl} pairs in {seconds_kl:.2f} s)")
    dit_rate = _dit_rate(300)
    print(f"dit, same two mutual informations per pair: {dit_rate:,.0f} pairs/s; sweep / dit = {rate / dit_rate:,.0f}x "
          f"(target >= 100x: {'met' if rate / dit_rate >= 100 else 'NOT met'})")
    rng = np.random.default_rng(0)
    kernel = random_kernel(3, rng=rng)
    parents = random_parents(9, rng=rng)
    init_gradient(kernel, parents, 8)  # warm-up (imports, allocation)
    start = time.perf_counter()
    repeats = 5
    for _ in range(repeats):
        init_gradient(kernel, parents, 8)
    seconds = (time.perf_counter() - start) / repeats
    print(f"init_gradient exact d=3, h=8: {seconds * 1e3:.1f} ms (target < 1000 ms: "
          f"{'met' if seconds < 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
