"""Checks of our extension to multi-parent DAGs (issue 15; ``ext-dag-*`` claims, ours, not the paper's).

Each check packages what :mod:`numerics.dag`, :mod:`numerics.dag_enumeration`, :mod:`numerics.dag_information`
and :mod:`theory.dag` return, and applies its decision rule twice in the same call (SPEC §4.1): to the real input
and to a negative control known to be false, through one ``_decide_*`` function.

* ``ext-dag-posterior`` (exact): the factorised set posterior and BMA predictive against Bayes over every DAG with
  the full likelihood; k = 1 against the tree functions bit for bit. Control: the posterior computed with the
  parents' order transposed (π(c | b, a) for π(c | a, b)).
* ``ext-dag-lemma4-sets`` (symbolic, exact, Monte Carlo): the identity Δ = ΔI + E KL = Σ r KL, its strictness
  condition. Controls: the decomposition without its E KL term.
* ``ext-dag-lemma3-sets`` (exact): ratio distributions for disjoint and overlapping sets, candidate α findings.
  Control: the planted overlap instance (ratio 1, π ≥ ε) fed to the same "ratio < 1" rule.
* ``ext-dag-thm3-sets`` (exact): is the true set's expected init gradient the largest (J and π̄ forms, both μ₀).
  Control: the same argmax rule with the true-set label moved to a random other candidate.

Also here: ``ext-dag-construction`` (symbolic and model: the 2-simplicial construction of model.pair_attention;
control: a wrong table T) and ``footnote1-selective-induction`` (a claim of the paper; numerics.selective_induction;
control: the lag read off by one).

Regression tolerances: every value is a function of the report seed alone (NumPy generators and float64 sums;
SymPy for the symbolic checks; float64 torch for the construction). Every measured value was bit-identical over
OMP_NUM_THREADS=1|2 × ATEN_CPU_CAPABILITY=default|avx2 at seed 0, quick tier (avx512 is not available on the
machine that measured it: the process stops with an illegal instruction); see the comment next to each
``tolerances`` entry. Sizes per tier are in ``SIZES``; the quick tier of every check here together runs in about
19 s on one core (about 5 s of it importing SymPy and torch).
"""
from __future__ import annotations

import math

import numpy as np

from bma_verify.numerics.bma import bma_predictive, parent_posterior
from bma_verify.numerics.dag import (dag_bma_predictive, dag_candidate_sets, dag_parent_posterior, random_dag_kernels,
                          sample_dag_task)
from bma_verify.numerics.dag_enumeration import brute_force_dag_posterior, brute_force_dag_predictive
from bma_verify.numerics.dag_information import (INIT_KINDS, LEMMA3_SET_CANDIDATES, MI_FLOOR, RATIO_EDGES, TIE_ATOL,
                                      VIOLATION_RTOL, dag_instance_record, dag_lemma3_sets, dag_lemma3_sweep,
                                      dag_lemma4_monte_carlo, dag_lemma4_terms, dag_thm3_check_position,
                                      draw_dag_instance, kernel_constants, overlap_ratio_one_instance)
from bma_verify.numerics.task import random_kernel, random_parents, sample_task
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, Table, new_figure, save_figure

SIZES = {
    "quick": {"posterior_contexts": 10, "tree_contexts": 4, "lemma4_instances": 30, "lemma3_instances": 300,
              "thm3_instances": 120, "mc_instances": 3, "mc_samples": 20_000, "symbolic_points": 6},
    "full": {"posterior_contexts": 60, "tree_contexts": 20, "lemma4_instances": 300, "lemma3_instances": 5000,
             "thm3_instances": 2000, "mc_instances": 10, "mc_samples": 100_000, "symbolic_points": 24},
}
#: Largest |factorised − enumerated| posterior or predictive entry that reads as equal (float64 sums: ~1e-16).
POSTERIOR_ATOL = 1e-10
#: Largest |lhs − rhs| of an exact identity that reads as equal.
IDENTITY_ATOL = 1e-10
#: A Monte Carlo estimate agrees with its exact value when within Z_AGREE standard errors (as reports.checks.numeric).
Z_AGREE = 4.0
#: How far a ratio may sit from 1 and still read as "equal to 1" (rounding of sums of at most d**H terms).
RATIO_ONE_ATOL = 1e-12

#: Disjoint-set counterexamples to candidate α's, found by ``dag_lemma3_sweep`` and re-checked on every report
#: (a stored instance is only evidence when it still violates its candidate when recomputed here).
#: dobrushin: seed 1, instance 1714 (the helper's sweep; tests/test_dag_theory.py pins its ratio 0.5771).
STORED_LEMMA3 = [
    {"candidate": "dobrushin", "h": 4, "S": [1, 3],
     "kernels": [[[0.10431541664695618, 0.8956845833530439], [0.8713413028218566, 0.12865869717814338]],
                 [[0.26193514433769394, 0.7380648556623061], [0.3313385591516658, 0.6686614408483342],
                  [0.08543209186785429, 0.9145679081321457], [0.08518222609429645, 0.9148177739057035]]],
     "parent_sets": [[-1, -1], [0, -1], [0, 1], [0, 2], [0, 2]], "init": None},
    # excess_doeblin on overlapping sets: seed 1, instance 3138 of dag_lemma3_sweep(1, 6000) (10 violations in
    # 84 996 overlapping sets; excess ratio 0.8230 against 1 − dε = 0.8160)
    {"candidate": "excess_doeblin", "h": 3, "S": [1, 2],
     "kernels": [[[0.9072265902335035, 0.09277340976649645], [0.09200140375755667, 0.9079985962424434]],
                 [[0.09198959227726336, 0.9080104077227367], [0.9080106061014608, 0.09198939389853919],
                  [0.342822855738772, 0.657177144261228], [0.09200936148475529, 0.9079906385152448]]],
     "parent_sets": [[-1, -1], [0, -1], [0, 1], [0, 2]], "init": [0.8784944747724549, 0.1215055252275451]},
]
#: The smallest Theorem 3 counterexamples (``dag_thm3_sweep(0, 2000)``; tests/test_dag_theory.py), re-checked on
#: every report: H = 4, d = 2, k = 2, h = 3, in both forms.
STORED_THM3 = {
    "stationary": {
        "kernels": [[[0.691893762339265, 0.308106237660735], [0.060023634278510006, 0.9399763657214899]],
                    [[0.20715521594305622, 0.7928447840569438], [0.7094179112641996, 0.2905820887358004],
                     [0.11452161281283214, 0.8854783871871679], [0.48787560283647874, 0.5121243971635213]]],
        "parent_sets": [[-1, -1], [0, -1], [0, 1], [0, 2]], "init": None, "h": 3},
    "non-stationary": {
        "kernels": [[[0.7070090088399997, 0.29299099116000027], [0.4819066466822254, 0.5180933533177746]],
                    [[0.2603404288098537, 0.7396595711901462], [0.9518620483420717, 0.048137951657928446],
                     [0.4794210941266499, 0.5205789058733501], [0.9289284366222512, 0.07107156337774881]]],
        "parent_sets": [[-1, -1], [0, -1], [0, 1], [1, 2]], "init": [0.8823478468839421, 0.11765215311605803],
        "h": 3},
}
#: Lemma 4's Monte Carlo close call: k = 2, d = 2, H = 4 with S_2 = S_3 = {0, 1}, h = 3 and S = {0, 2} sharing the
#: first parent. π_2 = (1 − t)·f(c | a) + t·R(c | a, b) (f ignores the second parent, where Δ = 0). Δ ∝ t² and its
#: standard error ∝ t/√n, so t = 0.15·√(20 000/n) keeps Δ near 5 standard errors above 0 in every tier (t = 0.2
#: gave 7.1 at seed 0).
LEMMA4_CLOSE_CALL = {"seed": 2026, "t_at_20000": 0.15, "eps": 0.05}


def _size(ctx: CheckContext, key: str) -> int:
    return SIZES[ctx.tier][key]




def _save(fig, ctx: CheckContext, filename: str) -> str:
    save_figure(fig, ctx.figure_path(filename))  # PNG at FIGURE_DPI and an SVG copy
    return filename


def _combine(verdicts) -> str:
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    return "pass" if verdicts and all(v == "pass" for v in verdicts) else "inconclusive"


