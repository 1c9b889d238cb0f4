"""The kernel claims on a user's own kernel: ``bma-verify check [CLAIM ...] --kernel FILE|FOLDER|NPZ``.

A researcher brings a kernel π (``kernel[i, j] = π(j | i)``) and asks whether Lemma 3, Lemma 4, Theorem 2, Theorem 3
and the Theorem 1 construction hold *for it*. The answer is about that kernel only: its ε = min π, d·ε, δ(π), the
Doeblin bound and its stationary law, then per claim a verdict, the method used, the worst case and its margin
(every swept row with ``--rows``; the text: ``reports.kernel_text``). Trees are the user's (``--parents``) or
``trees`` random recursive trees of ``H`` positions drawn from ``seed``; μ₀ is the stationary law or the user's
(``--init``).

What each claim reads, as stated by the paper (the verdict), and the sharper readings of ours (findings):

- ``lemma3-strict-dpi``: every ratio I(x_h; x_h')/I(x_h; x_pa) < 1 (needs ε > 0). Findings: the ratio against
  δ(π) and the Doeblin bound 1 − d·min π.
- ``lemma4-loglik-gap``: E log π(x_h|x_pa) − E log π(x_h|x_h') > 0 and equal to the MI gap plus E KL (needs ε > 0).
- ``thm2-consistency``: per pair, the gap Δ and the L that makes Hoeffding's bound exp(−LΔ²/(2 log²(1/ε))) ≤ 0.05.
  (The bound is a theorem; what depends on the kernel is Δ > 0, which is Lemma 4's.)
- ``thm3-init-gradient``: the J (χ²-MI) form puts the largest expected gradient on pa(h). Finding: the exact π̄ form.
  Where the J form fails (a non-stationary ``--init``), ``holds_instead``: the repaired statement, the J form under
  the kernel's own stationary law (proved when π > 0), checked on the same trees, with its smallest margin.
- ``thm1-construction``: the constructed model's A^(2) equals the BMA posterior at β = 40 on contexts drawn from π.

Methods (``numerics.large_kernels``): Lemmas 3–4, Theorem 2 and Theorem 3's J form are exact at any d; the exact π̄
form is enumerated while d^(h+1) ≤ 2·10⁶, else estimated with its standard error. A size over the limits is refused
before anything is allocated. "not applicable" is kept for reasons true of the kernel: a zero entry (π ≥ ε > 0
violated) and no information (identical rows). Quantities within :data:`TIE_TOLERANCE` of zero are ties.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from bma_verify.numerics import doeblin_bound, random_parents, sample_task, stationary_distribution
from bma_verify.numerics.validation import check_init, check_kernel, check_parents
from bma_verify.numerics.claim_sweeps import MI_FLOOR, TIE_ATOL, VIOLATION_RTOL
from bma_verify.numerics.init_gradient_sweep import argmax_status
from bma_verify.numerics.large_kernels import (MAX_BYTES, MAX_OPERATIONS, MONTE_CARLO_Z, check_cost,
                                               dobrushin_coefficient_blocked, j_form_gradients, kernel_powers,
                                               powers_needed, thm3_position_rows, tree_pair_table)
from bma_verify.reports.catalog import KERNEL_CLAIMS  # the claims about a kernel, named without this module
from bma_verify.reports.io import write_text_atomic
from bma_verify.reports.search import replayable_kernel_findings

PAIR_CLAIMS = ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency")
#: Theorem 2: the L at which Hoeffding's bound falls to this error probability.
THM2_TARGET_ERROR = 0.05
CONSTRUCTION_BETA = 40.0
CONSTRUCTION_TOLERANCE = 1e-6
#: The construction's input has L·d one-hot coordinates per position: L (at most 6 examples) is chosen so that
#: L·d stays within this width, and a kernel wider than it alone is refused for thm1-construction.
CONSTRUCTION_MAX_WIDTH = 1200
#: Absolute tolerance (nats) under which a log-likelihood gap is a tie, and under which δ(π) (identical rows) means
#: the kernel carries no information. I(x_h; x_pa) ≤ MI_FLOOR leaves a ratio undefined; gradient margins within
#: TIE_ATOL·max(1, max|g|) are ties.
TIE_TOLERANCE = 1e-12
METHODS = {
    "pairs": "exact: pairwise joints through the lowest common ancestor, from the powers of π",
    "j_form": "exact: the J form in closed form from the powers of π",
    "enumeration": "exact: enumeration of the d^(h+1) prefixes",
    "monte-carlo": f"Monte Carlo: sampled prefixes, decided when the margin clears {MONTE_CARLO_Z:g} standard errors",
}


def kernel_facts(kernel: np.ndarray) -> dict:
    """ε = min π, d·ε, δ(π), the Doeblin bound 1 − d·min π, the stationary law, and whether π carries information."""
    d = kernel.shape[0]
    eps = float(kernel.min())
    dobrushin = dobrushin_coefficient_blocked(kernel)
    return {"d": d, "eps": eps, "d_eps": d * eps, "dobrushin": dobrushin, "doeblin": float(doeblin_bound(kernel)),
            "stationary": stationary_distribution(kernel).tolist(), "hypothesis_eps_positive": eps > 0.0,
            "informative": dobrushin > TIE_TOLERANCE}


def _trees(parents, trees: int, H: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [np.asarray(parents)] if parents is not None else [random_parents(H, rng=rng) for _ in range(trees)]


def _pair_rows(kernel, trees, laws) -> list[dict]:
    table = tree_pair_table(kernel, trees, laws=laws)
    names = ("tree", "h", "h_prime", "parent", "ancestor", "mi_parent", "mi_candidate", "ratio", "loglik_gap",
             "loglik_identity_error")
    casts = {"tree": int, "h": int, "h_prime": int, "parent": int, "ancestor": bool}
    return [{n: casts.get(n, float)(table[n][i]) for n in names} for i in range(len(table["h"]))]


def _construction(kernel, rng, stationary, contexts: int = 32, H: int = 8) -> dict:
    from bma_verify.model.analysis import construction_errors_vs_beta  # torch: seconds of start-up, thm1 only
    L = min(6, CONSTRUCTION_MAX_WIDTH // kernel.shape[0])  # L·d one-hot inputs per position: within the width
    batch = sample_task(kernel, contexts, L, H, rng=rng, init=stationary)
    errors = construction_errors_vs_beta(kernel, batch.context, batch.query, [CONSTRUCTION_BETA])
    return {"contexts": contexts, "L": L, "H": H, "beta": CONSTRUCTION_BETA,
            "attention_error": errors["attention_error"][0], "predictive_error": errors["predictive_error"][0]}


def _verdict(ok: bool | None) -> str:
    return "not applicable" if ok is None else ("holds" if ok else "fails")


def _not_applicable_reason(facts: dict, needs_positive: bool) -> str | None:
    """The reason, true of the kernel, that a claim does not apply: no information, or a zero entry."""
    if not facts["informative"]:
        return (f"no information: every row of π is the same law (δ(π) = {facts['dobrushin']:.2g} ≤ "
                f"{TIE_TOLERANCE:g}), so x_h is independent of every earlier position and no parent stands out")
    if needs_positive and not facts["hypothesis_eps_positive"]:
        return (f"π has a zero entry (min π = {facts['eps']:g}): the hypothesis π ≥ ε > 0 is violated, so the "
                "statement does not apply (log π = −∞ there)")
    return None


def _pair_where(row: dict) -> dict:
    return {k: row[k] for k in ("tree", "h", "h_prime", "parent")}


def _worst(where, value, value_is, value_units, margin, margin_is, margin_units) -> dict:
    """The worst case of a claim: where it is, its value and margin, each with what it is and its units."""
    return dict(zip(("where", "value", "value_is", "value_units", "margin", "margin_is", "margin_units"),
                    (where, value, value_is, value_units, margin, margin_is, margin_units)))


def _lemma3_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Verdict: every defined ratio I(x_h; x_h')/I(x_h; x_pa) < 1; findings: the ratio against δ(π) and Doeblin."""
    why = _not_applicable_reason(facts, needs_positive=True)
    informative = [r for r in pair_rows if math.isfinite(r["ratio"])]
    if why is None and not informative:
        why = f"no pair has I(x_h; x_pa) > {MI_FLOOR:g} nats: the ratio is undefined on every pair"
    out = {"verdict": _verdict(None), "why": why, "method": METHODS["pairs"], "pairs": len(pair_rows),
           "uninformative_pairs": len(pair_rows) - len(informative), "findings": [], "rows": pair_rows}
    if why is not None:
        return {**out, "max_ratio": float("nan")}
    top = max(informative, key=lambda r: r["ratio"])
    out.update(verdict=_verdict(top["ratio"] < 1.0 - VIOLATION_RTOL), max_ratio=top["ratio"], worst=_worst(
        _pair_where(top), top["ratio"], "largest ratio I(x_h; x_h')/I(x_h; x_pa)", "unit-free", 1.0 - top["ratio"],
        f"1 − largest ratio (the lemma needs > {VIOLATION_RTOL:g})", "unit-free"))
    for name in ("dobrushin", "doeblin"):
        alpha = facts[name]
        over = [r for r in informative if r["ratio"] > alpha]
        out["findings"].append({"statement": f"the ratio is at most {name} α = {alpha:.4g} on every pair",
                                "status": "refuted" if over else "holds",
                                "instance": None if not over else dict(max(over, key=lambda r: r["ratio"] - alpha),
                                                                       alpha=name)})
    return out


