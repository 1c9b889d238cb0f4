"""Claim ext-dag-training (ours, k-parent DAGs, the paper's open question 1): does gradient descent find k-parent
BMA?

The pair-attention model trained from a random initialisation reaches BMA (upper 3-SE bounds of its held-out L_pa
and query-loss gaps under ``LPA_TOL`` and ``QUERY_TOL``); the best standard alternative (family (a) as a model,
:class:`model.dag_training.KHeadSelector`) is trained alike and reported as findings. Negative control: the same
rule on the pair model at its initialisation. Converged: the pair run's loss record has plateaued
(:func:`model.convergence.record_plateau`); a plateaued run that misses the rule fails, one still improving reads
inconclusive. History of the values: docs/notes/ext-dag-training.md.
"""
from __future__ import annotations

from bma_verify.model.convergence import record_plateau
from bma_verify.model.dag_training import DagTrainConfig, train_dag
from bma_verify.reports.checks.trained import trained_verdict
from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, Table

SIZES = {
    "quick": {"d": 3, "H": 6, "pair_steps": 3000, "heads_steps": 3000, "eval_contexts": 1000},
    "full": {"d": 3, "H": 6, "pair_steps": 4000, "heads_steps": 4000, "eval_contexts": 4000},
}
# The rule: the trained pair model is "at BMA" when the upper 3-SE bounds of its held-out L_pa gap and query-loss
# gap are below these (nats per position h >= k); at initialisation they read 0.21 and 0.17 (the control).
LPA_TOL = 0.1
QUERY_TOL = 0.02
# Per model (model.dag_training.DagTrainConfig), K = 10 copier heads for L = 5: lr 0.03 reaches BMA in the steps
# of SIZES; the heads model diverges at lr 0.1, so its selector trains at 0.3x (as the tree training).
TRAIN_SETTINGS = {"pair": {"lr": 0.03, "selector_lr_scale": 1.0, "K": 10},
                  "heads": {"lr": 0.03, "selector_lr_scale": 0.3, "K": 10}}
# float32 training moves with the CPU's SIMD path: about three times the spread measured over instruction sets
# (nats; the pair's L_pa tolerance is half of LPA_TOL)
SPREAD = {"pair": {"lpa": 0.05, "query": 0.002}, "heads": {"lpa": 0.15, "query": 0.01}}
TOLERANCES = {f"{name}.final.{key}": {"abs": SPREAD[name][which]} for name in ("pair", "heads")
              for key, which in (("lpa_gap", "lpa"), ("lpa_model", "lpa"), ("query_gap", "query"),
                                 ("loss_model", "query"))}


def _sizes(ctx: CheckContext) -> dict:
    return SIZES["full" if ctx.full else "quick"]


def training_runs(ctx: CheckContext) -> dict:
    """Both trained runs (pair and heads), cached per context; model objects dropped."""
    key = ("ext-dag-training", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        s = _sizes(ctx)
        runs = {}
        for name in ("pair", "heads"):
            config = DagTrainConfig(model=name, d=s["d"], k=2, H=s["H"], L=5, steps=s[f"{name}_steps"],
                                    eval_contexts=s["eval_contexts"], seed=ctx.seed_for(f"ext-dag-training:{name}")
                                    % (2**31), **TRAIN_SETTINGS[name])
            run = train_dag(config)
            run.pop("model")
            runs[name] = run
        ctx.cache[key] = runs
    return ctx.cache[key]


def _decide_training(evaluation: dict) -> dict:
    """The rule on one :func:`model.dag_training.evaluate_dag_model` result (the trained model or its control).

    at BMA: upper 3-SE bounds of the held-out L_pa gap <= LPA_TOL and of the query-loss gap <= QUERY_TOL.
    """
    lpa_upper = evaluation["lpa_gap"] + 3 * evaluation["lpa_gap_se"]
    query_upper = evaluation["query_gap"] + 3 * evaluation["query_gap_se"]
    ok = lpa_upper <= LPA_TOL and query_upper <= QUERY_TOL
    return {"verdict": "pass" if ok else "fail", "lpa_upper": float(lpa_upper), "query_upper": float(query_upper)}


def _findings(runs: dict) -> list[Finding]:
    """The standard alternative (heads) against the pair model: further from BMA in query loss (by 3 + 3 SE), and
    whether it reaches BMA by the check's own rule."""
    pair, heads = runs["pair"], runs["heads"]
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
                         f"{pair['config']['eval_contexts']} held-out contexts"),
        Finding("the trained standard alternative reaches BMA by the same rule (L_pa and query gaps within "
                f"{LPA_TOL} and {QUERY_TOL} nats)", "holds" if heads_decided["verdict"] == "pass" else "refuted",
                instance=None if heads_decided["verdict"] == "pass" else {"final": hf},
                evidence=f"L_pa gap {hf['lpa_gap']:.3f} ± {hf['lpa_gap_se']:.3f}, query gap {hf['query_gap']:.4f} "
                         f"± {hf['query_gap_se']:.4f}"),
    ]


