"""The report checks of our DAG extension (reports/checks/ext_dag.py; ``ext-dag-*`` claims).

Each check runs at the quick tier, seed 0. Compared against: the verdict the numerics established (posterior =
enumeration, Lemma 4 identity, DPI, the refuted Theorem 3 for sets), and for each control that its rule rejects it
and that, with the planted input made harmless, ``reports.core.settle`` withholds the pass ("not discriminating").
"""
import json

import numpy as np
import pytest

import bma_verify.reports.checks.ext_dag as E
from bma_verify.reports.core import CheckContext, jsonable, settle


@pytest.fixture()
def ctx(tmp_path):
    return CheckContext(tier="quick", seed=0, figures_dir=tmp_path)


def _not_discriminating(outcome):
    verdict, reason = settle(outcome)
    return verdict == "inconclusive" and "not discriminating" in reason


def _json(outcome):
    json.dumps(jsonable(outcome.measured))
    json.dumps(jsonable(outcome.control.as_dict()))
    for finding in outcome.findings:
        json.dumps(finding.as_dict())


# ----------------------------------------------------------------------------------------------------------
# ext-dag-posterior


def test_transposed_parent_order_swaps_the_first_two_parents():
    # Reference: the tensor view π[a, b, c, x] of the table; the planted table must read π[b, a, c, x].
    rng = np.random.default_rng(0)
    kernels = E.random_dag_kernels(3, 3, rng=rng)
    planted = E.transposed_parent_order(kernels)
    top, new = kernels[-1].reshape(3, 3, 3, 3), planted[-1].reshape(3, 3, 3, 3)
    np.testing.assert_array_equal(new, top.transpose(1, 0, 2, 3))
    np.testing.assert_array_equal(planted[0], kernels[0])
    with pytest.raises(ValueError, match="k >= 2"):
        E.transposed_parent_order(kernels[:1])