def _gap_result(facts: dict, pair_rows: list[dict]) -> tuple[dict, list[dict]]:
    """What Lemma 4 and Theorem 2 share: the reason they do not apply, or the pairs whose gap is not a tie."""
    why = _not_applicable_reason(facts, needs_positive=True)
    decided = [r for r in pair_rows if abs(r["loglik_gap"]) > TIE_TOLERANCE]
    if why is None and not decided:
        why = f"every pair is a tie: |gap| ≤ {TIE_TOLERANCE:g} nats"
    return {"verdict": _verdict(None), "why": why, "method": METHODS["pairs"], "pairs": len(pair_rows),
            "ties": len(pair_rows) - len(decided)}, decided


def _lemma4_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Verdict: every log-likelihood gap that is not a tie is > 0, and equals the MI gap plus E KL (to 1e-10)."""
    out, decided = _gap_result(facts, pair_rows)
    if out["why"] is not None:
        return {**out, "min_gap": float("nan"), "max_identity_error": float("nan")}
    low = min(decided, key=lambda r: r["loglik_gap"])
    error = max(r["loglik_identity_error"] for r in pair_rows)
    out.update(verdict=_verdict(low["loglik_gap"] > 0 and error <= 1e-10), min_gap=low["loglik_gap"],
               max_identity_error=error, worst=_worst(
                   _pair_where(low), low["loglik_gap"], "smallest gap E log π(x_h|x_pa) − E log π(x_h|x_h')", "nats",
                   low["loglik_gap"], "the gap itself (the lemma needs > 0)", "nats"))
    return out


def _thm2_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Per pair the gap Δ and the L at which Hoeffding's bound reaches :data:`THM2_TARGET_ERROR`; verdict Δ > 0."""
    out, decided = _gap_result(facts, pair_rows)
    if out["why"] is not None:
        return {**out, "max_L_for_error_0.05": float("nan"), "rows": []}
    log_eps = math.log(1 / facts["eps"])
    rows = [{**_pair_where(r), "gap": r["loglik_gap"],
             "L_for_error_0.05": (2 * log_eps ** 2 * math.log(1 / THM2_TARGET_ERROR) / r["loglik_gap"] ** 2
                                  if r["loglik_gap"] > 0 else float("inf"))} for r in decided]
    top = max(rows, key=lambda r: r["L_for_error_0.05"])
    out.update(verdict=_verdict(all(r["gap"] > 0 for r in rows)), rows=rows, worst=_worst(
        _pair_where(top), top["L_for_error_0.05"], f"largest L (examples) bringing Hoeffding's bound to "
        f"{THM2_TARGET_ERROR}", "examples", top["gap"], "its gap Δ (the theorem needs > 0; L grows as 1/Δ²)", "nats"))
    out["max_L_for_error_0.05"] = top["L_for_error_0.05"]
    return out


