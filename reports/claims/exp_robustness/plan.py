"""exp-robustness's plan per tier: the GPT readings' scale, tuned settings and schedule, the absolute-PE and
task-shaped runs, and the command line of the GPT tuning grid (``bma_verify.model.tuning``) at a tier's sizes.

    python -m bma_verify.reports.claims.exp_robustness.plan --tier quick --seeds 1000 --out grid.json
    python -m bma_verify.reports.claims.exp_robustness.plan --seeds 1001 --readings gpt-d2-absolute --setting 64 4 0.003 64 \
        --contexts 256000 --out long.json   # one longer run

How each value was found (runs tried, numbers on development seeds): docs/notes/exp-robustness.md.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from bma_verify.model.gpt_training import GPT_READINGS, GPT_SHARED, gpt_runs
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.model.train_config import AbsoluteOptions, TaskShapedOptions, TrainConfig
from bma_verify.model.tuning import best_settings, grid_config, run_grid

#: The task's sizes per tier: the full tier is fig2's setting (110 stream tokens); the quick tier a declared reduced
#: scale (16 tokens) whose run one core trains in ~35 s.
GPT_SCALE = {"quick": {"d": 5, "H": 4, "L": 3}, "full": {"d": 5, "H": 10, "L": 10}}
#: The reading that decides the standard-transformer part per tier, and its best grid setting (model/tuning.py): the
#: strongest on the tier's development seeds (quick: lowest KL at the shared setting, seed 1000; full: lowest median
#: KL over seeds 1000 and 1001 at each reading's best setting), by rules written in docs/notes/exp-robustness.md
#: before the runs.
GPT_DECIDING = {"quick": ("gpt-d2-absolute", {"width": 128, "heads": 8, "lr": 1e-3, "batch_size": 64}),
                "full": ("gpt-d2-rope", {"width": 128, "heads": 4, "lr": 3e-3, "batch_size": 64})}
#: The setting of each reading per tier: the deciding reading's best; the others, diagnostics, at the shared setting,
#: because their own best settings on 2 report seeds do not fit the tier's budget beside it (full: 60 minutes; quick:
#: `make test` within 9 minutes), by the budget rules in the notes.
GPT_TUNED = {tier: {**{reading: dict(GPT_SHARED) for reading in GPT_READINGS}, deciding: dict(best)}
             for tier, (deciding, best) in GPT_DECIDING.items()}
#: Contexts, evaluations and held-out contexts of a GPT run per tier (steps = contexts / batch; the plateau test
#: judges the last 20% of steps). Quick: 64 000 contexts (1000 steps at batch 64). Full: 102 400 contexts (1600 steps
#: at batch 64), what the 60-minute budget of the full tier's exp-robustness affords on 2 cores, set from step times
#: alone (docs/notes/exp-robustness.md); 25 evaluations, so the plateau window holds 5.
GPT_SCHEDULE = {"quick": {"contexts": 64_000, "evaluations": 20, "eval_contexts": 512},
                "full": {"contexts": 102_400, "evaluations": 25, "eval_contexts": 2048}}
#: Contexts each grid run trains on, per tier (steps = contexts / batch): what the tier's own runs train on.
GRID_CONTEXTS = {tier: schedule["contexts"] for tier, schedule in GPT_SCHEDULE.items()}

#: The absolute-PE run at the fig2 setting (K = 24: more heads than examples, a spare for each)
ABSOLUTE = TrainConfig(d=5, H=10, L=10, K=24, eval_every=50, model=AbsoluteOptions())
#: The task-shaped run (ours; it decided the claim before the GPT did, now a diagnostic): relative positions (with
#: absolute ones its heads piled onto a few recent examples), the loss weighing example l by l^3 (an example offset of
#: L exists only in the query example's terms), a 0.99 weight average evaluated, lr 0.01 and batch 128
TASK_SHAPED = TrainConfig(lr=0.01, batch_size=128, ema=0.99,
                          model=TaskShapedOptions(position="relative", example_weight_power=3.0))
#: ... trained at a declared reduced scale (d = 5, H = 6, L = 4), in both tiers
TASK_SHAPED_REDUCED = replace(TASK_SHAPED, d=5, H=6, L=4, K=16, model=replace(TASK_SHAPED.model, width=64), steps=800,
                              eval_every=50, eval_contexts=1024)
#: ... and at the paper's fig2 setting (~5 s a step on one core: for a GPU, not in a plan)
TASK_SHAPED_FIG2 = replace(TASK_SHAPED, d=5, H=10, L=10, K=40, model=replace(TASK_SHAPED.model, width=160),
                           steps=5000, eval_every=250, eval_contexts=4096)


def gpt_plan_runs(tier: str) -> dict[str, TrainConfig]:
    """The GPT runs of exp-robustness at ``tier``: every reading at its tuned setting, the tier's scale and
    schedule (:func:`bma_verify.model.gpt_training.gpt_runs`)."""
    return gpt_runs(GPT_SCALE[tier], GPT_TUNED[tier], GPT_SCHEDULE[tier])


#: exp-robustness's runs per tier (seed 0, device "auto"; ``reports.plans.preset_configs`` sets those).
RUNS: dict[str, dict[str, TrainConfig]] = {
    "quick": {
        # the standard GPT readings (scale, tuned settings, schedule above)
        **gpt_plan_runs("quick"),
        # batch 512: 1500 steps converge the report seed, where batch 256 does not
        "absolute": replace(ABSOLUTE, steps=1500, batch_size=512, eval_contexts=1024),
        # "task-shaped (ours)", a diagnostic (two streams, relative biases): d = 5, H = 6, L = 4
        "task-shaped": TASK_SHAPED_REDUCED},
    "full": {
        **gpt_plan_runs("full"),
        "absolute": replace(ABSOLUTE, steps=4000, batch_size=256, eval_contexts=4096),
        # the same reduced scale: at the fig2 setting its step costs ~5 s on one core (5000 steps, 7 hours), past the
        # full tier's 60 minutes for this claim; `TASK_SHAPED_FIG2` is that run, for a GPU
        "task-shaped": TASK_SHAPED_REDUCED,
        # diagnostic, never decides: layer 1 starts as the BMA copier (one head per example), layer 2 at random;
        # 1500 steps (0.19 s each on one core) for the full tier's 60 minutes
        "task-shaped-copy-init": TrainConfig(d=5, H=10, L=10, K=10, lr=0.003, steps=1500, batch_size=32,
                                             eval_every=125, eval_contexts=4096,
                                             model=TaskShapedOptions(width=120, layer1_init="copy"))},
}


def tier_grid_config(reading: str, setting: dict, *, tier: str, seed: int, contexts: int | None = None
                     ) -> TrainConfig:
    """:func:`bma_verify.model.tuning.grid_config` at the tier's scale, on ``contexts`` contexts (default
    ``GRID_CONTEXTS[tier]``)."""
    return grid_config(reading, setting, scale=GPT_SCALE[tier], contexts=contexts or GRID_CONTEXTS[tier], seed=seed)


def run_tier_grid(readings, seeds, *, tier: str = "quick", out: Path | None = None, settings=None,
                  contexts: int | None = None) -> list[dict]:
    """:func:`bma_verify.model.tuning.run_grid` at the tier's scale, on ``contexts`` contexts (default
    ``GRID_CONTEXTS[tier]``) and development ``seeds``; ``out`` records the tier."""
    return run_grid(readings, require_dev_seeds(seeds), scale=GPT_SCALE[tier],
                    contexts=contexts or GRID_CONTEXTS[tier], out=out, settings=settings, record={"tier": tier})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="the GPT tuning grid of exp-robustness at a tier's sizes, on "
                                                 "development seeds")
    parser.add_argument("--tier", choices=tuple(GPT_SCALE), default="quick")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1000], help="development seeds (>= 1000)")
    parser.add_argument("--readings", nargs="+", default=list(GPT_READINGS))
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the grid (must not exist)")
    parser.add_argument("--contexts", type=int, help="contexts each run trains on (default: the tier's)")
    parser.add_argument("--setting", nargs=4, type=float, metavar=("WIDTH", "HEADS", "LR", "BATCH"),
                        help="one setting instead of the whole grid")
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"error: --out {args.out} exists; choose another file", file=sys.stderr)
        return 2
    settings = None if args.setting is None else [
        {"width": int(args.setting[0]), "heads": int(args.setting[1]), "lr": args.setting[2],
         "batch_size": int(args.setting[3])}]
    try:
        rows = run_tier_grid(args.readings, args.seeds, tier=args.tier, out=args.out, settings=settings,
                             contexts=args.contexts)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for reading, best in best_settings(rows).items():
        print(reading, best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
