"""The kernel claims on a user's own kernel: ``bma-verify check [CLAIM ...] --kernel FILE|FOLDER|NPZ``.

A researcher brings a kernel π (``kernel[i, j] = π(j | i)``) and asks whether Lemma 3, Lemma 4, Theorem 2, Theorem 3
and the Theorem 1 construction hold *for it*. The answer is about that kernel only: its ε = min π, d·ε, δ(π), the
Doeblin bound and its stationary law, then one row per (tree, pair) or (tree, position) swept. Trees are the
user's (``--parents``) or ``trees`` random recursive trees of ``H`` positions drawn from ``seed``; μ₀ is the
stationary law or the user's (``--init``).

What each claim reads, as stated by the paper (the verdict), and the sharper readings of ours (findings):

- ``lemma3-strict-dpi``: every ratio I(x_h; x_h')/I(x_h; x_pa) < 1 (needs ε > 0). Findings: the ratio against
  δ(π) and the Doeblin bound 1 − d·min π.
- ``lemma4-loglik-gap``: E log π(x_h|x_pa) − E log π(x_h|x_h') > 0 and equal to the MI gap plus E KL (needs ε > 0).
- ``thm2-consistency``: per pair, the gap Δ and the L that makes Hoeffding's bound exp(−LΔ²/(2 log²(1/ε))) ≤ 0.05.
  (The bound is a theorem; what depends on the kernel is Δ > 0, which is Lemma 4's.)
- ``thm3-init-gradient``: the J (χ²-MI) form puts the largest expected gradient on pa(h). Finding: the exact π̄ form.
- ``thm1-construction``: the constructed model's A^(2) equals the BMA posterior at β = 40 on contexts drawn from π.

A kernel with a zero entry violates the hypothesis π ≥ ε > 0 of Lemmas 3 and 4 and Theorem 2: the report says so
plainly and does not judge them (log π is −∞ there); Theorem 3 and the construction are still evaluated.
"""
from __future__ import annotations

import copy
import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from bma_verify.model.analysis import construction_errors_vs_beta
from bma_verify.numerics import (dobrushin_coefficient, doeblin_bound, random_parents, sample_task,
                                 stationary_distribution)
from bma_verify.numerics._validate import check_init, check_kernel, check_parents
from bma_verify.numerics.dpi_sweep import lemma3_pairs, lemma4_terms
from bma_verify.numerics.enumeration import MAX_SEQUENCES
from bma_verify.numerics.init_gradient_sweep import argmax_status, thm3_check_position
from bma_verify.reports.core import jsonable
from bma_verify.reports.io import write_text_atomic

#: The claims that are statements about a kernel, in report order.
KERNEL_CLAIMS = ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient",
                 "thm1-construction")
#: Theorem 2: the L at which Hoeffding's bound falls to this error probability.
THM2_TARGET_ERROR = 0.05
CONSTRUCTION_BETA = 40.0
CONSTRUCTION_TOLERANCE = 1e-6


def kernel_facts(kernel: np.ndarray) -> dict:
    """ε = min π, d·ε, δ(π), the Doeblin bound 1 − d·min π and the stationary law of one kernel."""
    d = kernel.shape[0]
    eps = float(kernel.min())
    return {"d": d, "eps": eps, "d_eps": d * eps, "dobrushin": float(dobrushin_coefficient(kernel)),
            "doeblin": float(doeblin_bound(kernel)), "stationary": stationary_distribution(kernel).tolist(),
            "hypothesis_eps_positive": eps > 0.0}


def _trees(parents, trees: int, H: int, rng: np.random.Generator) -> list[np.ndarray]:
    if parents is not None:
        return [np.asarray(parents)]
    return [random_parents(H, rng=rng) for _ in range(trees)]