def _thm3_result(kernel, facts: dict, swept, laws, rng, init) -> dict:
    """Verdict: the J form ranks pa(h) first wherever it is not a tie; finding: the exact π̄ form does too."""
    why = _not_applicable_reason(facts, needs_positive=False)
    rows = [] if why else thm3_position_rows(kernel, swept, laws, init, rng)
    decided = [r for r in rows if r["J_form"] != "tie"]
    if why is None and not decided:
        why = f"every position is a tie: |margin| ≤ {TIE_ATOL:g}·max(1, max|g|)"
    methods = sorted({r["exact_method"] for r in rows})
    out = {"verdict": _verdict(None), "why": why, "positions": len(rows), "ties": len(rows) - len(decided),
           "J_form_violations": sum(r["J_form"] == "violation" for r in rows), "rows": rows,
           "method": "; ".join([f"J form — {METHODS['j_form']}"] + [
               f"exact π̄ form — {METHODS[m]} ({sum(r['exact_method'] == m for r in rows)} positions)"
               for m in methods]), "findings": []}
    if why is not None:
        return out
    low = min(decided, key=lambda r: r["J_margin"])
    out.update(verdict=_verdict(all(r["J_form"] == "holds" for r in decided)), worst=_worst(
        {"tree": low["tree"], "h": low["h"], "parent": low["parent"]}, low["J_gradient"],
        "expected gradients E g(h'), h' = 0..h−1, g = −∂ℓ/∂p̂_{h'} at p̂ = 0 (J form, ℓ = −ln f)",
        "nats per unit score",
        low["J_margin"], "E g(pa) − max over h' ≠ pa of E g(h') (the theorem needs > 0)", "nats per unit score"))
    violations = [r for r in rows if r["exact_form"] == "violation"]
    undecided = sum(r["exact_form"] == "undecided" for r in rows)
    out["findings"].append({"statement": "the exact π̄ form also puts the largest gradient on pa(h)",
                            "status": "refuted" if violations else ("undecided" if undecided else "holds"),
                            "instance": violations[0] if violations else None})
    if out["verdict"] == "fails":
        out["holds_instead"] = _thm3_repair(kernel, facts, swept)
    return out


