"""Probe (not part of the package): exp-robustness's task-shaped run at the paper's fig2 setting (relative positions;
``TASK_SHAPED_FIG2`` in reports/claims/exp_robustness/plan.py, the full tier's run until the full tier took the reduced scale) and
variants of it, on a GPU, in parallel processes.

    PYTHONPATH=. python docs/probes/gpu_task_shaped.py SECONDS OUT_DIR [plain|weighted]

Every variant is
``train(with_changes(replace(TASK_SHAPED_FIG2, seed=S, device="cuda"), **changes))``
for the training seeds S of report seeds 0 and 1 (``CheckContext(seed=R).seed_for("model:robustness")``), run in
chunks of 1000 steps (``stop_at``/``resume``; a resumed run is exact); after each chunk a JSON line goes to
OUT_DIR/results.jsonl. No chunk starts after SECONDS. PROBE_DEVICE=cpu runs it without a GPU.

Variant sets: ``plain`` (the four measured, docs/notes/exp-robustness.md has their numbers: the plain language-model
objective, no weight average unless named) and ``weighted`` (the default; not yet run: the preset as it is, with
its loss weighing example l by l^3 and a 0.99 weight average, and three changes to it).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

SEEDS = {0: 8965275259091543233, 1: 1962963093274989103}
K32 = {"K": 32, "width": 128}
PLAIN = {"example_weight_power": 0.0, "ema": 0.0}  # the objective these four were measured with
# each variant on both seeds: 8 processes
VARIANT_SETS = {
    "plain": {"K32": PLAIN | K32, "delay500": PLAIN | K32 | {"rel_example_delay": 500},
              "K40": PLAIN | {"K": 40, "width": 160}, "ema": PLAIN | K32 | {"ema": 0.99}},
    "weighted": {"preset": {}, "power2": {"example_weight_power": 2.0}, "K48": {"K": 48, "width": 192},
                 "steps8000": {"steps": 8000}},
}


def one(args):
    label, report_seed, changes, seconds, out = args
    import torch
    torch.set_num_threads(1)
    from bma_verify.model.analysis import task_shaped_head_summary
    from bma_verify.model.seeds import require_dev_seeds
    from bma_verify.model.train_config import with_changes
    from bma_verify.model.training import eval_batch, train
    from bma_verify.reports.claims.exp_robustness.plan import TASK_SHAPED_FIG2

    start = time.time()
    config = with_changes(replace(TASK_SHAPED_FIG2, seed=require_dev_seeds([SEEDS[report_seed]])[0],
                                  device=os.environ.get("PROBE_DEVICE", "cuda")), **changes)
    folder = Path(out) / f"{label}-R{report_seed}"
    done = 0
    while done < config.steps and time.time() - start < seconds:
        done = min(config.steps, done + 1000)
        run = train(config, out=folder, resume=done > 1000, stop_at=done)
        m = run.metrics
        summary = task_shaped_head_summary(run.model, eval_batch(config, run.kernel, config.L))
        line = {"label": label, "report_seed": report_seed, "changes": changes, "step": done,
                "seconds": round(time.time() - start), "parent_accuracy": round(m["parent_accuracy"], 4),
                "bma_parent_accuracy": round(m["bma_parent_accuracy"], 4),
                "parent_loss_gap": round(m["parent_loss_gap"], 4), "gap_to_bma": round(m["gap_to_bma"], 5),
                "covered": summary["covered"], "uncovered": summary["uncovered"]}
        with open(Path(out) / "results.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
    for p in folder.glob("*.pt"):
        p.unlink()  # checkpoints stay on the device
    return label


if __name__ == "__main__":
    seconds, out = float(sys.argv[1]), sys.argv[2]
    variants = VARIANT_SETS[sys.argv[3] if len(sys.argv) > 3 else "weighted"]
    Path(out).mkdir(parents=True, exist_ok=True)
    jobs = [(label, r, changes, seconds, out) for label, changes in variants.items() for r in SEEDS]
    with mp.get_context("spawn").Pool(len(jobs)) as pool:
        for label in pool.imap_unordered(one, jobs):
            print("done", label, flush=True)