def _table(runs: dict) -> Table:
    rows = [[name, phase, f"{r[phase]['lpa_gap']:.4f} ± {r[phase]['lpa_gap_se']:.4f}",
             f"{r[phase]['query_gap']:.4f} ± {r[phase]['query_gap_se']:.4f}", f"{r[phase]['lpa_model']:.4f}",
             f"{r[phase]['lpa_bma']:.4f}"]
            for name, r in runs.items() for phase in ("init", "final")]
    return Table("Held-out gaps to BMA (nats per position h >= 2, ± SE over contexts)",
                 ["model", "when", "L_pa gap", "query-loss gap", "L_pa model", "L_pa BMA"], rows)


def _summary(runs: dict, control: dict) -> str:
    c, pf, hf = runs["pair"]["config"], runs["pair"]["final"], runs["heads"]["final"]
    return (f"k = 2, d = {c['d']}, H = {c['H']}, L = {c['L']}: pair attention trained {c['steps']} steps from a "
            f"random initialisation reaches L_pa gap {pf['lpa_gap']:.3f} ± {pf['lpa_gap_se']:.3f} and query gap "
            f"{pf['query_gap']:.4f} ± {pf['query_gap_se']:.4f} nats (two bilinear heads: {hf['lpa_gap']:.3f} and "
            f"{hf['query_gap']:.4f}); control (the model at initialisation: {control['lpa_upper']:.3f}, "
            f"{control['query_upper']:.3f}) {'rejected' if control['verdict'] != 'pass' else 'NOT rejected'}")


def _assumptions(c: dict) -> list[str]:
    return [f"sizes d = {c['d']}, H = {c['H']}, L = {c['L']}, K = {c['K']} copier heads, batch "
            f"{c['batch_size']}, {c['steps']} steps, AdamW lr {c['lr']} (warm-up {c['warmup']}, cosine)",
            "kernels: rows Dirichlet(1) with floor ε = 0.01, one family per run",
            "the standard alternative is family (a) as a model: two bilinear heads and a multiplicative "
            "readout through one d² × d table (lr 0.03, its selector at 0.3×; at lr 0.1 it diverges)"]


def ext_dag_training(ctx: CheckContext) -> CheckOutcome:
    """Model check: pair attention and the best standard alternative, trained from random initialisations; how
    close each gets to BMA (rule: :func:`_decide_training` on the pair model; control: the same rule on the pair
    model at its initialisation)."""
    runs = training_runs(ctx)
    pair = runs["pair"]
    decided, control = _decide_training(pair["final"]), _decide_training(pair["init"])
    converged = record_plateau(pair["losses"])
    verdict, reason = trained_verdict(decided["verdict"], converged, {"at_bma": decided["verdict"]})
    measured = {name: {"init": r["init"], "final": r["final"], "converged": r["converged"],
                       "steps": r["config"]["steps"]} for name, r in runs.items()}
    return CheckOutcome(
        verdict=verdict, reason=reason, measured=measured,
        threshold={"lpa_tol": LPA_TOL, "query_tol": QUERY_TOL, "z": 3.0},
        summary=_summary(runs, control), tables=[_table(runs)],
        tolerances=dict(TOLERANCES),
        control=Control(description="the pair model at its random initialisation",
                        measured={"lpa_gap_upper": control["lpa_upper"], "query_gap_upper": control["query_upper"]},
                        rejected=control["verdict"] != "pass"),
        findings=_findings(runs), converged=converged, assumptions=_assumptions(pair["config"]),
    )


CLAIM = Claim("ext-dag-training",
      "Ours: gradient descent finds k-parent BMA in the pair-attention (2-simplicial) model.",
      "k = 2, d = 3, H = 6, L = 5: the copier followed by pair attention, trained from a random initialisation, "
      "reaches the exact set posterior and the BMA predictive on held-out contexts (upper 3-SE bounds of the L_pa "
      "gap ≤ 0.1 and of the query-loss gap ≤ 0.02 nats per position h ≥ 2); the standard alternative (two bilinear "
      "heads, multiplied readout), trained alike, is reported as findings.",
      (Check("model", ext_dag_training,
             "both models trained from random initialisations; held-out gaps to the exact set posterior and BMA "
             "predictive; control: the pair model at its initialisation", reading="reproduction"),),
      section="beyond")