#: The repaired statement of Theorem 3 that ``check --kernel`` checks where the J form fails on a user's kernel.
THM3_REPAIR = ("the J form under this kernel's stationary law (μ₀ = μ): J(pa) > J(h') for every h' ≠ pa(h) "
               "(thm3-init-gradient, what holds instead; proved when π > 0)")


def _thm3_repair(kernel, facts: dict, swept) -> dict:
    """The J form under the kernel's stationary law on the same trees: holds or fails, with its smallest margin."""
    laws = kernel_powers(kernel, powers_needed(swept, j_form=True), np.asarray(facts["stationary"]), stationary=True)
    cache, rows = {}, []
    for t, parents in enumerate(swept):
        for h in range(2, len(parents)):
            status, margin = argmax_status(j_form_gradients(kernel, parents, h, laws=laws, cache=cache),
                                           int(parents[h]))
            rows.append({"tree": t, "h": h, "parent": int(parents[h]), "status": status, "margin": margin})
    decided = [r for r in rows if r["status"] != "tie"]
    low = min(decided, key=lambda r: r["margin"]) if decided else None
    return {"statement": THM3_REPAIR, "proved": facts["eps"] > 0,
            "verdict": _verdict(all(r["status"] == "holds" for r in decided) if decided else None),
            "positions": len(rows), "ties": len(rows) - len(decided),
            "violations": sum(r["status"] == "violation" for r in rows),
            "worst": None if low is None else {
                "where": {k: low[k] for k in ("tree", "h", "parent")}, "margin": low["margin"],
                "margin_is": "E g(pa) − max over h' ≠ pa of E g(h') under the stationary law",
                "margin_units": "nats per unit score"}}