def _tuples(kernels) -> tuple:
    return tuple(np.asarray(t, dtype=np.float64) for t in kernels)


def _init(value):
    return None if value is None else np.asarray(value, dtype=np.float64)


# ----------------------------------------------------------------------------------------------------------
# ext-dag-posterior


def transposed_parent_order(kernels) -> tuple:
    """The planted wrong kernel family: π_k with its first two parents swapped, π'(c | a, b, …) = π(c | b, a, …).

    Used by the control of ``ext-dag-posterior``: reading the parents in the wrong order is the natural bug of a
    set posterior (the encoding is first-parent-most-significant)."""
    kernels = _tuples(kernels)
    k, d = len(kernels), kernels[0].shape[1]
    if k < 2:
        raise ValueError("transposed_parent_order needs k >= 2 (two parents to swap)")
    top = kernels[-1].reshape((d,) * k + (d,))
    axes = list(range(k + 1))
    axes[0], axes[1] = 1, 0
    return kernels[:-1] + (np.ascontiguousarray(top.transpose(axes)).reshape(d**k, d),)


def _decide_posterior(max_error: float, k1_mismatches: int) -> str:
    """pass iff every factorised entry equals its enumerated value to POSTERIOR_ATOL and k = 1 is bit for bit."""
    return "pass" if max_error <= POSTERIOR_ATOL and k1_mismatches == 0 else "fail"


def dag_posterior_cases(rng: np.random.Generator, n_contexts: int) -> list[dict]:
    """Random DAG instances (d ∈ {2, 3}, k ∈ {2, 3}, H ∈ k+2..6, L ∈ 1..4) with their fast and brute-force
    posterior and predictive, and the posterior under the transposed parent order (the planted control)."""
    cases = []
    for i in range(n_contexts):
        d = int(rng.integers(2, 4))
        k = int(rng.integers(2, 4))
        H = int(rng.integers(k + 2, 7)) if d == 2 else k + 2
        L = int(rng.integers(1, 5))
        kernels = random_dag_kernels(d, k, alpha=0.7, eps=0.02, rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        batch = sample_dag_task(kernels, 1, L, H, rng=rng, init=init)
        context, query = batch.context[0], batch.query[0]
        brute = brute_force_dag_posterior(kernels, context, init)
        fast = dag_parent_posterior(kernels, context)
        planted = dag_parent_posterior(transposed_parent_order(kernels), context)
        brute_pred = brute_force_dag_predictive(kernels, context, query, init)
        fast_pred = dag_bma_predictive(kernels, context, query, init)
        cases.append({"d": d, "k": k, "H": H, "L": L, "init": "stationary" if init is None else "non-stationary",
                      "posterior_error": float(np.abs(fast - brute).max()),
                      "predictive_error": float(np.abs(fast_pred - brute_pred).max()),
                      "planted_error": float(np.abs(planted - brute).max())})
    return cases


def tree_bit_for_bit(rng: np.random.Generator, n_contexts: int) -> dict:
    """k = 1: ``dag_parent_posterior`` / ``dag_bma_predictive`` against ``parent_posterior`` / ``bma_predictive``
    with ``array_equal`` on random trees; returns the number of differing arrays and the largest difference."""
    mismatches, largest = 0, 0.0
    for i in range(n_contexts):
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, alpha=0.6, eps=0.01, rng=rng)
        init = None if i % 2 == 0 else rng.dirichlet(np.ones(d))
        batch = sample_task(kernel, 3, int(rng.integers(1, 8)), int(rng.integers(2, 9)), rng=rng, init=init)
        pairs = [(dag_parent_posterior((kernel,), batch.context), parent_posterior(kernel, batch.context)),
                 (dag_bma_predictive((kernel,), batch.context, batch.query, init),
                  bma_predictive(kernel, batch.context, batch.query, init))]
        for a, b in pairs:
            mismatches += int(not np.array_equal(a, b))
            largest = max(largest, float(np.abs(a - b).max()))
    return {"arrays_compared": 2 * n_contexts, "mismatches": mismatches, "max_abs_difference": largest}


def ext_dag_posterior(ctx: CheckContext) -> CheckOutcome:
    """Set posterior and BMA predictive by Bayes over every DAG (full likelihood) vs the factorised functions;
    k = 1 vs the tree functions bit for bit.

    Control: the posterior with π_k's first two parents transposed, judged against the same enumeration.
    """
    rng = ctx.rng("ext-dag-posterior")
    cases = dag_posterior_cases(rng, _size(ctx, "posterior_contexts"))
    tree = tree_bit_for_bit(rng, _size(ctx, "tree_contexts"))
    error = max(max(c["posterior_error"], c["predictive_error"]) for c in cases)
    verdict = _decide_posterior(error, tree["mismatches"])
    planted = max(c["planted_error"] for c in cases)
    caught = sum(_decide_posterior(c["planted_error"], 0) == "fail" for c in cases)
    # the same rule (largest error over the instances) on the planted posterior; k = 1 is not planted (0 mismatches)
    control = Control("the posterior with π_k's first two parents transposed (π(c | b, a) for π(c | a, b)), "
                      "against the same enumeration over every DAG",
                      {"max_planted_error": planted, "instances_caught": caught, "instances": len(cases)},
                      rejected=_decide_posterior(planted, 0) != "pass")
    rows = [[c["d"], c["k"], c["H"], c["L"], c["init"], f"{c['posterior_error']:.1e}", f"{c['predictive_error']:.1e}",
             f"{c['planted_error']:.3f}"] for c in cases]
    return CheckOutcome(
        verdict=verdict,
        measured={"instances": len(cases), "max_error": error, "k1": tree,
                  "sizes": [[c["d"], c["k"], c["H"], c["L"]] for c in cases]},
        threshold={"max_error": POSTERIOR_ATOL, "k1_mismatches": 0},
        summary=f"On {len(cases)} random DAG contexts (d ≤ 3, k ∈ {{2, 3}}, H ≤ 6), the factorised set posterior and "
                f"BMA predictive equal Bayes over every DAG with the full likelihood to {error:.1e}; k = 1 equals "
                f"the tree functions bit for bit on {tree['arrays_compared']} arrays ({tree['mismatches']} differ); "
                f"the transposed-parent posterior is off by up to {planted:.3f} ({caught} of {len(cases)} contexts caught; "
                f"a context whose parent values coincide cannot show the order) (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}).",
        tables=[Table("posterior vs enumeration", ["d", "k", "H", "L", "μ₀", "posterior error", "predictive error",
                                                   "transposed-order error (control)"], rows)],
        control=control,
        # max_error is float64 rounding (measured 1e-16 order, seed 0; spread 0 over OMP_NUM_THREADS=1|2, NumPy
        # only): abs 1e-13 is above rounding and far below the 1e-10 threshold
        tolerances={"max_error": {"abs": 1e-13}, "k1.max_abs_difference": {"abs": 0.0}})


# ----------------------------------------------------------------------------------------------------------
# ext-dag-lemma4-sets


def _symbolic_decide(derivations, verification) -> tuple[str, dict]:
    from bma_verify.reports.checks.symbolic import _decide

    return _decide(derivations, verification)