def _lemma3_rows(kernel, trees, init) -> list[dict]:
    rows = []
    for t, parents in enumerate(trees):
        if len(parents) < 3:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):  # zero entries: log 0 (hypothesis violated)
            pairs = lemma3_pairs(kernel, parents, init)
            terms = lemma4_terms(kernel, pairs["joint_parent_child"], pairs["joint_candidate_child"])
        with np.errstate(invalid="ignore"):  # inf − inf where π has zeros: the identity error is NaN there
            errors = np.abs(terms["lhs"] - terms["rhs"])
        for p in range(len(pairs["h"])):
            rows.append({"tree": t, "h": int(pairs["h"][p]), "h_prime": int(pairs["h_prime"][p]),
                         "parent": int(pairs["parent"][p]), "ancestor": bool(pairs["ancestor"][p]),
                         "mi_parent": float(pairs["mi_parent"][p]), "mi_candidate": float(pairs["mi_candidate"][p]),
                         "ratio": float(pairs["ratio"][p]), "loglik_gap": float(terms["lhs"][p]),
                         "loglik_identity_error": float(errors[p])})
    return rows


def _thm3_rows(kernel, trees, init) -> list[dict]:
    rows = []
    d = kernel.shape[0]
    for t, parents in enumerate(trees):
        for h in range(2, len(parents)):
            if d ** (h + 1) > MAX_SEQUENCES:  # the exact π̄ form enumerates d^(h+1) sequences
                break
            with np.errstate(divide="ignore", invalid="ignore"):
                out = thm3_check_position(kernel, parents, h, init)
            rows.append({"tree": t, "h": h, "parent": out["parent"],
                         "J_form": argmax_status(out["approximate"], out["parent"])[0],
                         "J_margin": out["margin_approximate"],
                         "exact_form": argmax_status(out["exact"], out["parent"])[0],
                         "exact_margin": out["margin_exact"], "i_chi2_parent": out["i_chi2"]})
    return rows


def _construction(kernel, rng, contexts: int = 32, L: int = 6, H: int = 8) -> dict:
    batch = sample_task(kernel, contexts, L, H, rng=rng)
    errors = construction_errors_vs_beta(kernel, batch.context, batch.query, [CONSTRUCTION_BETA])
    return {"contexts": contexts, "L": L, "H": H, "beta": CONSTRUCTION_BETA,
            "attention_error": errors["attention_error"][0], "predictive_error": errors["predictive_error"][0]}


def _verdict(ok: bool | None) -> str:
    return "not applicable" if ok is None else ("holds" if ok else "fails")


def _why_zero(facts: dict) -> str:
    return (f"π has a zero entry (min π = {facts['eps']:g}): the hypothesis π ≥ ε > 0 is violated, so the "
            "statement does not apply (log π = −∞ there)")


