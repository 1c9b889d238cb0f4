"""Claim ext-dag-training (ours, k-parent DAGs, the paper's open question 1): does gradient descent find k-parent
BMA?

The pair-attention model trained from a random initialisation reaches BMA (upper 3-SE bounds of its held-out L_pa
and query-loss gaps under ``LPA_TOL`` and ``QUERY_TOL``), decided on the report's training seeds by the count rule
(``reports.checks.trained.count_verdict``); a seed counts when its held-out curve has plateaued
(``model.convergence.plateau_test``). Near-miss control: the same rule on BMA reading L − 1 of the L examples, with
its power over m = 1 … L examples read. The best standard alternative (family (a) as a model,
:class:`model.dag_training.KHeadSelector`), trained on the first seed, is reported as findings. The quick tier
trains nothing (``TRAINS``): it reports the control and its power and cannot decide. History of the values:
docs/notes/ext-dag-training.md.
"""
from __future__ import annotations

from dataclasses import asdict

from bma_verify.model.dag_training import (DagTrainConfig, eval_task, run_kernels, train_dag,
                                           truncated_bma_evaluation)
from bma_verify.reports.checks.trained import (confirm_misses, count_verdict, ideal_control, power_text, seed_keys,
                                               seeds_record, seeds_text, training_seeds, untrained_record,
                                               why_unconfirmed)
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, Table
from bma_verify.reports.core import ControlMargin
from bma_verify.reports.protocol import run_plan

#: The run set these runs belong to (``reports.protocol.RUN_SETS``).
RUN_SET = "ext-dag-training"
#: Run sizes per tier (the quick tier's are the runs its control is computed on, and what the probes train).
SIZES = {
    "quick": {"d": 3, "H": 6, "pair_steps": 3000, "heads_steps": 3000, "eval_contexts": 1000, "batch_size": 128,
              "eval_every": 150},
    "full": {"d": 3, "H": 6, "pair_steps": 4000, "heads_steps": 4000, "eval_contexts": 4000, "batch_size": 128,
             "eval_every": 200},
}
#: Tiers that train. Three pair runs at the quick sizes (about 30 s each on an idle core) do not fit the quick
#: tier's 60 s, and at batch 64 (which would) two of six development seeds stuck at L_pa ≈ 0.18 where batch 128
#: reaches BMA: the quick tier cannot decide (docs/notes/ext-dag-training.md).
TRAINS = ("full",)
#: Development seeds LPA_TOL and the quick sizes were set on (report training seeds are below 1000).
TUNED_ON = (1000, 1001, 1002, 1003, 1004, 1005)
# The rule: the trained pair model is "at BMA" when the upper 3-SE bounds of its held-out L_pa gap and query-loss
# gap are below these (nats per position h >= k). LPA_TOL sits between the development runs that reach BMA (upper
# bounds <= 0.019) and BMA reading 4 of 5 examples (lower bounds >= 0.046): docs/notes/ext-dag-training.md. The
# query-loss part does not separate that near miss (its upper bounds 0.006-0.019); the L_pa part does.
LPA_TOL = 0.035
QUERY_TOL = 0.02
# Per model (model.dag_training.DagTrainConfig), K = 10 copier heads for L = 5: lr 0.03 reaches BMA in the steps
# of SIZES; the heads model diverges at lr 0.1, so its selector trains at 0.3x (as the tree training).
TRAIN_SETTINGS = {"pair": {"lr": 0.03, "selector_lr_scale": 1.0, "K": 10},
                  "heads": {"lr": 0.03, "selector_lr_scale": 0.3, "K": 10}}
# float32 training moves with the CPU's SIMD path: about three times the spread measured over instruction sets
# (nats, batch 128, 3000 steps; docs/notes/ext-dag-training.md)
SPREAD = {"pair": {"lpa": 0.05, "query": 0.002}, "heads": {"lpa": 0.15, "query": 0.01}}
TOLERANCES = {f"{name}.final.{key}": {"abs": SPREAD[name][which]} for name in ("pair", "heads")
              for key, which in (("lpa_gap", "lpa"), ("lpa_model", "lpa"), ("query_gap", "query"),
                                 ("loss_model", "query"))}