def _thm1_result(kernel, facts: dict, rng) -> dict:
    """Verdict: the constructed A^(2) equals the BMA posterior within :data:`CONSTRUCTION_TOLERANCE`."""
    why = _not_applicable_reason(facts, needs_positive=True)
    if why is not None:  # W_KQ = log π must be finite
        return {"verdict": _verdict(None), "why": why.replace(
            "the hypothesis π ≥ ε > 0 is violated, so the statement does not apply",
            "the construction sets W_KQ = log π, which is not finite")}
    result = _construction(kernel, rng, np.asarray(facts["stationary"]))
    error = result["attention_error"]
    return {"verdict": _verdict(error <= CONSTRUCTION_TOLERANCE), "why": None, **result,
            "method": f"the constructed model on {result['contexts']} sampled contexts (L = {result['L']} examples, "
                      f"H = {result['H']})",
            "worst": _worst({}, error, "largest ‖A^(2) − posterior‖₁ over contexts and positions", "unit-free",
                            CONSTRUCTION_TOLERANCE - error, f"tolerance {CONSTRUCTION_TOLERANCE:g} − that distance",
                            "unit-free")}


def _claim_result(claim: str, kernel, facts: dict, swept, laws, pair_rows: list[dict], rng, init) -> dict:
    return {"lemma3-strict-dpi": lambda: _lemma3_result(facts, pair_rows),
            "lemma4-loglik-gap": lambda: _lemma4_result(facts, pair_rows),
            "thm2-consistency": lambda: _thm2_result(facts, pair_rows),
            "thm3-init-gradient": lambda: _thm3_result(kernel, facts, swept, laws, rng, init),
            "thm1-construction": lambda: _thm1_result(kernel, facts, rng)}[claim]()


def _checked_inputs(kernel, claims, init, parents, trees, H):
    """Validate the arguments of :func:`check_kernel_claims` once: (kernel, parents, init) as arrays."""
    kernel = check_kernel(kernel, single=True)
    unknown = [c for c in claims if c not in KERNEL_CLAIMS]
    if unknown:
        raise ValueError(f"--kernel applies to the kernel claims {', '.join(KERNEL_CLAIMS)}; got {', '.join(unknown)}")
    if parents is not None:
        parents = check_parents(parents, name="parents", single=True)
    if init is not None:
        init = check_init(init, kernel.shape[0], name="init")
    if isinstance(trees, bool) or not isinstance(trees, int) or trees < 1:
        raise ValueError(f"trees (--trees) must be an integer >= 1, got {trees!r}")
    if isinstance(H, bool) or not isinstance(H, int) or H < 3:
        raise ValueError(f"H (--H) must be an integer >= 3 (a non-parent candidate needs h >= 2), got {H!r}")
    return kernel, parents, init


def _check_size(d: int, claims, parents, trees: int, H: int, stationary: bool) -> None:
    """Refuse, before anything is allocated, a kernel whose checks would not fit (one line, naming what to change)."""
    H_swept, trees_swept = (len(parents), 1) if parents is not None else (H, trees)
    cost = check_cost(d, H_swept, trees_swept, pairs=bool(set(PAIR_CLAIMS) & set(claims)), stationary=stationary)
    if cost["bytes"] > MAX_BYTES or cost["operations"] > MAX_OPERATIONS:
        least = check_cost(d, 3, 1, pairs=False)  # the stationary law and δ(π) alone
        fix = ("too many states at any --H and --trees" if least["operations"] > MAX_OPERATIONS
               or least["bytes"] > MAX_BYTES else "pass a smaller --H or fewer --trees")
        raise ValueError(f"a kernel of d = {d} states with H = {H_swept} positions needs about "
                         f"{cost['bytes'] / 2**30:.1f} GiB and {cost['operations']:.1e} operations for the exact "
                         f"checks, over the limits {MAX_BYTES / 2**30:g} GiB and {MAX_OPERATIONS:.0e}: {fix}")
    if "thm1-construction" in claims and d > CONSTRUCTION_MAX_WIDTH:
        raise ValueError(f"thm1-construction needs L·d ≤ {CONSTRUCTION_MAX_WIDTH} one-hot inputs and d = {d} exceeds "
                         "it even at L = 1; name the other claims (e.g. check lemma3-strict-dpi thm3-init-gradient "
                         "--kernel ...)")


