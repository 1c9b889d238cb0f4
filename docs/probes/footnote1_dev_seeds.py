"""Probe (not part of the package): footnote 1's trained run on development seeds, the spread its rule is judged
against, beside the Bayes predictor reading the last m of its L windows (the near-miss control's power curve).

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/footnote1_dev_seeds.py quick 1000 1001 1002 > out.jsonl
    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/footnote1_dev_seeds.py quick:lr=0.01,K=16 1000 > out.jsonl

For each development seed (>= 1000; report training seeds are below 1000), trains
``SelectiveTrainConfig(seed=S, **TRAIN_SIZES[tier])`` (the check's recipe; after a colon, fields to change, as
``name=value`` separated by commas) and prints one JSON line: its held-out
gaps, its plateau test, its seconds, and the gaps of the Bayes predictor reading m = 1 … L windows on its held-out
sequences. docs/notes/footnote1-selective-induction.md has the numbers.
"""
from __future__ import annotations

import json
import sys

from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.selective_training import (SelectiveTrainConfig, eval_batch, run_kernel, train_selective,
                                                 truncated_bayes_evaluation)
from bma_verify.reports.claims.footnote1_selective_induction.claim import TRAIN_SIZES


def main(tier: str, seeds: list[int]) -> None:
    tier, _, changes = tier.partition(":")
    overrides = {k: (float(v) if "." in v or "e" in v else int(v))
                 for k, v in (item.split("=") for item in changes.split(",") if item)}
    for seed in require_dev_seeds(seeds):
        config = SelectiveTrainConfig(seed=seed, **{**TRAIN_SIZES[tier], **overrides})
        run = train_selective(config)
        kernel = run_kernel(config)
        batch = eval_batch(config, kernel)
        reading = {m: truncated_bayes_evaluation(kernel, config, batch, m) for m in range(1, config.L + 1)}
        print(json.dumps({"seed": seed, "tier": tier, "changes": overrides, "final": run["final"], "plateau": run["converged"],
                          "seconds": run["seconds"], "bayes_reading_m": reading}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