def protocol(tier: str) -> dict:
    """What ext-dag-training is decided by at ``tier`` (its pre-registered protocol, ``reports.protocol``): both
    models' configs, whether the tier trains, and the rule's tolerances."""
    return {"runs": {name: run_plan(run_config(tier, name, 0)) for name in ("pair", "heads")},
            "trains": tier in TRAINS, "lpa_tol": LPA_TOL, "query_tol": QUERY_TOL,
            "rule": "upper 3-SE bounds of the held-out L_pa gap and query-loss gap below their tolerances"}

def run_config(tier: str, name: str, seed: int) -> DagTrainConfig:
    """The configuration of model ``name`` ("pair" or "heads") trained on ``seed`` at ``tier``'s sizes."""
    s = SIZES[tier]
    return DagTrainConfig(model=name, d=s["d"], k=2, H=s["H"], L=5, steps=s[f"{name}_steps"],
                          batch_size=s["batch_size"], eval_contexts=s["eval_contexts"], eval_every=s["eval_every"],
                          seed=seed, **TRAIN_SETTINGS[name])


def training_runs(ctx: CheckContext) -> dict:
    """{"seeds", "pair": [run per training seed], "heads": run on the first seed}, cached per context (each record
    keeps its model for a continuation)."""
    seeds = training_seeds(ctx, RUN_SET)
    key = ("ext-dag-training", ctx.tier, tuple(seeds))
    if key not in ctx.cache:
        ctx.cache[key] = {"seeds": seeds, "pair": [train_dag(run_config(ctx.tier, "pair", s)) for s in seeds],
                          "heads": train_dag(run_config(ctx.tier, "heads", seeds[0]))}
    return ctx.cache[key]


def _decide_training(evaluation: dict) -> dict:
    """The rule on one evaluation (:func:`model.dag_training.evaluate_dag_model` or
    :func:`model.dag_training.truncated_bma_evaluation`).

    at BMA: upper 3-SE bounds of the held-out L_pa gap <= LPA_TOL and of the query-loss gap <= QUERY_TOL.
    """
    lpa_upper = evaluation["lpa_gap"] + 3 * evaluation["lpa_gap_se"]
    query_upper = evaluation["query_gap"] + 3 * evaluation["query_gap_se"]
    ok = lpa_upper <= LPA_TOL and query_upper <= QUERY_TOL
    return {"verdict": "pass" if ok else "fail", "lpa_upper": float(lpa_upper), "query_upper": float(query_upper)}


def judge(run: dict) -> tuple[str, dict]:
    """The rule as a continuation judge (``reports.checks.trained.confirm_misses``): the status and the two upper
    bounds with their tolerances."""
    decided = _decide_training(run["final"])
    return decided["verdict"], {"lpa_upper": (decided["lpa_upper"], LPA_TOL, True),
                                "query_upper": (decided["query_upper"], QUERY_TOL, True)}


def reading_power(run: dict) -> list[dict]:
    """The rule on BMA reading the last m of the run's L examples on its held-out contexts, m = 1 … L (m = L is
    BMA itself): the near-miss control's power curve."""
    config = DagTrainConfig(**run["config"])
    kernels = run_kernels(config)
    batch = eval_task(config, kernels)
    points = []
    for m in range(1, config.L + 1):
        evaluation = truncated_bma_evaluation(kernels, batch, config.k, m)
        decided = _decide_training(evaluation)
        points.append({"x": m, "label": f"BMA reading {m} of {config.L}", "rejected": decided["verdict"] != "pass",
                       "value": evaluation["lpa_gap"], "lpa_upper": decided["lpa_upper"],
                       "query_upper": decided["query_upper"]})
    return points


def near_miss_control(run: dict) -> Control:
    """BMA reading L − 1 of the first seed's L examples (one example ignored), with the power curve."""
    power = reading_power(run)
    near = power[-2]
    return Control(f"BMA reading only the last {near['x']} of {power[-1]['x']} examples on the same held-out contexts "
                   "(one example ignored), judged by the same rule",
                   {"examples": near["x"], "lpa_gap": near["value"], "lpa_gap_upper": near["lpa_upper"],
                    "query_gap_upper": near["query_upper"]}, near["rejected"], power=power,
                   # either upper bound above its tolerance fails the rule: the one furthest above it
                   margin=max(ControlMargin("lpa_gap_upper", near["lpa_upper"], LPA_TOL, units="nats"),
                              ControlMargin("query_gap_upper", near["query_upper"], QUERY_TOL, units="nats"),
                              key=lambda m: m.distance))


