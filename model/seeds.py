"""Which training seeds decide a report and which may tune a preset: two disjoint ranges.

A report trains every trained reproduction on several seeds drawn from ``[0, DEV_SEED_MIN)`` by the hash of its
protocol; presets are tuned only on development seeds ``>= DEV_SEED_MIN``, which never depend on that hash. Tuning
code calls :func:`require_dev_seeds`, which refuses a report seed, so a preset is never adjusted while looking at the
numbers it will be judged by.
"""
from __future__ import annotations

import numpy as np

#: Development seeds (tuning, probes) are integers >= this; report training seeds are below it.
DEV_SEED_MIN = 1000


def report_training_seeds(report_seed: int, protocol_sha256: str, n: int) -> list[int]:
    """``n`` distinct training seeds in ``[0, DEV_SEED_MIN)`` for report ``report_seed`` under the protocol whose
    SHA-256 is ``protocol_sha256`` (64 hex digits; ``bma_verify.reports.protocol``).

    Drawn from (report seed, protocol hash) alone: any change of the protocol (a threshold, a step count, a rule) draws
    new seeds, so nothing can be fitted to report seeds already seen, and a claim added to the report never shifts
    another's seeds.
    """
    if not isinstance(n, int) or not 1 <= n <= DEV_SEED_MIN:
        raise ValueError(f"n must be an integer in 1..{DEV_SEED_MIN}, got {n!r}")
    if not isinstance(report_seed, (int, np.integer)) or report_seed < 0:
        raise ValueError(f"report_seed must be a non-negative integer, got {report_seed!r}")
    if not (isinstance(protocol_sha256, str) and len(protocol_sha256) == 64
            and all(c in "0123456789abcdef" for c in protocol_sha256)):
        raise ValueError(f"protocol_sha256 must be 64 lowercase hex digits, got {protocol_sha256!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(report_seed), int(protocol_sha256, 16)]))
    return [int(s) for s in rng.permutation(DEV_SEED_MIN)[:n]]


def require_dev_seeds(seeds, *, argument: str = "seeds") -> list[int]:
    """``seeds`` as a list, after checking each is a development seed (an integer >= ``DEV_SEED_MIN``)."""
    seeds = list(seeds)
    bad = [s for s in seeds if not isinstance(s, (int, np.integer)) or s < DEV_SEED_MIN]
    if not seeds or bad:
        raise ValueError(f"{argument} must be development seeds (integers >= {DEV_SEED_MIN}, disjoint from the "
                         f"report's training seeds); got {bad or seeds!r}")
    return [int(s) for s in seeds]
