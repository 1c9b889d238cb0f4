"""Replay of the refuted findings of our extensions with ``bma-verify check --instance FILE``: the k-parent DAG
claims (``ext-dag-lemma3-sets``, ``ext-dag-lemma4-sets``, ``ext-dag-thm3-sets``) and footnote 1's mappings onto
the selective-induction task. Every statement replayed here is ours, so a reproduced refutation exits 0.

Instance formats (JSON; ``kernels[i]`` is the order-i kernel of the DAG, ``init`` null the stationary law)::

    {"target": "dag-lemma3", "kernels": ..., "parent_sets": ..., "init": ..., "h": 3, "S": [0, 2],
     "candidate": "dobrushin" | "doeblin" | ... | "below_one"}
    {"target": "dag-lemma4", "kernels": ..., "parent_sets": ..., "init": ..., "h": 3, "S": [0, 2]}
    {"target": "dag-thm3", "kernels": ..., "parent_sets": ..., "init": ..., "h": 3, "form": "approximate" | "exact"}
    {"target": "footnote1", "kernel": ..., "lags": [1, 2], "sequence": [...],
     "statement": "every_window" | "mu_terms_dropped" | "per_lag_mu_terms_dropped"}

``candidate`` names an α of ``numerics.dag_lemma3.LEMMA3_SET_CANDIDATES``, or ``below_one`` for "some α < 1
bounds the ratio" (refuted when the ratio is 1 on a kernel with π > 0). Each replay recomputes the quantity from
the kernels alone; other keys of the record (ratio, margin, gap, error, ...) are informative and ignored.
"""
from __future__ import annotations

import numpy as np

from bma_verify.numerics.dag import check_dag_kernels
from bma_verify.numerics.dag_gradient import GRADIENT_FORMS, TIE_ATOL, dag_thm3_check_position
from bma_verify.numerics.dag_lemma3 import (LEMMA3_SET_CANDIDATES, dag_lemma3_sets, pair_index,
                                            recheck_stored_lemma3)
from bma_verify.numerics.dag_lemma4 import dag_lemma4_terms
from bma_verify.reports.checks.dag_common import IDENTITY_ATOL
from bma_verify.reports.claims.footnote1_selective_induction.claim import (EXACT_ATOL, REPLAY_STATEMENTS,
                                                                           per_lag_errors, sequence_errors)

EXTENSION_TARGETS = ("dag-lemma3", "dag-lemma4", "dag-thm3", "footnote1")
#: A ratio this close to 1 reads "equal to 1" (rounding of sums of at most d**H terms; ext-dag-lemma3-sets too).
RATIO_ONE_ATOL = 1e-12
#: footnote 1's statements: name -> the error key of the claim's records (the claim computes them; so does this).
FOOTNOTE1_ERRORS = {statement: key for key, statement in REPLAY_STATEMENTS.items()}
_FIELDS = {"dag-lemma3": ("kernels", "parent_sets", "h", "S", "candidate"),
           "dag-lemma4": ("kernels", "parent_sets", "h", "S"),
           "dag-thm3": ("kernels", "parent_sets", "h", "form"),
           "footnote1": ("kernel", "lags", "sequence", "statement")}


def check_extension_fields(instance: dict) -> None:
    """Every field the target needs is present (ValueError naming the first missing one)."""
    for key in _FIELDS[instance["target"]]:
        if key not in instance:
            raise ValueError(f"instance must have a {key!r} field for target {instance['target']!r} (the format: "
                             "README, 'Replaying an instance')")


def check_extension_instance(instance: dict) -> dict:
    """Re-check one instance of an extension target; the result has the keys of ``search.check_instance``
    (``target``, ``holds``, ``verdict``, ``summary``) and the recomputed numbers."""
    check_extension_fields(instance)
    target = instance["target"]
    if target == "footnote1":
        return _footnote1(instance)
    kernels = check_dag_kernels(instance["kernels"])
    parent_sets = np.asarray(instance["parent_sets"], dtype=np.int64)
    init = None if instance.get("init") is None else np.asarray(instance["init"], dtype=np.float64)
    h = int(instance["h"])
    if target == "dag-thm3":
        return _dag_thm3(instance, kernels, parent_sets, h, init)
    S = tuple(int(s) for s in instance["S"])
    if target == "dag-lemma4":
        return _dag_lemma4(kernels, parent_sets, h, S, init)
    return _dag_lemma3(instance, kernels, parent_sets, h, S, init)


