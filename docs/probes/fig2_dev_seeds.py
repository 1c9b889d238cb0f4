"""Probe (not part of the package): fig2's run on development seeds, the spread its thresholds are set from.

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/fig2_dev_seeds.py quick 1000 1001 1002 > out.jsonl
    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/fig2_dev_seeds.py quick:1500 1006 > out.jsonl  # 1500 steps

For each development seed (>= 1000; report training seeds are below 1000), trains ``PRESET_RUNS[("fig2", TIER)]``
and prints one JSON line: the run's decided values (query-loss gap, L_pa gap, parent-accuracy shortfall), its
plateau test, its parent accuracy per test L' (thm2's rule), its parameter summary (fig3's rule), the same values for BMA reading the last m of its
L examples, m = 1 … L, on the run's held-out contexts, and thm2's near-miss control per test L' (BMA reading L' − 1
of L': its parent-accuracy shortfall from BMA's). docs/notes/trained-checks.md has the numbers.
"""
from __future__ import annotations

import json
import sys

from bma_verify.model import analysis
from bma_verify.model.convergence import run_plateau
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.training import eval_batch
from bma_verify.reports.claims import thm2_consistency as thm2
from bma_verify.reports.core import CheckContext
from bma_verify.reports.plans import train_preset_runs

DECIDED = ("gap_to_bma", "parent_loss_gap", "parent_accuracy", "bma_parent_accuracy")


def main(tier: str, seeds: list[int]) -> None:
    tier, _, steps = tier.partition(":")
    for seed in require_dev_seeds(seeds):
        run = train_preset_runs("fig2", tier=tier, seed=seed, quiet=True, steps=int(steps) if steps else None)["fig2"]
        m = run.metrics
        batch = eval_batch(run.config, run.kernel, run.config.L)
        bma = {k: [] for k in DECIDED}
        for examples in range(1, run.config.L + 1):
            truncated = analysis.truncated_bma_metrics(run.kernel, batch, examples)
            for k in DECIDED:
                bma[k].append(truncated[k])
        values, _ = thm2.accuracy_rule(CheckContext(tier=tier, seed=0), run)
        near = thm2.ignoring_control(CheckContext(tier=tier, seed=0), run, values).measured["parent_accuracy"]
        control = {str(L): b - a for L, a, b in zip(values["L_test"], near, values["bma"])}
        print(json.dumps({"seed": seed, "tier": tier, "steps": m["steps"], **{k: m[k] for k in DECIDED},
                          "by_test_L": {L: row["parent_accuracy"] - row["bma_parent_accuracy"]
                                        for L, row in m["by_test_L"].items()},
                          "plateau": run_plateau(m, min_drop=0.003)["plateaued"], "bma_reading_m": bma,
                          "control_shortfall_by_L": control,
                          "parameters": parameters(run)}), flush=True)


def parameters(run) -> dict:
    """fig3's decided parameter values of the run."""
    s = analysis.parameter_summary(run.model, run.kernel, run.config.L, run.config.H)
    return {"copying_heads": len(s["copying_heads"]), "examples_covered": len(s["examples_covered"]),
            "peaks_at_0": sum(p == 0 for p in s["w_H_peak_offsets"]), "off_block_fraction": s["off_block_fraction"],
            "softmax_W_OV_error": s["softmax_W_OV_error"]}


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
