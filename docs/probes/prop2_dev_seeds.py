"""Probe (not part of the package): prop2-ds-quadratic's trained bilinear and key-norm models on development seeds,
the spread of the reproduction rule's values, beside the rule's power on the key-norm selector at λ × (W*, c*).

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/prop2_dev_seeds.py quick 1000 1001 1002 > out.jsonl

For each development seed (>= 1000; report training seeds are below 1000), trains both models at the tier's sizes
on report seed 0's instance A and prints one JSON line: the rule's values (``_decide_models``), both runs' plateau
tests; at the tiers where the FFN of ours trains (``FFN_TIERS``), its upper 3-SE gap bound and plateau test too.
docs/notes/prop2-ds-quadratic.md has the numbers.
"""
from __future__ import annotations

import json
import sys

import bma_verify.reports.claims.prop2_ds_quadratic.claim as prop2
from bma_verify.model.convergence import trace_plateau
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.core import CheckContext


def main(tier: str, seeds: list[int]) -> None:
    ctx = CheckContext(tier=tier, seed=0)
    for seed in require_dev_seeds(seeds):
        result = prop2._trained(ctx, seed)
        ev = {name: m["eval"] for name, m in result["metrics"].items()}
        rule = prop2._decide_models(ev["bilinear"], ev["key-norm"])
        plateaued = {name: trace_plateau(m["history"]["loss"])["plateaued"] for name, m in result["metrics"].items()}
        ffn = {}
        if tier in prop2.FFN_TIERS:
            run = prop2._trained_ffn(ctx, seed)
            ffn = {"ffn_gap_upper": prop2.decide_ffn(run["eval"], prop2._fit_curves(ctx)["bilinear"])["gap_upper"],
                   "ffn_plateaued": trace_plateau(run["history"]["loss"])["plateaued"]}
        print(json.dumps({"seed": seed, "tier": tier, "rule": rule, "plateaued": plateaued, **ffn,
                          "key_norm_gap": ev["key-norm"]["gap"], "bilinear_gap": ev["bilinear"]["gap"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
