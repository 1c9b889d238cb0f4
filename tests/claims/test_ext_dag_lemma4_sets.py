"""ext-dag-lemma4-sets at the quick tier, seed 0. Compared against: theory.dag_lemma4's residuals (exactly 0), the
identity to rounding on exact joints, the exact Δ for the Monte Carlo means; for each control, that its rule
rejects the decomposition without E KL and that with the plant made harmless the pass is withheld."""
import pytest

import bma_verify.reports.claims.ext_dag_lemma4_sets.claim as L4
from bma_verify.reports.core import settle
from tests.claims.ext_dag_support import assert_json_ready, not_discriminating, quick_context


@pytest.fixture()
def ctx(tmp_path):
    return quick_context(tmp_path)


def test_lemma4_symbolic_passes_and_rejects_the_dropped_kl_term(ctx):
    # Reference: theory.dag_lemma4's residuals (exactly 0) and numerics.dag_lemma4_terms on exact joints.
    outcome = L4.ext_dag_lemma4_sets_symbolic(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_error"] < 1e-12
    assert outcome.control.rejected
    assert "residual gap_minus_decomposition = 0" in outcome.control.measured["identities_failed"]


def test_lemma4_symbolic_is_not_discriminating_with_an_empty_perturbation(ctx, monkeypatch):
    monkeypatch.setattr(L4, "dropped_kl_term", lambda results: {})
    outcome = L4.ext_dag_lemma4_sets_symbolic(ctx)
    assert outcome.verdict == "pass" and not_discriminating(outcome)


def test_lemma4_exact_passes_finds_the_flat_instance_and_rejects_the_dropped_kl(ctx):
    # Reference: the identity to rounding on every (h, S); the planted kernel that ignores the non-shared parent
    # has Δ = 0 exactly (strictness refuted there); I_T − I_S alone misses E KL by O(1).
    outcome = L4.ext_dag_lemma4_sets_exact(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_identity_error"] < 1e-13 and outcome.measured["nonpositive_gaps"] == 0
    assert abs(outcome.measured["planted_flat_gap"]) < 1e-13
    statuses = [f.status for f in outcome.findings]
    assert statuses == ["holds", "refuted"]
    assert outcome.control.rejected and outcome.control.measured["max_identity_error"] > 0.1


def test_lemma4_exact_is_not_discriminating_when_the_control_equals_the_identity(ctx, monkeypatch):
    real = L4.dag_lemma4_sweep

    def harmless(rng, n):
        out = real(rng, n)
        out["error_without_kl"] = out["identity_error"]
        return out

    monkeypatch.setattr(L4, "dag_lemma4_sweep", harmless)
    assert not_discriminating(L4.ext_dag_lemma4_sets_exact(ctx))


def test_lemma4_monte_carlo_agrees_by_z_and_rejects_the_planted_value(ctx):
    # Reference: the exact Δ (z within 4) and the close call near 5 standard errors above 0.
    outcome = L4.ext_dag_lemma4_sets_monte_carlo(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_abs_z"] < 4
    assert 3 < outcome.measured["close_call"]["gap_in_stderr"] < 9
    assert outcome.control.rejected and outcome.control.measured["max_abs_z"] > 4


def test_lemma4_monte_carlo_is_not_discriminating_when_the_planted_value_is_the_truth(ctx, monkeypatch):
    real = L4.dag_lemma4_monte_carlo

    def harmless(*args, **kwargs):
        out = real(*args, **kwargs)
        out["exact"] = {**out["exact"], "mi_candidate": out["exact"]["mi_true"] - out["exact"]["lhs"]}
        return out

    monkeypatch.setattr(L4, "dag_lemma4_monte_carlo", harmless)
    assert not_discriminating(L4.ext_dag_lemma4_sets_monte_carlo(ctx))


def test_lemma4_symbolic_and_monte_carlo_positive_controls_pass(ctx):
    symbolic = L4.ext_dag_lemma4_sets_symbolic(ctx).control.measured["same_path_unplanted"]
    assert symbolic["passed"] and symbolic["identities_failed"] == [], symbolic
    mc = L4.ext_dag_lemma4_sets_monte_carlo(ctx).positive_control
    assert mc.passed and set(mc.measured["verdicts"]) == {"pass"}, mc


def test_lemma4_monte_carlo_positive_control_fails_under_a_rule_that_never_agrees(ctx, monkeypatch):
    # Planted broken rule: no estimate agrees with its exact value (Z_AGREE < 0), not even the exact value itself.
    monkeypatch.setattr(L4, "Z_AGREE", -1.0)
    outcome = L4.ext_dag_lemma4_sets_monte_carlo(ctx)
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]


def test_lemma4_exact_positive_control_is_an_enumerated_dag_and_passes(ctx):
    positive = L4.ext_dag_lemma4_sets_exact(ctx).positive_control
    assert positive.passed and positive.measured["identity_error"] < 1e-13 and positive.measured["delta"] > 0


def test_lemma4_exact_positive_control_fails_on_a_right_side_without_kl(ctx, monkeypatch):
    # Planted wrong ideal: both right sides lose E KL; the enumerated Δ no longer matches them.
    right = L4.dag_lemma4_terms

    def without_kl(*args):
        terms = right(*args)
        return {**terms, "rhs": terms["rhs"] - terms["kl"], "kl_true_vs_candidate": terms["rhs"] - terms["kl"]}

    monkeypatch.setattr(L4, "dag_lemma4_terms", without_kl)
    outcome = L4.ext_dag_lemma4_sets_exact(ctx)
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]
