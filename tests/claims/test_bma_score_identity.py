"""bma-score-identity: the exact check (enumeration over trees vs parent_posterior) and the model check (the
constructed StructuredTransformer's A^(2) vs parent_posterior), their controls and planted failures."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

import bma_verify.model.analysis as analysis_module
import bma_verify.reports.claims.bma_score_identity.claim as claim
from bma_verify import numerics as nm
from bma_verify.model.construction import bma_construction
from bma_verify.reports.core import NOT_DISCRIMINATING, NOT_TESTABLE, CheckContext, settle

SMALL = 8  # posterior contexts of the accepted-control test


def _not_discriminating(outcome) -> None:
    assert outcome.verdict == "pass" and outcome.control is not None and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_exact_check_passes_and_rejects_the_transposed_kernel(tmp_path):
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.control.rejected and settle(outcome) == ("pass", "")


def test_exact_check_whose_control_is_the_real_posterior_is_not_discriminating(monkeypatch, tmp_path):
    # the "transposed" posterior is the real one
    monkeypatch.setitem(claim.POSTERIOR_CONTEXTS, "quick", SMALL)
    monkeypatch.setattr(claim, "selector_attention", lambda W, context: nm.parent_posterior(np.exp(W.T), context))
    _not_discriminating(claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_model_check_passes_and_rejects_its_control_far_from_the_threshold(tmp_path):
    # reference: numerics.parent_posterior; the planted (log π)ᵀ selector is O(1) wrong against a 1e-6 tolerance
    outcome = claim.model_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control.rejected and settle(outcome) == ("pass", "")
    assert outcome.control.measured["max_attention_l1_error"] > 0.1


def test_model_check_with_a_rule_accepting_its_control_is_not_discriminating(monkeypatch):
    # a rule loose enough to accept (log π)ᵀ
    import bma_verify.reports.checks.construction as construction

    monkeypatch.setattr(construction, "CONSTRUCTION_TOL", 10.0)
    _not_discriminating(claim.model_check(CheckContext(tier="quick", seed=0)))


def _transposed_construction(kernel, L, beta, output="mixture", **kw):
    """Planted bug: W_KQ = (log π)ᵀ per block, i.e. the likelihood read child → parent."""
    built = bma_construction(kernel, L, beta, output, **kw)
    with torch.no_grad():
        d = built.d
        for k in range(L):
            block = built.W_KQ[k * d:(k + 1) * d, k * d:(k + 1) * d]
            block.copy_(block.T.clone())
    return built


def test_model_check_catches_a_transposed_selector(monkeypatch):
    monkeypatch.setattr(analysis_module, "bma_construction", _transposed_construction)
    assert claim.model_check(CheckContext(tier="quick", seed=0)).verdict == "fail"


def test_symbolic_check_fails_when_its_derived_result_is_the_planted_perturbation(monkeypatch):
    # The control's wrong expression passed off as the derivation: the shared rule must read fail, with the
    # failing identities as the instance.
    real = claim.SYMBOLIC
    monkeypatch.setattr(claim, "SYMBOLIC", dataclasses.replace(
        real, derive=lambda *args: real.perturb(*args, perturbation=real.perturbation),
        verify=lambda rng, perturbation=None, **sizes: real.verify(rng, perturbation=perturbation or real.perturbation,
                                                                    **sizes)))
    outcome = claim.symbolic_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail" and outcome.instance["identities_failed"], outcome.summary


def test_model_check_positive_control_is_the_beta_limit_and_passes():
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.positive_control.passed, outcome.positive_control
    assert outcome.positive_control.measured["attention"] <= claim.CONSTRUCTION_TOL


def test_a_wrong_limit_fails_the_model_checks_positive_control(monkeypatch):
    # Planted wrong ideal: the β → ∞ limit read child → parent ((log π)ᵀ); the check is then not testable.
    right = nm.selector_attention
    monkeypatch.setattr(nm, "selector_attention", lambda W, context: right(W.T, context))
    outcome = claim.model_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.positive_control.passed
    assert outcome.positive_control.measured["attention"] > 0.1
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_TESTABLE in reason



def test_exact_positive_control_is_the_empty_context_prior_and_passes(tmp_path):
    positive = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)).positive_control
    assert positive.passed and positive.measured["max_abs_error"] <= 1e-14, positive


def test_a_wrong_factorised_posterior_fails_the_exact_check_and_leaves_its_positive_control(monkeypatch, tmp_path):
    # The ideal stands in parent_posterior's place: a planted wrong parent_posterior is a fail, not "not testable".
    right = claim.parent_posterior
    monkeypatch.setitem(claim.POSTERIOR_CONTEXTS, "quick", SMALL)
    monkeypatch.setattr(claim, "parent_posterior", lambda kernel, context: 0.99 * right(kernel, context))
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.positive_control.passed and settle(outcome) == ("fail", "")


def test_a_broken_enumeration_fails_the_exact_positive_control(monkeypatch, tmp_path):
    # Planted: the reference (enumeration over trees) loses 1% of each row's mass; the check is not testable.
    right = claim.brute_force_parent_posterior
    monkeypatch.setitem(claim.POSTERIOR_CONTEXTS, "quick", SMALL)
    monkeypatch.setattr(claim, "brute_force_parent_posterior", lambda kernel, context: 0.99 * right(kernel, context))
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert not outcome.positive_control.passed and outcome.positive_control.measured["max_abs_error"] > 1e-3
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_TESTABLE in reason