def _lemma3_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Verdict: every defined ratio I(x_h; x_h')/I(x_h; x_pa) < 1; findings: the ratio against δ(π) and Doeblin."""
    positive = facts["hypothesis_eps_positive"]
    informative = [r for r in pair_rows if math.isfinite(r["ratio"])]
    max_ratio = max((r["ratio"] for r in informative), default=float("nan"))
    ok = None if not positive or not informative else max_ratio < 1.0
    findings = []
    if informative:
        for name in ("dobrushin", "doeblin"):
            alpha = facts[name]
            over = [r for r in informative if r["ratio"] > alpha]
            findings.append({"statement": f"the ratio is at most {name} α = {alpha:.4g} on every pair",
                             "status": "refuted" if over else "holds",
                             "instance": None if not over else max(over, key=lambda r: r["ratio"] - alpha)})
    return {"verdict": _verdict(ok), "why": None if positive else _why_zero(facts), "max_ratio": max_ratio,
            "pairs": len(pair_rows), "uninformative_pairs": len(pair_rows) - len(informative),
            "findings": findings, "rows": pair_rows}


def _lemma4_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Verdict: every log-likelihood gap > 0 and equal to the MI gap plus E KL (to 1e-10)."""
    positive = facts["hypothesis_eps_positive"]
    gaps = [r["loglik_gap"] for r in pair_rows]
    ok = None if not positive or not gaps else min(gaps) > 0 and max(
        r["loglik_identity_error"] for r in pair_rows) <= 1e-10
    return {"verdict": _verdict(ok), "why": None if positive else _why_zero(facts),
            "min_gap": min(gaps, default=float("nan")),
            "max_identity_error": max((r["loglik_identity_error"] for r in pair_rows), default=float("nan")),
            "pairs": len(pair_rows)}


def _thm2_result(facts: dict, pair_rows: list[dict]) -> dict:
    """Per pair the gap Δ and the L at which Hoeffding's bound reaches :data:`THM2_TARGET_ERROR`; verdict Δ > 0."""
    positive = facts["hypothesis_eps_positive"]
    rows = []
    if positive and facts["eps"] < 1.0:
        for r in pair_rows:
            gap = r["loglik_gap"]
            L_needed = (2 * math.log(1 / facts["eps"]) ** 2 * math.log(1 / THM2_TARGET_ERROR) / gap ** 2
                        if gap > 0 else float("inf"))
            rows.append({"tree": r["tree"], "h": r["h"], "h_prime": r["h_prime"], "gap": gap,
                         "L_for_error_0.05": L_needed})
    ok = None if not positive else all(r["gap"] > 0 for r in rows)
    return {"verdict": _verdict(ok), "why": None if positive else _why_zero(facts),
            "max_L_for_error_0.05": max((r["L_for_error_0.05"] for r in rows), default=float("nan")), "rows": rows}


def _thm3_result(kernel, swept, init) -> dict:
    """Verdict: the J form ranks pa(h) first wherever it is not a tie; finding: the exact π̄ form does too."""
    rows = _thm3_rows(kernel, swept, init)
    decided = [r for r in rows if r["J_form"] != "tie"]
    ok = None if not decided else all(r["J_form"] == "holds" for r in decided)
    exact_violations = [r for r in rows if r["exact_form"] == "violation"]
    return {
        "verdict": _verdict(ok), "why": None if decided else "every position is a tie (J = 0: the kernel "
                                                            "carries no information)",
        "positions": len(rows), "ties": len(rows) - len(decided),
        "J_form_violations": sum(r["J_form"] == "violation" for r in rows),
        "findings": [{"statement": "the exact π̄ form also puts the largest gradient on pa(h)",
                      "status": "refuted" if exact_violations else "holds",
                      "instance": exact_violations[0] if exact_violations else None}],
        "rows": rows}


def _thm1_result(kernel, facts: dict, rng) -> dict:
    """Verdict: the constructed A^(2) equals the BMA posterior within :data:`CONSTRUCTION_TOLERANCE`."""
    if not facts["hypothesis_eps_positive"]:  # W_KQ = log π must be finite
        return {"verdict": _verdict(None), "why": _why_zero(facts).replace(
            "the hypothesis π ≥ ε > 0 is violated, so the statement does not apply",
            "the construction sets W_KQ = log π, which is not finite")}
    result = _construction(kernel, rng)
    return {"verdict": _verdict(result["attention_error"] <= CONSTRUCTION_TOLERANCE), "why": None, **result}


def _claim_result(claim: str, kernel, facts: dict, swept, init, pair_rows: list[dict], rng) -> dict:
    if claim == "lemma3-strict-dpi":
        return _lemma3_result(facts, pair_rows)
    if claim == "lemma4-loglik-gap":
        return _lemma4_result(facts, pair_rows)
    if claim == "thm2-consistency":
        return _thm2_result(facts, pair_rows)
    if claim == "thm3-init-gradient":
        return _thm3_result(kernel, swept, init)
    return _thm1_result(kernel, facts, rng)


def _checked_inputs(kernel, claims, init, parents, trees, H):
    """Validate the arguments of :func:`check_kernel_claims` once: (kernel, parents, init) as arrays."""
    kernel = check_kernel(kernel, single=True)
    unknown = [c for c in claims if c not in KERNEL_CLAIMS]
    if unknown:
        raise ValueError(f"--kernel applies to the kernel claims {', '.join(KERNEL_CLAIMS)}; got {', '.join(unknown)}")
    if parents is not None:
        parents = check_parents(parents, name="parents (from --parents)", single=True)
    if init is not None:
        init = check_init(init, kernel.shape[0], name="init (from --init)")
    if isinstance(trees, bool) or not isinstance(trees, int) or trees < 1:
        raise ValueError(f"trees must be an integer >= 1, got {trees!r}")
    if isinstance(H, bool) or not isinstance(H, int) or H < 3:
        raise ValueError(f"H must be an integer >= 3 (a non-parent candidate needs h >= 2), got {H!r}")
    return kernel, parents, init


def check_kernel_claims(kernel, *, claims=KERNEL_CLAIMS, init=None, parents=None, trees: int = 20, H: int = 6,
                        seed: int = 0) -> dict:
    """Every kernel claim in ``claims`` on one kernel; a JSON-ready dict (see the module docstring).

    Returns
    -------
    dict with ``facts`` (:func:`kernel_facts`), ``init`` (the law used, or "stationary"), ``trees`` (the parent
    arrays swept), per claim a ``verdict`` ("holds", "fails" or "not applicable" with ``why``), its ``rows`` and
    ``findings`` (stronger readings of ours), and ``summary`` (one row of the batch table).
    """
    kernel, parents, init = _checked_inputs(kernel, claims, init, parents, trees, H)
    rng = np.random.default_rng(seed)
    facts = kernel_facts(kernel)
    swept = _trees(parents, trees, H, rng)  # drawn first: the construction's contexts come after
    out = {"facts": facts, "init": "stationary" if init is None else init.tolist(),
           "trees": [p.tolist() for p in swept], "claims": {}}
    pair_rows = _lemma3_rows(kernel, swept, init) if {"lemma3-strict-dpi", "lemma4-loglik-gap",
                                                      "thm2-consistency"} & set(claims) else []
    for claim in claims:
        out["claims"][claim] = _claim_result(claim, kernel, facts, swept, init, pair_rows, rng)
    verdicts = {c: out["claims"][c]["verdict"] for c in claims}
    out["summary"] = {"d": facts["d"], "eps": facts["eps"], "d_eps": facts["d_eps"], "dobrushin": facts["dobrushin"],
                      "doeblin": facts["doeblin"], **verdicts}
    return out


#: Units of the information quantities and log-likelihood gaps in a kernel result (ratios, χ² quantities, the
#: gradients and the Hoeffding L are unit-free or do not depend on the base of the logarithm).
UNITS = ("nats", "bits")
#: Fields measured in nats: per claim, the summary fields and the fields of its swept rows.
NAT_FIELDS = {"lemma3-strict-dpi": ("mi_parent", "mi_candidate", "loglik_gap", "loglik_identity_error"),
              "lemma4-loglik-gap": ("min_gap", "max_identity_error"),
              "thm2-consistency": ("gap",)}


def in_units(result: dict, units: str) -> dict:
    """``result`` of :func:`check_kernel_claims` with every nat-valued field (:data:`NAT_FIELDS`) in ``units``
    (a copy; ``"nats"`` returns it unchanged), and ``result["units"]`` naming them."""
    if units not in UNITS:
        raise ValueError(f"units must be one of {', '.join(UNITS)}, got {units!r}")
    out = copy.deepcopy(result)
    out["units"] = units
    if units == "nats":
        return out
    scale = 1.0 / math.log(2.0)
    for claim, fields in NAT_FIELDS.items():
        r = out["claims"].get(claim)
        if r is None:
            continue
        rows = [r] + list(r.get("rows", [])) + [f["instance"] for f in r.get("findings", [])
                                                 if isinstance(f.get("instance"), dict)]
        # a finding's instance is one of the rows (deepcopy keeps it shared): scale each object once
        for row in {id(row): row for row in rows}.values():
            for name in fields:
                if isinstance(row.get(name), float):
                    row[name] *= scale
    return out


def write_table(rows: list[dict], out_dir, *, force: bool = False) -> list[Path]:
    """kernels.csv and kernels.json (one row per kernel) in ``out_dir``, atomically; never overwritten silently."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    paths = [out_dir / "kernels.csv", out_dir / "kernels.json"]
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} already exists; pass --force to replace it")
    write_text_atomic(paths[0], buffer.getvalue())
    write_text_atomic(paths[1], json.dumps(jsonable(rows), indent=2, ensure_ascii=False) + "\n")
    return paths


def format_kernel_result(name: str, result: dict, *, rows: bool = True) -> str:
    """The human-readable output about one kernel: its facts, then per claim the verdict and the swept rows."""
    f = result["facts"]
    unit = result.get("units", "nats")
    lines = [f"kernel {name}: d = {f['d']}, ε = min π = {f['eps']:.4g}, d·ε = {f['d_eps']:.4g}, "
             f"δ(π) = {f['dobrushin']:.4g}, Doeblin 1 − d·min π = {f['doeblin']:.4g}",
             f"  stationary law: [{', '.join(f'{p:.4f}' for p in f['stationary'])}]; μ₀ used: "
             + (result["init"] if result["init"] == "stationary" else str(np.round(result["init"], 4).tolist())),
             f"  trees: {len(result['trees'])}" + (f" ({result['trees'][0]})" if len(result["trees"]) == 1 else "")]
    if not f["hypothesis_eps_positive"]:
        lines.append("  NOTE: π has a zero entry, which violates the hypothesis π ≥ ε > 0 of Lemmas 3, 4 and "
                     "Theorem 2; they are not judged on this kernel.")
    for claim, r in result["claims"].items():
        lines.append(f"{claim}: {r['verdict']}" + (f" ({r['why']})" if r.get("why") else ""))
        if claim == "lemma3-strict-dpi" and r["rows"]:
            lines.append(f"  largest ratio I(x_h;x_h')/I(x_h;x_pa) = {r['max_ratio']:.4f} over {r['pairs']} pairs")
            for finding in r["findings"]:
                lines.append(f"  finding (ours): {finding['statement']}: {finding['status']}")
            if rows:
                lines.append(f"  tree  h  h'  pa  ancestor  I(x_h;x_pa)  I(x_h;x_h')  ratio   (I in {unit})")
                lines += [f"  {x['tree']:4d} {x['h']:2d} {x['h_prime']:3d} {x['parent']:3d}  {str(x['ancestor']):8s}"
                          f"  {x['mi_parent']:11.4g}  {x['mi_candidate']:11.4g}  {x['ratio']:.4f}" for x in r["rows"]]
        elif claim == "lemma4-loglik-gap" and f["hypothesis_eps_positive"]:
            lines.append(f"  smallest gap {r['min_gap']:.4g} {unit} over {r['pairs']} pairs; identity error "
                         f"{r['max_identity_error']:.2g}")
        elif claim == "thm2-consistency" and r["rows"]:
            lines.append(f"  Hoeffding: L ≥ {r['max_L_for_error_0.05']:.4g} examples bring every pair's bound to "
                         f"{THM2_TARGET_ERROR}")
        elif claim == "thm3-init-gradient":
            lines.append(f"  {r['positions']} positions, {r['ties']} ties, {r['J_form_violations']} J-form violations")
            for finding in r["findings"]:
                lines.append(f"  finding (ours): {finding['statement']}: {finding['status']}")
            if rows:
                lines.append("  tree  h  pa  J form     margin       exact π̄ form  margin")
                lines += [f"  {x['tree']:4d} {x['h']:2d} {x['parent']:3d}  {x['J_form']:9s} {x['J_margin']:11.4g}  "
                          f"{x['exact_form']:13s} {x['exact_margin']:.4g}" for x in r["rows"]]
        elif claim == "thm1-construction" and "attention_error" in r:
            lines.append(f"  max ‖A^(2) − posterior‖₁ = {r['attention_error']:.2e} at β = {r['beta']:g} over "
                         f"{r['contexts']} contexts (L = {r['L']}, H = {r['H']})")
    return "\n".join(lines)