def check_kernel_claims(kernel, *, claims=KERNEL_CLAIMS, init=None, parents=None, trees: int = 20, H: int = 6,
                        seed: int = 0) -> dict:
    """Every kernel claim in ``claims`` on one kernel; a JSON-ready dict (see the module docstring).

    Returns
    -------
    dict with ``facts`` (:func:`kernel_facts`), ``init`` (the law used, or "stationary"), ``trees`` (the parent
    arrays swept), ``tolerances``, per claim a ``verdict`` ("holds", "fails" or "not applicable" with ``why``), its
    ``method``, ``worst`` case (``where``, ``value``, ``margin``, each with what it is and its units), its ``rows``
    and ``findings`` (stronger readings of ours). Refuses (ValueError) a size whose checks would not fit.
    """
    kernel, parents, init = _checked_inputs(kernel, claims, init, parents, trees, H)
    _check_size(kernel.shape[0], claims, parents, trees, H, stationary=init is None)
    rng = np.random.default_rng(seed)
    facts = kernel_facts(kernel)
    swept = _trees(parents, trees, H, rng)  # drawn first: the construction's contexts come after
    out = {"facts": facts, "init": "stationary" if init is None else init.tolist(),
           "trees": [p.tolist() for p in swept], "claims": {},
           "tolerances": {"gap_tie_nats": TIE_TOLERANCE, "mi_floor_nats": MI_FLOOR, "gradient_tie": TIE_ATOL,
                          "ratio_rtol": VIOLATION_RTOL, "monte_carlo_z": MONTE_CARLO_Z}}
    law0 = np.asarray(facts["stationary"]) if init is None else init
    needs_laws = facts["informative"] and bool({"thm3-init-gradient", *PAIR_CLAIMS} & set(claims))
    top = powers_needed(swept, j_form="thm3-init-gradient" in claims)  # π^top: the highest power a check reads
    laws = kernel_powers(kernel, top, law0, stationary=init is None) if needs_laws else None
    pair_rows = _pair_rows(kernel, swept, laws) if needs_laws and set(PAIR_CLAIMS) & set(claims) else []
    # Theorem 3's samples draw from a generator of their own, so the construction's contexts do not depend on them
    samples = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(3,)))
    for claim in claims:
        out["claims"][claim] = _claim_result(claim, kernel, facts, swept, laws, pair_rows,
                                             samples if claim == "thm3-init-gradient" else rng, law0)
    replayable_kernel_findings(out, kernel, init)  # each refuted finding's instance replays with check --instance
    return out


#: Units of the information quantities and log-likelihood gaps (ratios, the Hoeffding L are unit-free; gradients
#: stay in nats per unit score).
UNITS = ("nats", "bits")
#: Fields measured in nats: per claim, the summary fields and the fields of its swept rows.
NAT_FIELDS = {"lemma3-strict-dpi": ("mi_parent", "mi_candidate", "loglik_gap", "loglik_identity_error"),
              "lemma4-loglik-gap": ("min_gap", "max_identity_error"), "thm2-consistency": ("gap",)}


def _copy_result(result: dict) -> dict:
    """A copy of a kernel result deep enough for :func:`in_units` (claims, rows, worst cases and findings are new
    dicts; a row shared with a finding stays shared), without deepcopy's cost on 10⁵ rows."""
    memo: dict[int, dict] = {}

    def row_copy(row):
        return memo.setdefault(id(row), dict(row)) if isinstance(row, dict) else row

    claims = {}
    for claim, r in result["claims"].items():
        claims[claim] = {**r, "rows": [row_copy(x) for x in r.get("rows", [])],
                         "findings": [{**f, "instance": row_copy(f.get("instance"))} for f in r.get("findings", [])]}
        if "worst" in r:
            claims[claim]["worst"] = dict(r["worst"])
    return {**result, "claims": claims}


