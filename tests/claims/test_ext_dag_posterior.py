"""ext-dag-posterior at the quick tier, seed 0. Compared against: brute-force Bayes over every DAG (the check's own
reference, errors at rounding level) and, for the control, that its rule rejects the transposed parent order and
that with the plant made harmless ``reports.core.settle`` withholds the pass."""
import pytest

import bma_verify.reports.claims.ext_dag_posterior.claim as post
from bma_verify.reports.core import settle
from tests.claims.ext_dag_support import assert_json_ready, not_discriminating, quick_context


@pytest.fixture()
def ctx(tmp_path):
    return quick_context(tmp_path)


def test_posterior_check_passes_and_rejects_the_transposed_order(ctx):
    # Reference: brute-force Bayes over every DAG (the check's own comparison), errors at rounding level.
    outcome = post.ext_dag_posterior(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_error"] < 1e-13
    assert outcome.measured["k1"]["mismatches"] == 0 and outcome.measured["k1"]["max_abs_difference"] == 0.0
    assert outcome.control.rejected and outcome.control.measured["max_planted_error"] > 0.05


def test_posterior_check_is_not_discriminating_when_the_plant_is_harmless(ctx, monkeypatch):
    # With the "transposed" kernels replaced by the true ones the control passes: the pass must be withheld.
    monkeypatch.setattr(post, "transposed_parent_order", lambda kernels: tuple(kernels))
    outcome = post.ext_dag_posterior(ctx)
    assert outcome.verdict == "pass" and not outcome.control.rejected
    assert not_discriminating(outcome)


def test_posterior_rule_fails_a_wrong_k1_result():
    # The rule itself: a single k = 1 mismatch, or an error above 1e-10, fails.
    assert post.decide_posterior(1e-16, 0) == "pass"
    assert post.decide_posterior(1e-16, 1) == "fail"
    assert post.decide_posterior(1e-9, 0) == "fail"


def test_positive_control_is_the_tree_identity_and_passes(ctx):
    positive = post.ext_dag_posterior(ctx).positive_control
    assert positive.passed and positive.measured["max_error"] < 1e-13, positive


def test_a_wrong_tree_identity_fails_the_positive_control(ctx, monkeypatch):
    # Planted wrong ideal: the factorised tree posterior read child → parent (π transposed and renormalised).
    right = post.parent_posterior
    monkeypatch.setattr(post, "parent_posterior", lambda kernel, context: right(
        kernel.T / kernel.T.sum(1, keepdims=True), context))
    outcome = post.ext_dag_posterior(ctx)
    assert outcome.verdict == "pass" and not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and "not testable" in reason
