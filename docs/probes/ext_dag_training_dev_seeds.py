"""Probe (not part of the package): ext-dag-training's pair-model run on development seeds, the spread its rule's
tolerances are set from, beside BMA reading the last m of its L examples (the near-miss control's power curve).

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/ext_dag_training_dev_seeds.py quick 1000 1001 1002 > out.jsonl
    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/ext_dag_training_dev_seeds.py quick --batch 64 1003 > out.jsonl

For each development seed (>= 1000; report training seeds are below 1000), trains the pair model at the tier's
sizes (``reports.claims.ext_dag_training.run_config``; ``--batch N`` overrides the batch) and prints one JSON line: its held-out gaps, its plateau
test, its seconds, and the gaps of BMA reading m = 1 … L examples on its held-out contexts.
docs/notes/ext-dag-training.md has the numbers.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace

from bma_verify.model.dag_training import eval_task, run_kernels, train_dag, truncated_bma_evaluation
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.claims.ext_dag_training.claim import run_config


def main(tier: str, seeds: list[int], batch: int | None = None) -> None:
    for seed in require_dev_seeds(seeds):
        config = run_config(tier, "pair", seed)
        config = config if batch is None else replace(config, batch_size=batch)
        run = train_dag(config)
        kernels, batch = run_kernels(config), eval_task(config, run_kernels(config))
        reading = {m: {k: v for k, v in truncated_bma_evaluation(kernels, batch, config.k, m).items()
                       if k in ("lpa_gap", "lpa_gap_se", "query_gap", "query_gap_se")} for m in range(1, config.L + 1)}
        print(json.dumps({"seed": seed, "tier": tier, "batch": config.batch_size, "final": run["final"], "plateau": run["plateau"],
                          "curve": run["curve"], "seconds": run["seconds"], "bma_reading_m": reading}), flush=True)


if __name__ == "__main__":
    args = sys.argv[2:]
    batch = int(args[args.index("--batch") + 1]) if "--batch" in args else None
    if batch is not None:
        del args[args.index("--batch"):args.index("--batch") + 2]
    main(sys.argv[1], [int(s) for s in args], batch)
