"""The declared tuning grid of the standard GPT readings of ``exp-robustness``, run on development seeds only.

For each reading (depth 2 or 3, absolute or rotary positions) every setting of width {64, 128} × heads {4, 8} ×
lr {1e-3, 3e-3} × batch {64, 256} trains on the same number of contexts (so a larger batch takes fewer steps) and
is scored by its final held-out KL(BMA ‖ model) and its plateau test. The report's plan takes the best setting per
reading; the report's own training seeds never enter here (:func:`bma_verify.model.seeds.require_dev_seeds`). The
task's sizes and contexts are arguments; the command line that reads them from the report's plan is
``python -m bma_verify.reports.claims.exp_robustness.plan``. Results and commands: docs/notes/exp-robustness.md.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from bma_verify.model.run_files import write_json_atomic
from bma_verify.model.convergence import run_plateau
from bma_verify.model.gpt_training import GPT_READINGS, KL_RESOLUTION, train_gpt
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.train_config import GPTOptions, TrainConfig

#: The declared grid (the same for every reading).
GRID = {"width": (64, 128), "heads": (4, 8), "lr": (1e-3, 3e-3), "batch_size": (64, 256)}
#: Evaluations per grid run (the plateau test needs at least 5 in its window).
GRID_EVALUATIONS = 12


def grid_settings() -> list[dict]:
    """Every setting of :data:`GRID`, in a fixed order."""
    names = list(GRID)
    return [dict(zip(names, values)) for values in itertools.product(*GRID.values())]


def grid_config(reading: str, setting: dict, *, scale: dict, contexts: int, seed: int) -> TrainConfig:
    """The run of ``setting`` for ``reading`` (a key of ``GPT_READINGS``) at the task sizes ``scale``
    (``{"d", "H", "L"}``) on ``seed``, training on ``contexts`` contexts (steps = contexts / batch)."""
    depth, position = GPT_READINGS[reading]
    steps = contexts // setting["batch_size"]
    eval_every = max(1, steps // GRID_EVALUATIONS)
    options = GPTOptions(depth=depth, position=position, width=setting["width"], heads=setting["heads"])
    return TrainConfig(model=options, **scale, lr=setting["lr"], batch_size=setting["batch_size"],
                       steps=steps, warmup=max(1, steps // 10), eval_every=eval_every, eval_contexts=512,
                       weight_decay=0.1, seed=seed, device="cpu")


def grid_row(run, reading: str, setting: dict) -> dict:
    """What the grid records of one run: the setting, final KL, the reference levels, plateau test and time."""
    m = run.metrics
    test = run_plateau(m, "kl", min_drop=KL_RESOLUTION)
    return {"reading": reading, **setting, "seed": run.config.seed, "steps": run.config.steps, "kl": m["kl"],
            "kl_bma_minus_one": m["kl_bma_minus_one"], "kl_uniform_parent": m["kl_uniform_parent"],
            "plateaued": test["plateaued"], "improvement": test["improvement"], "seconds": m["seconds"],
            "best_parent_accuracy": max(layer["parent_accuracy"] for layer in m["attention"])}


def run_grid(readings, seeds, *, scale: dict, contexts: int, out: Path | None = None, settings=None,
             record: dict | None = None) -> list[dict]:
    """Train every (reading, setting, seed) of the grid (or of ``settings``) on development ``seeds`` at the task
    sizes ``scale``, each on ``contexts`` contexts; rows as :func:`grid_row`, written to ``out`` (JSON with the
    grid, the contexts and ``record``'s entries, rewritten atomically after each run) when given."""
    seeds = require_dev_seeds(seeds)
    unknown = [r for r in readings if r not in GPT_READINGS]
    if unknown:
        raise ValueError(f"readings must be among {', '.join(GPT_READINGS)}, got {unknown}")
    rows = []
    for setting, reading, seed in itertools.product(settings or grid_settings(), readings, seeds):
        config = grid_config(reading, setting, scale=scale, contexts=contexts, seed=seed)
        rows.append(grid_row(train_gpt(config), reading, setting))
        if out is not None:
            write_json_atomic(out, {**(record or {}), "scale": scale, "grid": GRID, "contexts": contexts,
                                    "rows": rows})
    return rows


def best_settings(rows: list[dict]) -> dict:
    """Per reading, the setting with the lowest median final KL over its seeds."""
    by_key: dict = {}
    for r in rows:
        by_key.setdefault((r["reading"], *(r[k] for k in GRID)), []).append(r["kl"])
    best: dict = {}
    for (reading, *values), kls in by_key.items():
        score = sorted(kls)[len(kls) // 2]
        if reading not in best or score < best[reading]["kl"]:
            best[reading] = {**dict(zip(GRID, values)), "kl": score}
    return best