def ext_dag_lemma4_sets_symbolic(ctx: CheckContext) -> CheckOutcome:
    """Lemma 4 for sets derived for a symbolic joint r of (x_T, x_S) and a symbolic π_2 (d = 2, k = 2):
    Δ − [ΔI + E KL] = 0 and Δ − Σ r KL(π(·|a) ‖ π(·|b)) = 0; Δ ≡ 0 for an overlapping S when π ignores the
    non-shared parent, and ≠ 0 (witness) for disjoint sets under the same π. Each term compared with
    ``numerics.dag_lemma4_terms`` on exact DAG joints.

    Control: the decomposition without its E KL term, through the same residuals and numeric comparison.
    """
    from bma_verify.theory.dag import derive_dag_lemma4, dropped_kl_term, perturb_dag_lemma4, verify_dag_lemma4

    n = _size(ctx, "symbolic_points")
    derivation = derive_dag_lemma4(2, 2)
    verification = verify_dag_lemma4(ctx.rng("ext-dag-lemma4-sets/symbolic"), n_points=n)
    verdict, status = _symbolic_decide([derivation], verification)
    c_derivation = perturb_dag_lemma4(2, 2, dropped_kl_term)
    c_verification = verify_dag_lemma4(ctx.rng("ext-dag-lemma4-sets/symbolic"), n_points=n,
                                       perturbation=dropped_kl_term)
    c_verdict, c_status = _symbolic_decide([c_derivation], c_verification)
    control = Control("the Lemma 4 decomposition without its E KL term, through the same residuals and numeric "
                      "comparison",
                      {"identities_failed": [k for k, ok in c_status.items() if not ok],
                       "errors_over_tolerance": c_verification.errors_over_tolerance,
                       "max_abs_error": c_verification.max_abs_error},
                      rejected=c_verdict != "pass")
    rows = [[name, "yes" if ok else "NO"] for name, ok in status.items()]
    numeric_rows = [[name, f"{err:.3g}", f"≤ {verification.tolerance:g}"] for name, err in verification.errors.items()]
    numeric_rows += [[f"slack {name}", f"{s:.3g}", "≥ 0"] for name, s in verification.slacks.items()]
    return CheckOutcome(
        verdict=verdict,
        measured={"identities_hold": all(status.values()), "identities": status, **verification.measured()},
        threshold={"residuals": "exactly 0", "witnesses": "not 0", "max_abs_error": verification.tolerance},
        summary=f"For a symbolic joint of (x_T, x_S) and a symbolic π_2 (d = 2, k = 2), Δ − [ΔI + E KL] and "
                f"Δ − Σ_ab r(a,b) KL(π(·|a)‖π(·|b)) expand to 0, Δ ≡ 0 for an overlapping S when π ignores the "
                f"non-shared parent ({sum(status.values())}/{len(status)} identities hold); max |derived − "
                f"numerics| = {verification.max_abs_error:.2g} over {verification.n_points} random DAG points; "
                f"without the E KL term {len(control.measured['identities_failed'])} identities and "
                f"{len(c_verification.errors_over_tolerance)} comparisons fail (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}).",
        derivation=derivation.latex_steps(),
        tables=[Table("Symbolic identities", ["identity", "holds"], rows),
                Table("Numeric verification", ["quantity", "measured", "required"], numeric_rows)],
        control=control,
        # errors are float64 rounding (≤ 1e-15 at seed 0; NumPy/SymPy only, bit-identical across threads):
        # compared at abs 1e-10, as the tree's symbolic checks
        tolerances={"max_abs_error": {"abs": 1e-10}, "errors": {"abs": 1e-10}, "min_slacks": {"abs": 1e-9}})


def _decide_lemma4(identity_error: float, nonpositive_gaps: int) -> str:
    """pass iff both forms of the identity hold to IDENTITY_ATOL on every (h, S) and every random gap is > 0."""
    return "pass" if identity_error <= IDENTITY_ATOL and nonpositive_gaps == 0 else "fail"


def lemma4_sets_sweep(rng: np.random.Generator, n_instances: int) -> dict:
    """Both sides of Lemma 4 for sets on every (h, S ≠ S_h) of random DAG instances, both μ₀ kinds.

    Returns the largest |lhs − rhs| and |lhs − Σ r KL|, the largest |lhs − (I_T − I_S)| (the identity without its
    E KL term: the control), the smallest gap and its instance, and the counts (by disjoint / overlapping)."""
    out = {"pairs": 0, "disjoint": 0, "overlapping": 0, "identity_error": 0.0, "pair_kl_error": 0.0,
           "error_without_kl": 0.0, "min_gap": np.inf, "min_gap_instance": None, "nonpositive": 0}
    for index in range(n_instances):
        instance = draw_dag_instance(rng)
        kernels, parent_sets, k, H = instance["kernels"], instance["parent_sets"], instance["k"], instance["H"]
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(k + 1, H):
                T = tuple(int(s) for s in parent_sets[h])
                for S in dag_candidate_sets(H, k)[:math.comb(h, k)].tolist():
                    if tuple(S) == T:
                        continue
                    terms = dag_lemma4_terms(kernels, parent_sets, h, tuple(S), init)
                    out["pairs"] += 1
                    out["overlapping" if terms["overlap"] else "disjoint"] += 1
                    out["identity_error"] = max(out["identity_error"], abs(terms["lhs"] - terms["rhs"]))
                    out["pair_kl_error"] = max(out["pair_kl_error"], abs(terms["lhs"] - terms["kl_true_vs_candidate"]))
                    out["error_without_kl"] = max(out["error_without_kl"],
                                                  abs(terms["lhs"] - (terms["mi_true"] - terms["mi_candidate"])))
                    if terms["lhs"] <= 0:
                        out["nonpositive"] += 1
                    if terms["lhs"] < out["min_gap"]:
                        out["min_gap"] = float(terms["lhs"])
                        out["min_gap_instance"] = dag_instance_record(kernels, parent_sets, init, h=h, S=list(S),
                                                                      T=list(T), gap=float(terms["lhs"]),
                                                                      instance_index=index)
    return out


def ext_dag_lemma4_sets_exact(ctx: CheckContext) -> CheckOutcome:
    """Lemma 4 for sets from exact joints on every (h, S) of random DAGs (both μ₀): Δ = ΔI + E KL = Σ r KL, Δ > 0
    on random kernels; on the planted instance where π ignores the non-shared parent, Δ = 0 (the strictness
    condition: Δ > 0 iff some positive-probability pair of parent values has different rows of π).

    Control: the identity without its E KL term (Δ = I_T − I_S), against the same left side.
    """
    sweep = lemma4_sets_sweep(ctx.rng("ext-dag-lemma4-sets/exact"), _size(ctx, "lemma4_instances"))
    error = max(sweep["identity_error"], sweep["pair_kl_error"])
    verdict = _decide_lemma4(error, sweep["nonpositive"])
    planted = sweep["error_without_kl"]
    control = Control("the identity without its E KL term (Δ = I(x_h; x_T) − I(x_h; x_S)), against the same left "
                      "side", {"max_identity_error": planted},
                      rejected=_decide_lemma4(planted, sweep["nonpositive"]) != "pass")
    flat = overlap_ratio_one_instance(2, 0.05, rng=np.random.default_rng(LEMMA4_CLOSE_CALL["seed"]))
    flat_terms = dag_lemma4_terms(flat["kernels"], flat["parent_sets"], flat["h"], flat["S"])
    findings = [
        Finding("Δ = E log π(x_h|x_T) − E log π(x_h|x_S) = Σ_ab P(x_T = a, x_S = b) KL(π(·|a) ‖ π(·|b)) "
                "(hence Δ > 0 iff some positive-probability pair (a, b) has π(·|a) ≠ π(·|b))",
                "holds" if sweep["pair_kl_error"] <= IDENTITY_ATOL else "refuted",
                evidence=f"on {sweep['pairs']} (h, S) pairs, max error {sweep['pair_kl_error']:.1e}"),
        Finding("Δ > 0 for every other k-set S whenever π ≥ ε > 0 (strictness without a condition on π)",
                "refuted" if abs(flat_terms["lhs"]) <= IDENTITY_ATOL else "open",
                {"kernels": [t.tolist() for t in flat["kernels"]], "parent_sets": flat["parent_sets"].tolist(),
                 "init": None, "h": flat["h"], "S": list(flat["S"]), "T": list(flat["T"]),
                 "gap": flat_terms["lhs"]},
                "π_2(c | a, b) = f(c | a) ignores the non-shared parent; S = {0, 2} shares T = {0, 1}'s first "
                f"parent: Δ = {flat_terms['lhs']:.1e} with min π = {min(t.min() for t in flat['kernels']):.3f}"),
    ]
    return CheckOutcome(
        verdict=verdict,
        measured={"pairs": sweep["pairs"], "disjoint": sweep["disjoint"], "overlapping": sweep["overlapping"],
                  "max_identity_error": error, "min_gap": sweep["min_gap"], "nonpositive_gaps": sweep["nonpositive"],
                  "planted_flat_gap": flat_terms["lhs"], "min_gap_instance": sweep["min_gap_instance"]},
        threshold={"max_identity_error": IDENTITY_ATOL, "gap": "> 0 on random kernels"},
        summary=f"On {sweep['pairs']} (h, S) pairs of random DAGs ({sweep['disjoint']} disjoint, "
                f"{sweep['overlapping']} overlapping; both μ₀): Δ = [I_T − I_S] + E KL(q‖π) = Σ r KL to {error:.1e}; "
                f"smallest gap {sweep['min_gap']:.2e} ({sweep['nonpositive']} non-positive); on the planted kernel "
                f"that ignores the non-shared parent Δ = {flat_terms['lhs']:.1e} (not strict there); without the "
                f"E KL term the identity is off by {planted:.3f} (control, rejected).",
        findings=findings, control=control, instance=sweep["min_gap_instance"] if verdict == "fail" else None,
        # identity errors are float64 rounding (~1e-16, seed 0; NumPy only, spread 0 over threads): abs 1e-13;
        # min_gap is a difference of exact sums (rel 1e-6); the planted flat gap is rounding around 0 (abs 1e-13)
        tolerances={"max_identity_error": {"abs": 1e-13}, "min_gap": {"rel": 1e-6},
                    "planted_flat_gap": {"abs": 1e-13}})