def _findings(pair: dict, heads: dict) -> list[Finding]:
    """The standard alternative (heads) against the pair model on the first seed: further from BMA in query loss
    (by 3 + 3 SE), and whether it reaches BMA by the check's own rule."""
    hf, pf = heads["final"], pair["final"]
    heads_decided = _decide_training(hf)
    further = hf["query_gap"] - 3 * hf["query_gap_se"] > pf["query_gap"] + 3 * pf["query_gap_se"]
    return [
        Finding("trained from a random initialisation, the standard alternative (family (a): two bilinear heads, "
                "multiplied readout) stays further from BMA in query loss than the pair-attention model",
                "holds" if further else "refuted",
                instance=None if further else {"heads": hf, "pair": pf},
                evidence=f"query-loss gap {hf['query_gap']:.4f} ± {hf['query_gap_se']:.4f} (heads) vs "
                         f"{pf['query_gap']:.4f} ± {pf['query_gap_se']:.4f} (pair) nats, "
                         f"{pair['config']['eval_contexts']} held-out contexts, training seed "
                         f"{pair['config']['seed']}"),
        Finding("the trained standard alternative reaches BMA by the same rule (L_pa and query gaps within "
                f"{LPA_TOL} and {QUERY_TOL} nats)", "holds" if heads_decided["verdict"] == "pass" else "refuted",
                instance=None if heads_decided["verdict"] == "pass" else {"final": hf},
                evidence=f"L_pa gap {hf['lpa_gap']:.3f} ± {hf['lpa_gap_se']:.3f}, query gap {hf['query_gap']:.4f} "
                         f"± {hf['query_gap_se']:.4f}"),
    ]


def _table(runs: dict) -> Table:
    named = [(f"pair (seed {r['config']['seed']})", r) for r in runs["pair"]]
    named.append((f"heads (seed {runs['heads']['config']['seed']})", runs["heads"]))
    rows = [[name, phase, f"{r[phase]['lpa_gap']:.4f} ± {r[phase]['lpa_gap_se']:.4f}",
             f"{r[phase]['query_gap']:.4f} ± {r[phase]['query_gap_se']:.4f}", f"{r[phase]['lpa_model']:.4f}",
             f"{r[phase]['lpa_bma']:.4f}", r["plateau"]["plateaued"] if phase == "final" else ""]
            for name, r in named for phase in ("init", "final")]
    return Table("Held-out gaps to BMA (nats per position h >= 2, ± SE over contexts)",
                 ["model", "when", "L_pa gap", "query-loss gap", "L_pa model", "L_pa BMA", "plateaued"], rows)


def _summary(runs: dict, record: dict, control: Control) -> str:
    c, lpa, query = runs["pair"][0]["config"], record["metrics"]["lpa_gap"], record["metrics"]["query_gap"]
    heads = (f"two bilinear heads (first seed): {runs['heads']['final']['lpa_gap']:.3f} and "
             f"{runs['heads']['final']['query_gap']:.4f}")
    return (f"k = 2, d = {c['d']}, H = {c['H']}, L = {c['L']}: pair attention trained {c['steps']} steps from a "
            f"random initialisation reaches L_pa gap median {lpa['median']:.4f} ({lpa['min']:.4f} to "
            f"{lpa['max']:.4f}) and query gap median {query['median']:.4f} ({query['min']:.4f} to {query['max']:.4f}) "
            f"nats; {seeds_text(record)}; {heads}. Control ({control.description}: L_pa gap upper bound "
            f"{control.measured['lpa_gap_upper']:.3f}) {'rejected' if control.rejected else 'NOT rejected'}; "
            f"{power_text(control.power)}")


def _assumptions(c: dict) -> list[str]:
    return [f"sizes d = {c['d']}, H = {c['H']}, L = {c['L']}, K = {c['K']} copier heads, batch "
            f"{c['batch_size']}, {c['steps']} steps, AdamW lr {c['lr']} (warm-up {c['warmup']}, cosine)",
            "kernels: rows Dirichlet(1) with floor ε = 0.01, one family per training seed",
            f"converged: the held-out query-loss gap's plateau test (evaluated every {c['eval_every']} steps)",
            "the standard alternative is family (a) as a model: two bilinear heads and a multiplicative "
            "readout through one d² × d table (lr 0.03, its selector at 0.3×; at lr 0.1 it diverges), trained on "
            "the first training seed only (a finding, not deciding)"]