def in_units(result: dict, units: str) -> dict:
    """``result`` of :func:`check_kernel_claims` with every nat-valued field (:data:`NAT_FIELDS`, and a worst case's
    value or margin in nats) in ``units`` (a copy; ``"nats"`` returns it unchanged), and ``result["units"]``."""
    if units not in UNITS:
        raise ValueError(f"units must be one of {', '.join(UNITS)}, got {units!r}")
    out = _copy_result(result)
    out["units"] = units
    if units == "nats":
        return out
    scale = 1.0 / math.log(2.0)
    for claim, r in out["claims"].items():
        worst = r.get("worst", {})
        for key in [k for k in ("value", "margin") if worst.get(f"{k}_units") == "nats"]:
            worst[key], worst[f"{key}_units"] = worst[key] * scale, units
        rows = [r] + list(r.get("rows", [])) + [f["instance"] for f in r.get("findings", [])
                                                 if isinstance(f.get("instance"), dict)]
        # a finding's instance is one of the rows (deepcopy keeps it shared): scale each object once
        for row in {id(row): row for row in rows}.values():
            for name in [n for n in NAT_FIELDS.get(claim, ()) if isinstance(row.get(n), float)]:
                row[name] *= scale
    return out


def where_text(where: dict) -> str:
    """A worst case's place, e.g. "tree = 0, h = 4, h' = 1, pa = 3"."""
    names = {"tree": "tree", "h": "h", "h_prime": "h'", "parent": "pa"}
    return ", ".join(f"{names[k]} = {v}" for k, v in where.items())


def table_row(name: str, result: dict) -> dict:
    """One row of the batch table (kernels.csv / kernels.json): the kernel's facts, each claim's verdict and its
    numbers (Lemma 3: largest ratio and its pair; Theorem 3: margin, gradients (a list) and parent at the worst
    position)."""
    f, unit = result["facts"], result.get("units", "nats")
    row = {"kernel": name, "d": f["d"], "eps": f["eps"], "d_eps": f["d_eps"], "dobrushin": f["dobrushin"],
           "doeblin": f["doeblin"]}
    for claim, r in result["claims"].items():
        row[claim] = r["verdict"]
        worst = r.get("worst")
        if claim == "lemma3-strict-dpi":
            row.update(lemma3_max_ratio=r["max_ratio"], lemma3_pair=where_text(worst["where"]) if worst else "")
        elif claim == "lemma4-loglik-gap":
            row[f"lemma4_min_gap_{unit}"] = r["min_gap"]
        elif claim == "thm2-consistency":
            row["thm2_max_L_for_error_0.05"] = r["max_L_for_error_0.05"]
        elif claim == "thm3-init-gradient":
            row.update(thm3_margin_nats=worst["margin"] if worst else float("nan"),
                       thm3_position=where_text({k: worst["where"][k] for k in ("tree", "h")}) if worst else "",
                       thm3_parent=worst["where"]["parent"] if worst else "",
                       thm3_gradient_nats=worst["value"] if worst else None)
        elif claim == "thm1-construction":
            row["thm1_attention_error"] = r.get("attention_error", float("nan"))
    return row


def write_table(rows: list[dict], out_dir, *, force: bool = False) -> list[Path]:
    """kernels.csv and kernels.json (one row per kernel) in ``out_dir``, atomically; never overwritten silently."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    # a list (Theorem 3's gradients) is one JSON array in its cell; kernels.json keeps it an array
    writer.writerows({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()} for row in rows)
    paths = [out_dir / "kernels.csv", out_dir / "kernels.json"]
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} already exists; pass --force to replace it")
    write_text_atomic(paths[0], buffer.getvalue())
    from bma_verify.reports.core import jsonable  # torch and matplotlib: seconds of start-up, only when writing

    write_text_atomic(paths[1], json.dumps(jsonable(rows), indent=2, ensure_ascii=False) + "\n")
    return paths