def lemma4_close_call(n: int) -> dict:
    """The close-call instance of :data:`LEMMA4_CLOSE_CALL` at sample size n: kernels, DAG, h, S."""
    cc = LEMMA4_CLOSE_CALL
    rng = np.random.default_rng(cc["seed"])
    base = overlap_ratio_one_instance(2, cc["eps"], rng=rng)
    t = cc["t_at_20000"] * math.sqrt(20_000 / n)
    other = random_dag_kernels(2, 2, alpha=1.0, eps=cc["eps"], rng=rng)[-1]
    order1, flat = base["kernels"]
    return {"kernels": (order1, (1.0 - t) * flat + t * other), "parent_sets": base["parent_sets"], "h": base["h"],
            "S": base["S"], "t": t}


def _interval_verdict(z: float, low: float, high: float) -> str:
    """The Monte Carlo rule: |z| ≤ Z_AGREE (else inconclusive), then the 95% interval above 0."""
    if abs(z) > Z_AGREE:
        return "inconclusive"
    return "pass" if low > 0 else ("fail" if high < 0 else "inconclusive")


def ext_dag_lemma4_sets_monte_carlo(ctx: CheckContext) -> CheckOutcome:
    """Sample means of log π(x_h|x_T) − log π(x_h|x_S), judged against the exact Δ by z and against 0 by their
    interval, on random DAG instances (one disjoint and one overlapping S each) and a close call (Δ ≈ 5 s.e.).

    Control: the exact value replaced by I_T − I_S (the identity without E KL), judged by the same rule.
    """
    rng = ctx.rng("ext-dag-lemma4-sets/monte-carlo")
    n = _size(ctx, "mc_samples")
    cases = []

    def run(label, kernels, parent_sets, h, S, init):
        out = dag_lemma4_monte_carlo(kernels, parent_sets, h, S, n, rng=rng, init=init)
        est, exact = out["estimate"], out["exact"]
        planted = exact["mi_true"] - exact["mi_candidate"]
        z, z_planted = (est.value - exact["lhs"]) / est.stderr, (est.value - planted) / est.stderr
        cases.append({"case": label, "h": h, "S": list(S), "overlap": exact["overlap"], "exact": exact["lhs"],
                      "estimate": float(est.value), "stderr": float(est.stderr), "z": float(z),
                      "z_planted": float(z_planted), "gap_in_stderr": float(exact["lhs"] / est.stderr),
                      "verdict": _interval_verdict(z, est.low, est.high),
                      "control_verdict": _interval_verdict(z_planted, est.low, est.high)})

    for i in range(_size(ctx, "mc_instances")):
        instance = draw_dag_instance(rng)
        k, H, parent_sets = instance["k"], instance["H"], instance["parent_sets"]
        h = H - 1
        T = tuple(int(s) for s in parent_sets[h])
        sets = [tuple(S) for S in dag_candidate_sets(H, k)[:math.comb(h, k)].tolist() if tuple(S) != T]
        init = None if i % 2 == 0 else instance["init"]
        for relation, chosen in (("disjoint", [S for S in sets if not set(S) & set(T)]),
                                 ("overlapping", [S for S in sets if set(S) & set(T)])):
            if chosen:
                run(f"random {i} ({relation})", instance["kernels"], parent_sets, h, chosen[0], init)
    cc = lemma4_close_call(n)
    run("close call", cc["kernels"], cc["parent_sets"], cc["h"], cc["S"], None)
    verdict = _combine(c["verdict"] for c in cases)
    control_verdict = _combine(c["control_verdict"] for c in cases)
    max_z = max(abs(c["z"]) for c in cases)
    close = cases[-1]
    control = Control("the exact Δ replaced by I(x_h; x_T) − I(x_h; x_S) (the identity without E KL), judged by the "
                      "same rule", {"max_abs_z": max(abs(c["z_planted"]) for c in cases), "verdict": control_verdict},
                      rejected=control_verdict != "pass")
    rows = [[c["case"], c["h"], str(c["S"]), c["overlap"], f"{c['exact']:.5f}", f"{c['estimate']:.5f}",
             f"{c['stderr']:.5f}", f"{c['z']:.2f}", f"{c['z_planted']:.1f}", c["verdict"]] for c in cases]
    return CheckOutcome(
        verdict=verdict,
        measured={"samples": n, "max_abs_z": max_z, "instance_verdicts": [c["verdict"] for c in cases],
                  "close_call": {"t": cc["t"], "exact_gap": close["exact"], "gap_in_stderr": close["gap_in_stderr"]},
                  "control_max_abs_z": control.measured["max_abs_z"]},
        threshold=f"every estimate within {Z_AGREE:g} standard errors of the exact Δ; 95% interval above 0",
        summary=f"{len(cases)} (h, S) pairs × {n} sequences (random DAGs, disjoint and overlapping S, and a close call "
                f"{close['gap_in_stderr']:.1f} standard errors above 0): estimates within {max_z:.1f} standard errors "
                f"of the exact Δ; Δ > 0: {', '.join(c['verdict'] for c in cases)}; against I_T − I_S they are up to "
                f"{control.measured['max_abs_z']:.0f} standard errors off (control, {control_verdict}).",
        tables=[Table("Δ estimates", ["case", "h", "S", "|S ∩ T|", "exact", "estimate", "stderr", "z",
                                      "z vs no-KL", "verdict"], rows)],
        control=control, reason="an interval straddles 0 or an estimate disagrees" if verdict == "inconclusive" else "",
        # Monte Carlo values from a generator seeded by the report seed: bit-identical across OMP_NUM_THREADS=1|2
        # (NumPy only) at one seed, so compared at the default abs 1e-9; seed-to-seed they move by O(1) in z
        tolerances={})


# ----------------------------------------------------------------------------------------------------------
# ext-dag-lemma3-sets


def violates(value: float, alpha: float, mi_true: float) -> bool:
    """The sweep's violation rule: value > α beyond rounding (VIOLATION_RTOL + 1e-14/I_T, relative to max(1, |α|))."""
    tolerance = VIOLATION_RTOL + 1e-14 / mi_true
    return bool(value - alpha > tolerance * max(1.0, abs(alpha)))


def _decide_lemma3(dpi_violations: int, disjoint_ratios, planted_ratio: float) -> str:
    """pass iff no ratio exceeds 1 (DPI), every disjoint ratio is < 1 (a strict α exists per instance), and the
    planted overlapping instance has ratio 1 (so no α < 1 holds for overlapping sets)."""
    strict = not any(violates(r, 1.0 - 1e-6, 1.0) for r in disjoint_ratios)
    return "pass" if dpi_violations == 0 and strict and abs(planted_ratio - 1.0) <= RATIO_ONE_ATOL else "fail"


def planted_overlap_ratio(eps: float = 0.05) -> dict:
    """The planted overlap instance (``overlap_ratio_one_instance``, π ≥ ε): its ratio I(x_3; x_{0,2})/I(x_3; x_{0,1})."""
    inst = overlap_ratio_one_instance(2, eps)
    out = dag_lemma3_sets(inst["kernels"], inst["parent_sets"])
    p = next(i for i in range(out["h"].size) if out["h"][i] == inst["h"] and out["S"][i] == tuple(inst["S"]))
    return {"ratio": float(out["ratio"][p]), "mi_true": float(out["mi_true"][p]), "eps": eps,
            "min_pi": float(min(t.min() for t in inst["kernels"])),
            "record": dag_instance_record(inst["kernels"], inst["parent_sets"], None, h=inst["h"], S=list(inst["S"]),
                                          T=list(inst["T"]), ratio=float(out["ratio"][p]))}


