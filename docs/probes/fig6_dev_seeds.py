"""Probe (not part of the package): fig6's run on development seeds, and its row-shift control's power curve.

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/fig6_dev_seeds.py TIER 1000 1001 > out.jsonl

For each development seed (>= 1000; report training seeds are below 1000), trains ``PRESET_RUNS[("fig6", TIER)]``
and prints one JSON line: the seconds it took, the column and row errors of the trained W_tf, its L_pa gap to
BMA's, its plateau test, the rule's sides at the full tier's thresholds, and the power curve of the row-shift
control (the column error of W_tf + s·b̂1ᵀ and the rule's status at each shift factor).
docs/notes/exp-fig6-column-alignment.md has the numbers.
"""
from __future__ import annotations

import json
import sys
import time

import torch

from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.claims.exp_fig6_column_alignment.claim import _seed_values, row_shift_power
from bma_verify.reports.core import CheckContext
from bma_verify.reports.plans import train_preset_runs


def main(tier: str, seeds: list[int]) -> None:
    torch.set_num_threads(1)
    for seed in require_dev_seeds(seeds):
        ctx = CheckContext(tier="full", seed=seed)  # the full tier's thresholds; the control's direction from seed
        start = time.perf_counter()
        run = train_preset_runs("fig6", tier=tier, seed=seed, device="cpu", quiet=True)["fig6"]
        seconds = time.perf_counter() - start
        values = _seed_values(ctx, run)
        power, s_star = row_shift_power(ctx, values["W_tf"], run.kernel)
        test = values["converged"]
        print(json.dumps({"seed": seed, "tier": tier, "seconds": round(seconds, 1), **values["metrics"],
                          "sides": values["sides"], "plateaued": test["plateaued"],
                          "improvement": test["improvement"], "noise_se": test["noise_se"], "shift_rms": s_star,
                          "power": [{"factor": p["x"], "column_error": p["value"], "rule": p["rule"]}
                                    for p in power]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
