"""lemma4-loglik-gap: the symbolic check's determinism, the exact check on the shared Lemma 3 sweep and the Monte
Carlo check, their controls and what settle makes of an accepted control."""
from __future__ import annotations

import dataclasses

import pytest

import bma_verify.numerics.dpi_sweep as dpi_sweep
import bma_verify.reports.checks.numeric_common as numeric_common
import bma_verify.reports.claims.lemma4_loglik_gap.claim as claim
from bma_verify.reports.core import NOT_DISCRIMINATING, NOT_TESTABLE, CheckContext, settle

SMALL = {"lemma3_instances": 24, "lemma3_chunk": 24, "mc_instances": 2, "mc_samples": 20_000}


def test_symbolic_check_is_deterministic_for_a_seed():
    a = claim.symbolic_check(CheckContext(tier="quick", seed=3))
    b = claim.symbolic_check(CheckContext(tier="quick", seed=3))
    assert a.measured == b.measured and a.verdict == b.verdict == "pass"
    assert a.control.measured == b.control.measured


@pytest.fixture(scope="module")
def quick_outcomes(tmp_path_factory):
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path_factory.mktemp("figures"))
    return {name: getattr(claim, name)(ctx) for name in ("exact_check", "monte_carlo_check")}


@pytest.mark.slow
def test_every_numeric_check_rejects_its_control_in_the_quick_tier(quick_outcomes):
    for name, outcome in quick_outcomes.items():
        assert outcome.control is not None and outcome.control.rejected, (name, outcome.control)
        assert settle(outcome) == ("pass", ""), (name, outcome.verdict, outcome.summary)


@pytest.mark.slow
def test_the_monte_carlo_close_call_is_within_a_few_standard_errors(quick_outcomes):
    gap = quick_outcomes["monte_carlo_check"].measured["close_call"]["gap_in_stderr"]
    assert 2.5 < gap < 8, gap


def _small(monkeypatch) -> None:
    for key, value in SMALL.items():
        monkeypatch.setitem(numeric_common.SIZES["quick"], key, value)


def _not_discriminating(outcome) -> None:
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control is not None and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_exact_check_whose_formula_without_kl_keeps_it_is_not_discriminating(monkeypatch, tmp_path):
    # the "formula without E KL" keeps its E KL term
    _small(monkeypatch)
    original = dpi_sweep.lemma4_terms_from_mi

    def kl_in_mi_parent(*args):
        terms = original(*args)
        return dict(terms, mi_parent=terms["mi_parent"] + terms["kl"])
    monkeypatch.setattr(dpi_sweep, "lemma4_terms_from_mi", kl_in_mi_parent)
    _not_discriminating(claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_monte_carlo_check_whose_formula_without_kl_keeps_it_is_not_discriminating(monkeypatch, tmp_path):
    _small(monkeypatch)
    original = claim.lemma4_monte_carlo

    def kl_in_mi_parent(*args, **kwargs):
        out = original(*args, **kwargs)
        out["exact"]["mi_parent"] += out["exact"]["kl"]
        return out
    monkeypatch.setattr(claim, "lemma4_monte_carlo", kl_in_mi_parent)
    _not_discriminating(claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


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


def test_the_ideal_estimate_rule_passes_a_decidable_exact_value_and_not_a_near_or_wrong_one():
    # The Monte Carlo rule on an estimate landing on the exact value, interval [est − 0.1, est + 0.1] re-centred.
    assert numeric_common.ideal_estimate_verdict(0.5, 0.47, 0.37, 0.57, 0.0, below=False) == "pass"
    assert numeric_common.ideal_estimate_verdict(0.05, 0.1, 0.0, 0.2, 0.0, below=False) == "inconclusive"
    assert numeric_common.ideal_estimate_verdict(-0.5, 0.1, 0.0, 0.2, 0.0, below=False) == "fail"


@pytest.mark.slow
def test_monte_carlo_positive_control_is_the_exact_gaps_and_passes(quick_outcomes):
    positive = quick_outcomes["monte_carlo_check"].positive_control
    assert positive.passed and set(positive.measured["verdicts"]) == {"pass"}, positive


def test_a_rule_that_never_agrees_fails_the_monte_carlo_positive_control(monkeypatch):
    # Planted broken rule: no estimate can agree with its exact value (Z_AGREE < 0), not even the exact value itself.
    monkeypatch.setitem(numeric_common.SIZES, "quick", SMALL)
    monkeypatch.setattr(numeric_common, "Z_AGREE", -1.0)
    outcome = claim.monte_carlo_check(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    assert set(outcome.positive_control.measured["verdicts"]) == {"inconclusive"}
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_TESTABLE in reason



@pytest.mark.slow
def test_exact_positive_control_is_the_enumerated_identity_and_passes(quick_outcomes):
    positive = quick_outcomes["exact_check"].positive_control
    assert positive.passed and positive.measured["identity_error"] <= numeric_common.IDENTITY_ATOL, positive
    assert positive.measured["lhs"] > 0


def test_a_wrong_enumerated_identity_fails_the_exact_positive_control(monkeypatch):
    # Planted wrong ideal: the right side without its E KL term; the exact check is then not testable.
    right = claim.lemma4_terms

    def without_kl(*args):
        terms = right(*args)
        return {**terms, "rhs": terms["rhs"] - terms["kl"]}

    monkeypatch.setitem(numeric_common.SIZES, "quick", SMALL)
    monkeypatch.setattr(claim, "lemma4_terms", without_kl)
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_TESTABLE in reason
