"""Probe (not part of the package): does exp-robustness's deciding GPT leave the uniform-parent level when its run
is continued to twice its steps (``model.continuation``)? On development seeds only.

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/gpt_continuation_dev_seeds.py quick 1000 1001 1002 > out.jsonl

For each development seed (>= 1000), trains the tier's deciding GPT reading (``GPT_DECIDING``), continues it to 2×
its steps (fresh AdamW, schedule restarted, the batches after the run's), and prints one JSON line: the KL against
BMA at the end of the run and of the continuation, the reference levels (uniform parent, BMA reading L − 1: the
rule's bar), the moved fraction of the miss rule, both plateau tests and the continuation's KL curve.
docs/notes/exp-robustness.md has the numbers.
"""
from __future__ import annotations

import json
import sys

from bma_verify.model.continuation import continuation_test, continue_run
from bma_verify.model.convergence import run_plateau
from bma_verify.model.gpt_training import KL_RESOLUTION
from bma_verify.model.presets import train_config
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.plans import preset_configs
from bma_verify.reports.claims.exp_robustness.plan import GPT_DECIDING


def main(tier: str, seeds: list[int]) -> None:
    label = GPT_DECIDING[tier][0]
    for seed in require_dev_seeds(seeds):
        run = train_config(preset_configs("robustness", tier=tier, seed=seed)[label])
        more = continue_run(run)
        m, c = run.metrics, more.metrics
        bar = m["kl_bma_minus_one"]
        row = {"seed": seed, "reading": label, "steps": run.config.steps, "kl": m["kl"], "kl_continued": c["kl"],
               "kl_uniform_parent": m["kl_uniform_parent"], "bar": bar,
               "plateau": run_plateau(m, "kl", min_drop=KL_RESOLUTION)["plateaued"],
               "plateau_continued": run_plateau(c, "kl", min_drop=KL_RESOLUTION)["plateaued"],
               "curve_continued": {"step": c["curves"]["step"], "kl": c["curves"]["kl"]}}
        if m["kl"] > bar:
            row["miss_rule"] = continuation_test(m["kl"], c["kl"], bar)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