def lemma3_control_ratio() -> dict:
    """The control's planted input: a second overlap instance (π_2(c|a,b) = f(c|a), min π = 0.1), ratio 1."""
    return planted_overlap_ratio(eps=0.1)


def recheck_stored_lemma3(stored=STORED_LEMMA3) -> list[dict]:
    """Recompute each stored counterexample's ratio and its candidate α; keep whether it still violates."""
    out = []
    for record in stored:
        kernels = _tuples(record["kernels"])
        res = dag_lemma3_sets(kernels, np.asarray(record["parent_sets"]), _init(record["init"]))
        p = next(i for i in range(res["h"].size) if res["h"][i] == record["h"] and res["S"][i] == tuple(record["S"]))
        bound, alpha_name = LEMMA3_SET_CANDIDATES[record["candidate"]]
        value = float(res["ratio"][p] if bound == "ratio" else res["excess"][p])
        alpha = float(kernel_constants(kernels)["alphas"][alpha_name])
        out.append({**record, "value": value, "alpha": alpha, "overlap": int(res["overlap"][p]),
                    "violates": violates(value, alpha, float(res["mi_true"][p]))})
    return out


_CANDIDATE_TEXT = {
    "doeblin": "I(x_h; x_S) ≤ (1 − d·ε)·I(x_h; x_T) (the tree's Doeblin α)",
    "doeblin_dk": "I(x_h; x_S) ≤ (1 − d^k·ε)·I(x_h; x_T)",
    "doeblin_product": "I(x_h; x_S) ≤ (1 − (d·ε)^k)·I(x_h; x_T)",
    "dobrushin": "I(x_h; x_S) ≤ δ(π_k)·I(x_h; x_T) (Dobrushin coefficient of the top kernel)",
    "excess_doeblin": "I(x_h; x_S) − I_∩ ≤ (1 − d·ε)(I(x_h; x_T) − I_∩), I_∩ = I(x_h; x_{S∩T})",
    "excess_doeblin_product": "I(x_h; x_S) − I_∩ ≤ (1 − (d·ε)^k)(I(x_h; x_T) − I_∩)",
    "excess_dobrushin": "I(x_h; x_S) − I_∩ ≤ δ(π_k)(I(x_h; x_T) − I_∩)",
}


def ext_dag_lemma3_sets(ctx: CheckContext) -> CheckOutcome:
    """Exact I(x_h; x_S)/I(x_h; x_T) on every (h, S ≠ T) of random DAGs (both μ₀), split into disjoint and
    overlapping S; the candidate α's as findings (stored disjoint counterexamples re-checked); a figure of the two
    ratio distributions.

    Control: the planted overlap instance (π ≥ ε, ratio 1) fed to the same "disjoint ratios < 1" rule.
    """
    sweep = dag_lemma3_sweep(ctx.seed_for("ext-dag-lemma3-sets"), _size(ctx, "lemma3_instances"), keep_ratios=True)
    counts = sweep["counts"]
    planted = planted_overlap_ratio()
    disjoint = sweep["ratios"]["disjoint"]
    verdict = _decide_lemma3(counts.get("dpi_violations", 0), disjoint, planted["ratio"])
    planted_control = lemma3_control_ratio()
    control_verdict = _decide_lemma3(counts.get("dpi_violations", 0), disjoint + [planted_control["ratio"]],
                                     planted["ratio"])
    control = Control("a planted overlapping instance (π_2(c|a,b) = f(c|a), min π = 0.1, ratio 1) entered among the "
                      "disjoint ratios, judged by the same 'ratio < 1' rule",
                      {"planted_ratio": planted_control["ratio"], "flagged_against_alpha_1_minus_1e-6":
                       violates(planted_control["ratio"], 1.0 - 1e-6, planted_control["mi_true"]),
                       "verdict": control_verdict},
                      rejected=control_verdict != "pass")
    stored = recheck_stored_lemma3()
    findings = []
    rows = []
    for name, candidate in sweep["candidates"].items():
        for relation in ("disjoint", "overlapping"):
            entry = candidate[relation]
            refuting = entry["smallest_instance"]
            stored_hits = [s for s in stored if s["candidate"] == name and s["violates"]
                           and (s["overlap"] > 0) == (relation == "overlapping")]
            if refuting is None and stored_hits:
                refuting = stored_hits[0]
            statement = f"{_CANDIDATE_TEXT[name]}, for {relation} S"
            if refuting is not None:
                findings.append(Finding(statement, "refuted", refuting,
                                        f"violated on {entry['violations']} of {entry['checked']} sweep sets"
                                        + (" and by a stored counterexample (re-checked)" if stored_hits else "")))
            else:
                findings.append(Finding(statement, "holds", None, f"on {entry['checked']} {relation} sets of "
                                        f"{_size(ctx, 'lemma3_instances')} random DAGs (both μ₀)"))
            excess = entry["largest_excess"]["value"]
            rows.append([name, relation, entry["checked"], entry["violations"],
                         f"{excess:.4f}" if np.isfinite(excess) else "–", findings[-1].status])
    largest = {rel: sweep["largest_ratio"][rel]["value"] for rel in ("disjoint", "overlapping")}
    fig, axes = new_figure(1, 2, figsize=(9, 3.4), sharey=False)
    centres = 0.5 * (RATIO_EDGES[:-1] + RATIO_EDGES[1:])
    for ax, relation in zip(axes, ("disjoint", "overlapping")):
        ax.bar(centres, sweep["histograms"][relation], width=RATIO_EDGES[1] - RATIO_EDGES[0], color="0.4")
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlim(0, 1)
        ax.set_xlabel("I(x_h; x_S) / I(x_h; x_T)")
        ax.set_ylabel("number of (h, S) pairs")
        ax.set_title(f"{relation} S (max {largest[relation]:.3f})")
    axes[1].axvline(1.0, color="C3", lw=1)
    fig.tight_layout()
    figure = _save(fig, ctx, "ext_dag_lemma3_ratios.png")
    findings.insert(0, Finding("some α < 1 bounds I(x_h; x_S)/I(x_h; x_T) for every other k-set S when π ≥ ε > 0",
                               "refuted" if abs(planted["ratio"] - 1.0) <= RATIO_ONE_ATOL else "open",
                               planted["record"], "the planted overlap instance reaches ratio 1 "
                               f"(|ratio − 1| = {abs(planted['ratio'] - 1):.1e}, min π = {planted['min_pi']})"))
    return CheckOutcome(
        verdict=verdict,
        measured={"sets": counts["sets"], "disjoint": counts["disjoint"], "overlapping": counts["overlapping"],
                  "degenerate": counts.get("degenerate", 0), "dpi_violations": counts.get("dpi_violations", 0),
                  "largest_ratio": largest, "ratio_quantiles": sweep["ratio_quantiles"],
                  "planted_overlap_ratio": planted["ratio"],
                  "violations": {name: {rel: c[rel]["violations"] for rel in ("disjoint", "overlapping")}
                                 for name, c in sweep["candidates"].items()},
                  "stored_rechecks": [{"candidate": s["candidate"], "value": s["value"], "alpha": s["alpha"],
                                       "violates": s["violates"]} for s in stored]},
        threshold={"ratio": "≤ 1 for every S; < 1 for disjoint S", "planted_overlap_ratio": "= 1"},
        summary=f"On {counts['sets']} (h, S) pairs of {_size(ctx, 'lemma3_instances')} random DAGs "
                f"({counts['disjoint']} disjoint, {counts['overlapping']} overlapping; both μ₀): no ratio exceeds 1; "
                f"the largest disjoint ratio is {largest['disjoint']:.4f}, the largest overlapping "
                f"{largest['overlapping']:.4f}, and the planted overlapping instance (min π = 0.05) has ratio "
                f"{planted['ratio']:.12f}, so no α < 1 holds for overlapping sets; "
                f"{sum(f.status == 'refuted' for f in findings[1:])} of {len(findings) - 1} candidate bounds refuted; "
                f"the planted instance among the disjoint ratios is flagged (control, rejected).",
        tables=[Table("candidate α", ["candidate", "S vs T", "sets checked", "violations", "max (value − α)",
                                      "finding"], rows)],
        figures=[figure], findings=findings, control=control,
        # exact float64 ratios, spread 0 over OMP_NUM_THREADS=1|2 at seed 0 (NumPy only); rounding of a ratio of
        # sums ~1e-15: abs 1e-12
        tolerances={"largest_ratio": {"abs": 1e-12}, "ratio_quantiles": {"abs": 1e-12},
                    "planted_overlap_ratio": {"abs": 1e-12}, "stored_rechecks": {"abs": 1e-12}})