def _result(target: str, holds: bool, summary: str, **numbers) -> dict:
    return {"target": target, "holds": bool(holds), "verdict": "pass" if holds else "fail", "summary": summary,
            **numbers}


def _dag_lemma3(instance, kernels, parent_sets, h, S, init) -> dict:
    candidate = instance["candidate"]
    if candidate != "below_one" and candidate not in LEMMA3_SET_CANDIDATES:
        raise ValueError(f"instance['candidate'] must be 'below_one' or one of "
                         f"{', '.join(LEMMA3_SET_CANDIDATES)}; got {candidate!r}")
    min_pi = float(min(t.min() for t in kernels))
    if candidate == "below_one":
        out = dag_lemma3_sets(kernels, parent_sets, init)
        p = pair_index(out, h, S)
        value, alpha, T = float(out["ratio"][p]), 1.0, list(out["T"][p])
        holds = not (abs(value - 1.0) <= RATIO_ONE_ATOL and min_pi > 0)
        what = "I(x_h; x_S)/I(x_h; x_T) (some α < 1 needs a ratio < 1)"
    else:  # the claim's own re-check of a stored counterexample
        record = recheck_stored_lemma3([{"candidate": candidate, "h": h, "S": list(S), "kernels": kernels,
                                         "parent_sets": parent_sets, "init": init}])[0]
        value, alpha, holds, T = record["value"], record["alpha"], not record["violates"], None
        what = "I(x_h; x_S)/I(x_h; x_T)" if LEMMA3_SET_CANDIDATES[candidate][0] == "ratio" else \
            "(I_S − I_∩)/(I_T − I_∩)"
        what += f" {'≤' if holds else '>'} α = {alpha:.6g} ({candidate})"
    return _result("dag-lemma3", holds, f"{what}: {value:.6g} at h={h}, S={list(S)}, min π = {min_pi:.3g}",
                   candidate=candidate, value=value, alpha=alpha, min_pi=min_pi, h=h, S=list(S),
                   **({"T": T} if T is not None else {}))


def _dag_lemma4(kernels, parent_sets, h, S, init) -> dict:
    terms = dag_lemma4_terms(kernels, parent_sets, h, S, init)
    min_pi = float(min(t.min() for t in kernels))
    gap = float(terms["lhs"])
    holds = gap > IDENTITY_ATOL or min_pi <= 0  # the statement: Δ > 0 whenever π ≥ ε > 0
    return _result("dag-lemma4", holds, f"Δ = E log π(x_h|x_T) − E log π(x_h|x_S) = {gap:.3g} nats at h={h}, "
                   f"S={list(S)}, T={list(terms['T'])}, min π = {min_pi:.3g} (strictness needs Δ > "
                   f"{IDENTITY_ATOL:g})",
                   gap=gap, min_pi=min_pi, h=h, S=list(S), T=list(terms["T"]))


def _dag_thm3(instance, kernels, parent_sets, h, init) -> dict:
    form = instance["form"]
    if form not in GRADIENT_FORMS:
        raise ValueError(f"instance['form'] must be one of {', '.join(GRADIENT_FORMS)}; got {form!r}")
    out = dag_thm3_check_position(kernels, parent_sets, h, init)
    margin = out[f"margin_{form}"]
    tie = TIE_ATOL * max(1.0, float(np.abs(out[form]).max()))
    holds = margin >= -tie
    return _result("dag-thm3", holds, f"entry of the true set − largest other = {margin:.6g} at h={h} ({form} "
                   f"form; tie within {tie:.0e}); true set {list(out['T'])}, largest {list(out[f'argmax_{form}'])}",
                   form=form, margin=float(margin), h=h, T=list(out["T"]), argmax=list(out[f"argmax_{form}"]),
                   values=np.asarray(out[form]).tolist())


def _footnote1(instance) -> dict:
    statement = instance["statement"]
    if statement not in FOOTNOTE1_ERRORS:
        raise ValueError(f"instance['statement'] must be one of {', '.join(FOOTNOTE1_ERRORS)}; got {statement!r}")
    key = FOOTNOTE1_ERRORS[statement]
    errors = per_lag_errors if key.startswith("per_lag") else sequence_errors
    error = float(errors(instance["kernel"], instance["lags"], instance["sequence"])[key])
    holds = error <= EXACT_ATOL
    return _result("footnote1", holds, f"{statement}: largest deviation {error:.3g} (probability) from the "
                   f"Bayes-optimal predictive over {len(instance['sequence']) + 1} positions (exact within "
                   f"{EXACT_ATOL:g})", statement=statement, error=error)
