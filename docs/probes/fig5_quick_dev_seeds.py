"""Probe (not part of the package): fig5's quick-tier runs on development seeds, at a given number of steps.

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/fig5_quick_dev_seeds.py STEPS 1000 1001 1002 > out.jsonl

For each development seed (>= 1000; report training seeds are below 1000), trains ``PRESET_RUNS[("fig5",
"quick")]`` with ``STEPS`` steps and prints one JSON line: each run's plateau test (improvement over the window,
its noise SE) and L_pa gap at its own L, and each reading's rule (R1 decides, R3 is diagnostic) with its mean gaps
and Spearman ρ, exactly as the check reads them. docs/notes/exp-fig5-generalization.md has the numbers.
"""
from __future__ import annotations

import json
import sys
import time

import torch

from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.claims.exp_fig5_generalization.claim import compute_grids, seed_decision
from bma_verify.reports.plans import train_preset_runs


def main(steps: int, seeds: list[int]) -> None:
    torch.set_num_threads(1)
    for seed in require_dev_seeds(seeds):
        start = time.perf_counter()
        runs = train_preset_runs("fig5", tier="quick", steps=steps, seed=seed, device="cpu", quiet=True)
        seconds = time.perf_counter() - start
        g = compute_grids(runs)
        d = seed_decision(g)
        tests = d["all"]["runs"]
        print(json.dumps({
            "seed": seed, "steps": steps, "seconds": round(seconds, 1),
            "runs": {k: {"plateaued": t["plateaued"], "improvement": t["improvement"], "noise_se": t["noise_se"],
                         "own_L_parent_loss_gap": g["own_gap"][k]} for k, t in tests.items()},
            "readings": {name: {"status": d["readings"][name], "sides": rule["sides"], "mean_gap": rule["mean_gap"],
                                "rho": rule["spearman"]} for name, rule in d["rules"].items()}}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(s) for s in sys.argv[2:]])