# ----------------------------------------------------------------------------------------------------------
# ext-dag-thm3-sets

FORMS = {"approximate": "J form (P(x_h) for π̄)", "exact": "exact π̄ form"}


def _margin(values: np.ndarray, index: int) -> float:
    """values[index] − the largest other entry."""
    return float(values[index] - np.delete(values, index).max())


def _decide_argmax(violations: int, identity_error: float) -> str:
    """pass iff the labelled set's entry is the largest at every position (ties allowed) and J(T) = I_χ²."""
    return "pass" if violations == 0 and identity_error <= IDENTITY_ATOL else "fail"


def thm3_sets_sweep(rng: np.random.Generator, n_instances: int) -> dict:
    """For every position h > k of random DAGs and both μ₀: margins of the true set in both forms, and of a
    uniformly drawn *other* set (the shuffled label of the control). Violations (margin < −tie) are counted per
    form and μ₀ with the smallest instance by (H, d, k, instance index, h)."""
    counts: dict[str, int] = {}
    smallest: dict[str, dict | None] = {}
    keys: dict[str, tuple] = {}
    identity_error = 0.0
    worst = {form: 0.0 for form in FORMS}

    def add(key):
        counts[key] = counts.get(key, 0) + 1

    for index in range(n_instances):
        instance = draw_dag_instance(rng)
        for kind in INIT_KINDS:
            init = None if kind == "stationary" else instance["init"]
            for h in range(instance["k"] + 1, instance["H"]):
                out = dag_thm3_check_position(instance["kernels"], instance["parent_sets"], h, init)
                add(f"{kind}/positions")
                identity_error = max(identity_error, out["chi2_identity_error"])
                C = out["exact"].size
                wrong = int(rng.integers(C - 1))
                wrong += wrong >= out["true_index"]
                for form in FORMS:
                    values = out[form]
                    tie = TIE_ATOL * max(1.0, float(np.abs(values).max()))
                    margin = _margin(values, out["true_index"])
                    worst[form] = min(worst[form], margin)
                    if margin < -tie:
                        add(f"{kind}/violations/{form}")
                        key = (instance["H"], instance["d"], instance["k"], index, h)
                        if f"{form}/{kind}" not in keys or key < keys[f"{form}/{kind}"]:
                            keys[f"{form}/{kind}"] = key
                            smallest[f"{form}/{kind}"] = dag_instance_record(
                                instance["kernels"], instance["parent_sets"], init, h=h, T=list(out["T"]),
                                argmax=list(out[f"argmax_{form}"]), margin=margin, form=form, init_kind=kind,
                                d=instance["d"], k=instance["k"], H=instance["H"])
                    if _margin(values, wrong) < -tie:
                        add(f"{kind}/shuffled_violations/{form}")
    return {"counts": dict(sorted(counts.items())), "smallest": smallest, "identity_error": identity_error,
            "worst_margin": worst}


def recheck_stored_thm3(stored=STORED_THM3) -> dict:
    """Each stored instance's margins in both forms, recomputed (negative: the true set is not the largest)."""
    out = {}
    for kind, record in stored.items():
        check = dag_thm3_check_position(_tuples(record["kernels"]), np.asarray(record["parent_sets"]), record["h"],
                                        _init(record["init"]))
        out[kind] = {"margin_exact": check["margin_exact"], "margin_approximate": check["margin_approximate"],
                     "T": list(check["T"]), "argmax_exact": list(check["argmax_exact"]),
                     "argmax_approximate": list(check["argmax_approximate"])}
    return out


def _thm3_cached(ctx: CheckContext) -> dict:
    key = ("ext_dag", "thm3_sets", ctx.tier, ctx.seed)
    if key not in ctx.cache:
        ctx.cache[key] = {"sweep": thm3_sets_sweep(ctx.rng("ext-dag-thm3-sets"), _size(ctx, "thm3_instances")),
                          "stored": recheck_stored_thm3()}
    return ctx.cache[key]


def _thm3_outcome(ctx: CheckContext, form: str) -> CheckOutcome:
    data = _thm3_cached(ctx)
    sweep, stored = data["sweep"], data["stored"]
    counts = sweep["counts"]
    positions = sum(counts.get(f"{kind}/positions", 0) for kind in INIT_KINDS)
    stored_violations = sum(stored[kind][f"margin_{form}"] < 0 for kind in INIT_KINDS)
    violations = sum(counts.get(f"{kind}/violations/{form}", 0) for kind in INIT_KINDS) + stored_violations
    shuffled = sum(counts.get(f"{kind}/shuffled_violations/{form}", 0) for kind in INIT_KINDS)
    verdict = _decide_argmax(violations, sweep["identity_error"])
    control = Control("the same argmax rule with the true-set label moved to a uniformly drawn other candidate set",
                      {"violations": shuffled, "positions": positions},
                      rejected=_decide_argmax(shuffled, sweep["identity_error"]) != "pass")
    findings, smallest_any = [], None
    quantity = "J(S_c) = E[π(x_h|x_{S_c})/P(x_h)] − 1" if form == "approximate" else \
        "E[−∂ℓ/∂p̂_c] at p̂ = 0 (exact, with π̄)"
    for kind in INIT_KINDS:
        record = sweep["smallest"].get(f"{form}/{kind}")
        if stored[kind][f"margin_{form}"] < 0 and (record is None or record["H"] > 4):
            record = {**STORED_THM3[kind], "T": stored[kind]["T"], "argmax": stored[kind][f"argmax_{form}"],
                      "margin": stored[kind][f"margin_{form}"], "form": form, "init_kind": kind, "d": 2, "k": 2,
                      "H": 4, "stored": True}
        n_viol = counts.get(f"{kind}/violations/{form}", 0)
        statement = f"the true parent set has the largest {quantity} among the C(h, k) candidates, {kind} μ₀"
        if record is not None:
            findings.append(Finding(statement, "refuted", record,
                                    f"violated at {n_viol} of {counts.get(f'{kind}/positions', 0)} sweep positions; "
                                    f"smallest instance H = {record['H']}, d = {record['d']}, k = {record['k']}"))
            smallest_any = smallest_any or record
        else:
            findings.append(Finding(statement, "holds", None,
                                    f"on {counts.get(f'{kind}/positions', 0)} positions"))
    if form == "approximate":
        findings.append(Finding("J(S_h) = I_χ²(x_{S_h}; x_h) exactly",
                                "holds" if sweep["identity_error"] <= IDENTITY_ATOL else "refuted",
                                evidence=f"max error {sweep['identity_error']:.1e} on {positions} positions"))
    margins_text = ", ".join(f"{stored[kind]['margin_' + form]:.2e}" for kind in INIT_KINDS)
    rows = [[kind, counts.get(f"{kind}/positions", 0), counts.get(f"{kind}/violations/{form}", 0),
             f"{stored[kind]['margin_' + form]:.2e}", counts.get(f"{kind}/shuffled_violations/{form}", 0)]
            for kind in INIT_KINDS]
    return CheckOutcome(
        verdict=verdict,
        measured={"positions": positions, "violations": violations, "stored_violations": stored_violations,
                  "worst_margin": sweep["worst_margin"][form], "identity_error": sweep["identity_error"],
                  "stored_margins": {kind: stored[kind][f"margin_{form}"] for kind in INIT_KINDS},
                  "shuffled_violations": shuffled},
        threshold="the true set's entry ≥ every other entry (ties within 1e-12 allowed)",
        summary=f"{FORMS[form]}: on {positions} positions of random DAGs (k ∈ {{2, 3}}, both μ₀) the true set's "
                f"entry is not the largest at {violations - stored_violations}, and the stored smallest "
                f"counterexamples (H = 4, d = 2, k = 2) re-check with margins "
                f"{margins_text} (stationary, "
                f"non-stationary); a shuffled label is flagged at {shuffled} positions (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}).",
        tables=[Table(f"Theorem 3 for sets, {FORMS[form]}", ["μ₀", "positions", "violations",
                                                           "stored instance margin", "shuffled-label violations"],
                      rows)],
        findings=findings, control=control, instance=smallest_any if verdict == "fail" else None,
        # exact float64 sums (spread 0 over OMP_NUM_THREADS=1|2 at seed 0, NumPy only); margins carry rounding
        # ~1e-16: abs 1e-13
        tolerances={"worst_margin": {"abs": 1e-13}, "identity_error": {"abs": 1e-13},
                    "stored_margins": {"abs": 1e-13}})