def _seed_metrics(run: dict, decided: dict) -> dict:
    f = run["final"]
    return {"lpa_gap": f["lpa_gap"], "query_gap": f["query_gap"], "lpa_upper": decided["lpa_upper"],
            "query_upper": decided["query_upper"], "seconds": run["seconds"]}


def _untrained(ctx: CheckContext) -> CheckOutcome:
    """The check at a tier that does not train: its near-miss control and power curve on the first training seed's
    held-out contexts, no verdict."""
    first = {"config": asdict(run_config(ctx.tier, "pair", training_seeds(ctx, "ext-dag-training")[0]))}
    control = near_miss_control(first)
    reason = (f"{ctx.tier} tier cannot decide: three pair runs do not fit its budget (and cheaper ones stick); the "
              f"{', '.join(TRAINS)} tier trains its seeds and decides")
    return CheckOutcome(
        verdict="inconclusive", reason=reason, measured={"control": control.measured}, control=control,
        positive_control=ideal_control(control, "BMA itself (reading all L examples) on the same held-out contexts"),
        **untrained_record(ctx, reason), threshold={"lpa_tol": LPA_TOL, "query_tol": QUERY_TOL, "z": 3.0},
        summary=(f"{reason}. Control ({control.description}: L_pa gap upper bound "
                 f"{control.measured['lpa_gap_upper']:.3f}) {'rejected' if control.rejected else 'NOT rejected'}; "
                 f"{power_text(control.power)}"))


def ext_dag_training(ctx: CheckContext) -> CheckOutcome:
    """Model check: pair attention trained from random initialisations on the report's training seeds, decided by
    the count rule over :func:`_decide_training`; near-miss control :func:`near_miss_control`; the standard
    alternative as findings. A tier outside ``TRAINS`` reports its control only (:func:`_untrained`)."""
    if ctx.tier not in TRAINS:
        return _untrained(ctx)
    runs = training_runs(ctx)
    pairs = runs["pair"]
    decided = [_decide_training(r["final"]) for r in pairs]
    statuses, tests = [d["verdict"] for d in decided], [r["plateau"] for r in pairs]
    more = confirm_misses(ctx, RUN_SET, pairs, statuses, tests, judge, seed_keys(ctx, RUN_SET, "pair"),
                          objective="query_gap")
    verdict, reason, converged = count_verdict(statuses, tests, more, why_unconfirmed=why_unconfirmed(ctx, RUN_SET))
    record = seeds_record(runs["seeds"], statuses, tests, [_seed_metrics(r, d) for r, d in zip(pairs, decided)],
                          more)
    control = near_miss_control(pairs[0])
    measured = {name: {"init": r["init"], "final": r["final"], "plateaued": r["plateau"]["plateaued"],
                       "steps": r["config"]["steps"], "seed": r["config"]["seed"]}
                for name, r in (("pair", pairs[0]), ("heads", runs["heads"]))}
    return CheckOutcome(
        verdict=verdict, reason=reason, measured=measured,
        threshold={"lpa_tol": LPA_TOL, "query_tol": QUERY_TOL, "z": 3.0, "count_rule": record["count_rule"]},
        summary=_summary(runs, record, control), tables=[_table(runs)], tolerances=dict(TOLERANCES),
        control=control, findings=_findings(pairs[0], runs["heads"]), converged=converged, seeds=record,
        positive_control=ideal_control(control, "BMA itself (reading all L examples) on the same held-out contexts"),
        assumptions=_assumptions(pairs[0]["config"]))


CLAIM = Claim("ext-dag-training",
      "Ours: gradient descent finds k-parent BMA in the pair-attention (2-simplicial) model.",
      "k = 2, d = 3, H = 6, L = 5: the copier followed by pair attention, trained from a random initialisation, "
      f"reaches the exact set posterior and the BMA predictive on held-out contexts (upper 3-SE bounds of the L_pa "
      f"gap ≤ {LPA_TOL} and of the query-loss gap ≤ {QUERY_TOL} nats per position h ≥ 2) on at least 80% of the "
      "training seeds; the standard alternative (two bilinear heads, multiplied readout), trained alike, is reported "
      "as findings.",
      (Check("model", ext_dag_training,
             "pair attention trained from random initialisations on several seeds; held-out gaps to the exact set "
             "posterior and BMA predictive; near-miss control: BMA reading L − 1 of the L examples, with the rule's "
             "power over m = 1 … L", reading="reproduction"),),
      section="beyond")