def test_posterior_check_passes_and_rejects_the_transposed_order(ctx):
    # Reference: brute-force Bayes over every DAG (the check's own comparison), errors at rounding level.
    outcome = E.ext_dag_posterior(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_error"] < 1e-13
    assert outcome.measured["k1"]["mismatches"] == 0 and outcome.measured["k1"]["max_abs_difference"] == 0.0
    assert outcome.control.rejected and outcome.control.measured["max_planted_error"] > 0.05


def test_posterior_check_is_not_discriminating_when_the_plant_is_harmless(ctx, monkeypatch):
    # With the "transposed" kernels replaced by the true ones the control passes: the pass must be withheld.
    monkeypatch.setattr(E, "transposed_parent_order", lambda kernels: tuple(kernels))
    outcome = E.ext_dag_posterior(ctx)
    assert outcome.verdict == "pass" and not outcome.control.rejected
    assert _not_discriminating(outcome)


def test_posterior_rule_fails_a_wrong_k1_result():
    # The rule itself: a single k = 1 mismatch, or an error above 1e-10, fails.
    assert E._decide_posterior(1e-16, 0) == "pass"
    assert E._decide_posterior(1e-16, 1) == "fail"
    assert E._decide_posterior(1e-9, 0) == "fail"


# ----------------------------------------------------------------------------------------------------------
# ext-dag-lemma4-sets


def test_lemma4_symbolic_passes_and_rejects_the_dropped_kl_term(ctx):
    # Reference: theory.dag's residuals (exactly 0) and numerics.dag_lemma4_terms on exact joints.
    outcome = E.ext_dag_lemma4_sets_symbolic(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_error"] < 1e-12
    assert outcome.control.rejected
    assert "residual gap_minus_decomposition = 0" in outcome.control.measured["identities_failed"]


def test_lemma4_symbolic_is_not_discriminating_with_an_empty_perturbation(ctx, monkeypatch):
    import bma_verify.theory.dag as T

    monkeypatch.setattr(T, "dropped_kl_term", lambda results: {})
    outcome = E.ext_dag_lemma4_sets_symbolic(ctx)
    assert outcome.verdict == "pass" and _not_discriminating(outcome)


def test_lemma4_exact_passes_finds_the_flat_instance_and_rejects_the_dropped_kl(ctx):
    # Reference: the identity to rounding on every (h, S); the planted kernel that ignores the non-shared parent
    # has Δ = 0 exactly (strictness refuted there); I_T − I_S alone misses E KL by O(1).
    outcome = E.ext_dag_lemma4_sets_exact(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_identity_error"] < 1e-13 and outcome.measured["nonpositive_gaps"] == 0
    assert abs(outcome.measured["planted_flat_gap"]) < 1e-13
    statuses = [f.status for f in outcome.findings]
    assert statuses == ["holds", "refuted"]
    assert outcome.control.rejected and outcome.control.measured["max_identity_error"] > 0.1


def test_lemma4_exact_is_not_discriminating_when_the_control_equals_the_identity(ctx, monkeypatch):
    real = E.lemma4_sets_sweep

    def harmless(rng, n):
        out = real(rng, n)
        out["error_without_kl"] = out["identity_error"]
        return out

    monkeypatch.setattr(E, "lemma4_sets_sweep", harmless)
    assert _not_discriminating(E.ext_dag_lemma4_sets_exact(ctx))


def test_lemma4_monte_carlo_agrees_by_z_and_rejects_the_planted_value(ctx):
    # Reference: the exact Δ (z within 4) and the close call near 5 standard errors above 0.
    outcome = E.ext_dag_lemma4_sets_monte_carlo(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_z"] < 4
    assert 3 < outcome.measured["close_call"]["gap_in_stderr"] < 9
    assert outcome.control.rejected and outcome.control.measured["max_abs_z"] > 4


def test_lemma4_monte_carlo_is_not_discriminating_when_the_planted_value_is_the_truth(ctx, monkeypatch):
    real = E.dag_lemma4_monte_carlo

    def harmless(*args, **kwargs):
        out = real(*args, **kwargs)
        out["exact"] = {**out["exact"], "mi_candidate": out["exact"]["mi_true"] - out["exact"]["lhs"]}
        return out

    monkeypatch.setattr(E, "dag_lemma4_monte_carlo", harmless)
    assert _not_discriminating(E.ext_dag_lemma4_sets_monte_carlo(ctx))


# ----------------------------------------------------------------------------------------------------------
# ext-dag-lemma3-sets


def test_lemma3_check_passes_with_findings_figure_and_the_planted_control(ctx, tmp_path):
    # Reference: the DPI (no ratio > 1), disjoint ratios < 1, the planted overlap ratio exactly 1 (to 1e-12); the
    # Dobrushin candidate refuted on disjoint sets (stored counterexample, re-checked: ratio 0.5771 > δ = 0.2462).
    outcome = E.ext_dag_lemma3_sets(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    m = outcome.measured
    assert m["dpi_violations"] == 0 and m["largest_ratio"]["disjoint"] < 1 - 1e-3
    assert abs(m["planted_overlap_ratio"] - 1) <= 1e-12
    assert (tmp_path / outcome.figures[0]).exists()
    by_statement = {f.statement: f for f in outcome.findings}
    assert outcome.findings[0].status == "refuted"  # no α < 1 for every S
    dobrushin = by_statement[f"{E._CANDIDATE_TEXT['dobrushin']}, for disjoint S"]
    assert dobrushin.status == "refuted" and dobrushin.instance is not None
    assert all(s["violates"] for s in m["stored_rechecks"])
    stored = {s["candidate"]: s for s in m["stored_rechecks"]}
    assert stored["dobrushin"]["value"] == pytest.approx(0.5771083326728782, abs=1e-10)
    assert outcome.control.rejected and outcome.control.measured["flagged_against_alpha_1_minus_1e-6"]


def test_lemma3_check_is_not_discriminating_when_the_planted_ratio_is_below_one(ctx, monkeypatch):
    monkeypatch.setattr(E, "lemma3_control_ratio", lambda: {"ratio": 0.5, "mi_true": 0.1})
    assert _not_discriminating(E.ext_dag_lemma3_sets(ctx))


def test_lemma3_rule_and_violation_rule():
    # The rule: DPI violation, a disjoint ratio of 1, or a planted ratio away from 1 each fail.
    assert E._decide_lemma3(0, [0.3, 0.9], 1.0) == "pass"
    assert E._decide_lemma3(1, [0.3], 1.0) == "fail"
    assert E._decide_lemma3(0, [0.3, 1.0], 1.0) == "fail"
    assert E._decide_lemma3(0, [0.3], 0.99) == "fail"
    assert E.violates(0.5, 0.4, 0.1) and not E.violates(0.4, 0.4, 0.1)


# ----------------------------------------------------------------------------------------------------------
# ext-dag-thm3-sets


@pytest.mark.parametrize("check,form", [(E.ext_dag_thm3_sets_j, "approximate"), (E.ext_dag_thm3_sets_pibar, "exact")])
def test_thm3_sets_is_refuted_in_both_forms_with_the_smallest_instance(ctx, check, form):
    # Reference: the stored H = 4, d = 2, k = 2 counterexamples (recomputed; margins < 0), as in
    # tests/test_dag_theory.py; the shuffled label is flagged at almost every position.
    outcome = check(ctx)
    _json(outcome)
    assert settle(outcome)[0] == "fail"
    assert outcome.measured["stored_violations"] == 2
    assert all(v < -5e-4 for v in outcome.measured["stored_margins"].values())
    refuted = [f for f in outcome.findings if f.status == "refuted"]
    assert len(refuted) >= 2 and all(f.instance["H"] == 4 for f in refuted)
    assert outcome.instance is not None
    assert outcome.control.rejected
    assert outcome.control.measured["violations"] > 0.9 * outcome.control.measured["positions"]


def test_thm3_argmax_rule():
    assert E._decide_argmax(0, 1e-15) == "pass"
    assert E._decide_argmax(1, 1e-15) == "fail"
    assert E._decide_argmax(0, 1e-6) == "fail"
    values = np.array([0.1, 0.3, 0.2])
    assert E._margin(values, 1) == pytest.approx(0.1) and E._margin(values, 0) == pytest.approx(-0.2)


# ----------------------------------------------------------------------------------------------------------
# ext-dag-construction


def test_construction_model_check_passes_and_rejects_the_wrong_table(ctx):
    # Reference: exact set posterior / BMA predictive (errors ≤ 1e-9 at β = 32, rate ≈ 1 per unit β); the tree
    # construction for k = 1; the wrong-T model stays O(0.1) off.
    outcome = E.ext_dag_construction_model(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["final_error"] < 1e-9
    assert all(0.8 < r < 1.2 for r in outcome.measured["rates"])
    assert outcome.control.rejected and min(outcome.control.measured["final_errors"]) > 0.1


def test_construction_model_is_not_discriminating_with_a_harmless_plant(ctx, monkeypatch):
    monkeypatch.setattr(E, "transposed_parent_order", lambda kernels: tuple(kernels))
    assert _not_discriminating(E.ext_dag_construction_model(ctx))


def test_construction_symbolic_passes_and_rejects_the_transposed_table(ctx):
    # Reference: theory.dag residuals (exactly 0) and numerics.dag_parent_posterior at random kernels.
    outcome = E.ext_dag_construction_symbolic(ctx)
    _json(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_error"] < 1e-12
    assert outcome.control.rejected and len(outcome.control.measured["identities_failed"]) == 3


def test_construction_rule_and_rate_fit():
    assert E._decide_construction(1e-12, 1.0) == "pass"
    assert E._decide_construction(1e-3, 1.0) == "fail"
    assert E._decide_construction(1e-12, 0.1) == "fail"
    betas = np.arange(1.0, 20.0)
    assert E._fit_rate(betas, np.exp(-0.7 * betas)) == pytest.approx(0.7, rel=1e-9)
    assert E._fit_rate(betas, np.full(betas.size, 0.3)) == 0.0  # nothing in the fit range