def ext_dag_thm3_sets_j(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3 for sets, J form: is J(S_h) the largest over the C(h, k) candidate sets (stationary and
    non-stationary μ₀)? Control: the shuffled true-set label."""
    return _thm3_outcome(ctx, "approximate")


def ext_dag_thm3_sets_pibar(ctx: CheckContext) -> CheckOutcome:
    """Theorem 3 for sets, exact π̄ form: is the exact expected init gradient largest at S_h? Control: the
    shuffled true-set label."""
    return _thm3_outcome(ctx, "exact")


# ----------------------------------------------------------------------------------------------------------
# ext-dag-construction

#: β values of the construction sweep; the rate is fitted only where the error lies in FIT_RANGE (well above
#: rounding, past the pre-asymptotic start).
CONSTRUCTION_BETAS = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0)
FIT_RANGE = (1e-11, 1e-2)
#: At the largest β the constructed attention must equal the set posterior to this (measured ≤ 2e-13 at β = 32).
CONSTRUCTION_ATOL = 1e-9
#: Smallest fitted decay rate of log(error) per unit β that reads as exponential (measured ≈ 1.0).
MIN_RATE = 0.5


def _decide_construction(final_error: float, rate: float) -> str:
    """pass iff the error at the largest β is ≤ CONSTRUCTION_ATOL and log(error) falls at least MIN_RATE per unit β."""
    return "pass" if final_error <= CONSTRUCTION_ATOL and rate >= MIN_RATE else "fail"


def _fit_rate(betas, errors) -> float:
    betas, errors = np.asarray(betas), np.asarray(errors)
    keep = (errors > FIT_RANGE[0]) & (errors < FIT_RANGE[1])
    if keep.sum() < 2:
        return 0.0
    return float(-np.polyfit(betas[keep], np.log(errors[keep]), 1)[0])


def ext_dag_construction_model(ctx: CheckContext) -> CheckOutcome:
    """The 2-simplicial construction (model.pair_attention, float64): tree copier + (k+1)-linear attention with
    T = log π_k. Its attention and prediction against the exact set posterior and BMA predictive as β grows, for
    k = 2 and 3 (and k = 1 against the tree construction); exponential decay fitted where the error is well above
    rounding.

    Control: the same model with a wrong T (π_k's first two parents transposed), judged by the same rule.
    """
    import torch

    from bma_verify.model.construction import bma_construction
    from bma_verify.model.pair_attention import construction_errors, pair_construction

    rng = ctx.rng("ext-dag-construction")
    cases, control_cases = [], []
    for k, d, H, L in ((2, 3, 6, 4), (3, 2, 6, 3), (2, 2, 5, 6)):
        kernels = random_dag_kernels(d, k, alpha=0.7, eps=0.02, rng=rng)
        batch = sample_dag_task(kernels, 4, L, H, rng=rng)
        errors = construction_errors(kernels, batch.context, batch.query, CONSTRUCTION_BETAS)
        wrong = construction_errors(kernels, batch.context, batch.query, CONSTRUCTION_BETAS,
                                    table=np.log(transposed_parent_order(kernels)[-1]))
        for store, e in ((cases, errors), (control_cases, wrong)):
            final = max(e["posterior_error"][-1], e["predictive_error"][-1])
            rate = _fit_rate(e["beta"], e["posterior_error"])
            store.append({"k": k, "d": d, "H": H, "L": L, "final_error": final, "rate": rate,
                          "posterior_error": e["posterior_error"], "verdict": _decide_construction(final, rate)})
    # k = 1: the pair model is the tree construction (same copier; T = log π as one block of W_KQ)
    kernel = random_kernel(3, alpha=0.7, eps=0.02, rng=rng)
    tree_batch = sample_task(kernel, 4, 4, 6, rng=rng)
    with torch.no_grad():
        a1, f1 = pair_construction((kernel,), 4, 8.0, max_H=6)(tree_batch.context, tree_batch.query)
        a0, f0 = bma_construction(kernel, 4, 8.0, max_H=6)(tree_batch.context, tree_batch.query)
    k1_difference = float(max((a1.exp() - a0.exp()).abs().max(), (f1 - f0)[:, 1:].abs().max()))
    verdict = _combine([c["verdict"] for c in cases] + ["pass" if k1_difference <= 1e-12 else "fail"])
    control_verdict = _combine(c["verdict"] for c in control_cases)
    control = Control("the construction with a wrong table T = log π_k with its first two parents transposed, "
                      "judged by the same rule", {"final_errors": [c["final_error"] for c in control_cases],
                                                  "rates": [c["rate"] for c in control_cases]},
                      rejected=control_verdict != "pass")
    fig, ax = new_figure(figsize=(6, 3.5))
    for c in cases:
        ax.semilogy(CONSTRUCTION_BETAS, np.maximum(c["posterior_error"], 1e-17), "o-",
                    label=f"k={c['k']}, d={c['d']}, H={c['H']}, L={c['L']}")
    for c in control_cases:
        ax.semilogy(CONSTRUCTION_BETAS, np.maximum(c["posterior_error"], 1e-17), "x:", color="0.5")
    ax.set_xlabel("copier scale β")
    ax.set_ylabel("max |A − set posterior|")
    ax.set_title("2-simplicial construction (dotted: wrong T, control)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figure = _save(fig, ctx, "ext_dag_construction_beta.png")
    rows = [[c["k"], c["d"], c["H"], c["L"], f"{c['final_error']:.1e}", f"{c['rate']:.3f}", c["verdict"],
             f"{w['final_error']:.3f}", w["verdict"]] for c, w in zip(cases, control_cases)]
    final = max(c["final_error"] for c in cases)
    rates = [c["rate"] for c in cases]
    return CheckOutcome(
        verdict=verdict,
        measured={"final_error": final, "rates": rates, "k1_difference_to_tree": k1_difference,
                  "betas": list(CONSTRUCTION_BETAS)},
        threshold={"final_error": CONSTRUCTION_ATOL, "rate": f">= {MIN_RATE}", "k1_difference_to_tree": 1e-12},
        summary=f"The tree copier followed by (k+1)-linear attention with T = log π_k (float64) reaches the exact set "
                f"posterior and BMA predictive: max error {final:.1e} at β = {CONSTRUCTION_BETAS[-1]:g}, decaying as "
                f"e^(−rβ) with r = {', '.join(f'{r:.2f}' for r in rates)} (k = 2, 3); k = 1 equals the tree "
                f"construction to {k1_difference:.1e}; with T's parents transposed the error stays "
                f"≥ {min(c['final_error'] for c in control_cases):.2f} (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}).",
        tables=[Table("construction vs β", ["k", "d", "H", "L", f"error at β={CONSTRUCTION_BETAS[-1]:g}", "rate",
                                            "verdict", "wrong-T error (control)", "control verdict"], rows)],
        figures=[figure], control=control,
        # float64 torch; spread 0 over OMP_NUM_THREADS=1|2 x ATEN_CPU_CAPABILITY=default|avx2 at seed 0.
        # final_error is rounding (1.4e-13 at seed 0): abs 1e-11 (still 100x below the 1e-9 threshold). The rates
        # (≈ 1.000) are fitted on errors in [1e-11, 1e-2]: rounding (1e-16 absolute) moves log(error) by at most 1e-5
        # at the smallest point, the slope by ≤ 3e-6 over Δβ ≥ 4: rel 1e-4 (x30), far below the effect (rate ≥ 0.5)
        tolerances={"final_error": {"abs": 1e-11}, "rates": {"rel": 1e-4}, "k1_difference_to_tree": {"abs": 1e-13}})


def ext_dag_construction_symbolic(ctx: CheckContext) -> CheckOutcome:
    """Theorem 1 for sets, symbolically (theory.dag.derive_dag_construction): softmax over pairs of the
    2-simplicial score with T = log π_2 equals the set posterior from Bayes over every DAG (symbolic μ₀, π_1, π_2),
    and the score's first-order change under soft copies; the derived posterior evaluated at random kernels against
    ``numerics.dag_parent_posterior``.

    Control: T = log π_2 with its parents transposed, through the same residuals and numeric comparison.
    """
    import sympy as sp

    from bma_verify.theory.dag import CONSTRUCTION_CONTEXT, derive_dag_construction, transposed_log_table

    def run(table):
        derivation = derive_dag_construction(table)
        expr = derivation.results["softmax_0"]
        symbols = sorted(expr.free_symbols, key=lambda s: s.name)
        fn = sp.lambdify(symbols, expr, "numpy")
        rng = ctx.rng("ext-dag-construction/symbolic")
        error = 0.0
        for _ in range(_size(ctx, "symbolic_points")):
            kernels = random_dag_kernels(2, 2, alpha=0.8, eps=0.02, rng=rng)
            values = {f"pi_{r}_0": kernels[1][r, 0] for r in range(4)}
            got = float(fn(*[values[s.name] for s in symbols]))
            ref = dag_parent_posterior(kernels, np.array(CONSTRUCTION_CONTEXT))[3, 0]
            error = max(error, abs(got - ref))
        status = derivation.status()
        verdict = "pass" if all(status.values()) and error <= IDENTITY_ATOL else "fail"
        return derivation, status, error, verdict

    derivation, status, error, verdict = run(None)
    _, c_status, c_error, c_verdict = run(transposed_log_table)
    control = Control("T = log π_2 with its two parents transposed, through the same residuals and numeric "
                      "comparison", {"identities_failed": [k for k, ok in c_status.items() if not ok],
                                     "max_abs_error": c_error}, rejected=c_verdict != "pass")
    return CheckOutcome(
        verdict=verdict,
        measured={"identities": status, "max_abs_error": error},
        threshold={"residuals": "exactly 0", "max_abs_error": IDENTITY_ATOL},
        summary=f"With exact copies and T = log π_2, softmax over pairs of Σ_l T[x^l_a, x^l_b, x^l_h] equals the set "
                f"posterior from Bayes over every DAG with symbolic μ₀, π_1, π_2 (L = 2, H = 4; "
                f"{sum(status.values())}/{len(status)} identities hold, including the first-order change of the score "
                f"under soft copies, so the copier's O(e^(−β)) error passes to the attention); at "
                f"{_size(ctx, 'symbolic_points')} random kernels the derived posterior equals "
                f"numerics.dag_parent_posterior to {error:.1e}; with T's parents transposed "
                f"{len(control.measured['identities_failed'])} identities fail and the error is {c_error:.2f} "
                f"(control, {'rejected' if control.rejected else 'NOT rejected'}).",
        derivation=derivation.latex_steps(), control=control,
        # rounding of a lambdified ratio (≤ 1e-15 at seed 0; NumPy/SymPy only): abs 1e-12
        tolerances={"max_abs_error": {"abs": 1e-12}})


# ----------------------------------------------------------------------------------------------------------
# footnote1-selective-induction (a claim of the paper)

#: Lag sets of the selective-induction check (D'Angelo et al. use small sets of lags; ours span contiguous and
#: gapped sets).
SELECTIVE_LAG_SETS = ([1, 2, 3], [2, 5], [1, 4], [1, 2])
SELECTIVE_SIZES = {"quick": {"sequences": 3, "T": 12}, "full": {"sequences": 20, "T": 24}}


def _decide_selective(max_error: float) -> str:
    """pass iff the constructed predictor equals the Bayes-optimal predictive to POSTERIOR_ATOL at every t."""
    return "pass" if max_error <= POSTERIOR_ATOL else "fail"


def footnote1_selective_induction(ctx: CheckContext) -> CheckOutcome:
    """The tree BMA construction mapped onto the selective-induction task (numerics.selective_induction: one
    example = one window of the sequence, candidate h' = t − κ, pad row μ) against the Bayes-optimal predictive
    over lags written from the likelihood, at every position of sampled sequences, for several lag sets.

    Control: the same construction reading the lag off by one (candidate h' = t − κ − 1), judged by the same rule.
    A finding of ours: dropping the μ(x_s) terms of the first tokens from the weights is not Bayes-optimal.
    """
    from bma_verify.numerics.selective_induction import (bayes_predictive, construction_predictive,
                                              sample_selective_induction, truncated_weights_predictive)

    rng = ctx.rng("footnote1-selective-induction")
    sizes = SELECTIVE_SIZES[ctx.tier]
    rows, errors, planted, truncated = [], [], [], []
    worst_truncated = None
    for lags in SELECTIVE_LAG_SETS:
        d = int(rng.integers(2, 5))
        kernel = random_kernel(d, alpha=0.5, eps=0.02, rng=rng)
        tokens, kappas = sample_selective_induction(kernel, lags, sizes["sequences"], sizes["T"], rng=rng)
        for x, kappa in zip(tokens, kappas):
            exact = bayes_predictive(kernel, lags, x)
            built = construction_predictive(kernel, lags, x)
            shifted = construction_predictive(kernel, lags, x, lag_shift=1)
            trunc = truncated_weights_predictive(kernel, lags, x)
            errors.append(float(max(np.abs(built["predictive"] - exact["predictive"]).max(),
                                    np.abs(built["lag_posterior"] - exact["lag_posterior"]).max())))
            planted.append(float(np.abs(shifted["predictive"] - exact["predictive"]).max()))
            truncated.append(float(np.abs(trunc - exact["predictive"]).max()))
            if worst_truncated is None or truncated[-1] > worst_truncated["error"]:
                worst_truncated = {"kernel": kernel.tolist(), "lags": list(lags), "sequence": x.tolist(),
                                   "error": truncated[-1]}
            rows.append([str(lags), d, int(kappa), f"{errors[-1]:.1e}", f"{planted[-1]:.3f}",
                         f"{truncated[-1]:.3f}", f"{exact['lag_posterior'][-1][list(lags).index(kappa)]:.3f}"])
    error = max(errors)
    verdict = _decide_selective(error)
    control = Control("the construction reading the lag off by one (candidate h' = t − κ − 1)",
                      {"max_error": max(planted), "min_error": min(planted)},
                      rejected=_decide_selective(max(planted)) != "pass")
    findings = [Finding("weights ∝ Π_{κ ≤ s < t} P*(x_s | x_{s−κ}) (the first tokens' μ(x_s) terms dropped) give the "
                        "Bayes-optimal predictive", "refuted" if max(truncated) > POSTERIOR_ATOL else "holds",
                        worst_truncated if max(truncated) > POSTERIOR_ATOL else None,
                        f"largest deviation {max(truncated):.3f} over {len(truncated)} sequences: the μ terms depend "
                        "on κ, so the product must run over all s < t with P*(x_s | x_{s−κ}) := μ(x_s) for s < κ")]
    return CheckOutcome(
        verdict=verdict,
        measured={"sequences": len(errors), "T": sizes["T"], "max_error": error,
                  "control_max_error": max(planted), "truncated_max_error": max(truncated)},
        threshold={"max_error": POSTERIOR_ATOL},
        summary=f"Mapping: one tree example = one window of the sequence (H = κmax + 1, a BOS pad whose kernel row "
                f"is μ), lag κ = parent h' = t − κ; the tree BMA selector on the windows equals the Bayes-optimal "
                f"predictive over lags (weights Π_{{s<t}} P*(x_s | x_{{s−κ}}), μ for s < κ) to {error:.1e} at every "
                f"position of {len(errors)} sequences (lag sets {', '.join(map(str, SELECTIVE_LAG_SETS))}); reading "
                f"the lag off by one is off by up to {max(planted):.3f} (control, "
                f"{'rejected' if control.rejected else 'NOT rejected'}); dropping the first tokens' μ terms is off "
                f"by up to {max(truncated):.3f} (finding).",
        tables=[Table("constructed vs Bayes-optimal", ["K", "d", "κ drawn", "max error", "lag off by one (control)",
                                                       "μ terms dropped", "posterior of κ at T"], rows)],
        findings=findings, control=control,
        # float64 sums in the same order on both sides (measured 0 at seed 0; NumPy only): abs 1e-13 guards rounding
        tolerances={"max_error": {"abs": 1e-13}})
