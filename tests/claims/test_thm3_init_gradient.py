"""thm3-init-gradient: the exact J form and π̄ form on the shared sweep, the Monte Carlo check beyond enumeration
and the model check (autograd through the real model), their controls, findings and what settle makes of an
accepted control."""
from __future__ import annotations

import copy
import dataclasses
import itertools

import numpy as np
import pytest

import bma_verify.model.analysis as analysis_module
import bma_verify.reports.checks.numeric_common as numeric_common
import bma_verify.reports.claims.thm3_init_gradient.claim as claim
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, check_instance

SMALL = {"thm3_instances": 8, "thm3_chunk": 8, "thm3_mc_samples": 100_000}


@pytest.fixture(scope="module")
def quick_outcomes(tmp_path_factory):
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path_factory.mktemp("figures"))
    return {name: getattr(claim, name)(ctx) for name in ("exact_check", "pibar_check", "monte_carlo_check")}


def test_the_pibar_form_is_the_stronger_reading():
    readings = {check.run.__name__: check.reading for check in claim.CLAIM.checks}
    assert readings["pibar_check"] == "stronger" and readings["exact_check"] == "as-stated"


@pytest.mark.slow
def test_every_numeric_check_rejects_its_control_in_the_quick_tier(quick_outcomes):
    for name, outcome in quick_outcomes.items():
        assert outcome.control is not None and outcome.control.rejected, (name, outcome.control)
        if name in ("pibar_check", "exact_check"):
            # refuted: the exact π̄ form (ours) and, on the stored non-stationary instance, the paper's J form
            assert outcome.verdict == "fail"
        else:
            assert settle(outcome) == ("pass", ""), (name, outcome.verdict, outcome.summary)


@pytest.mark.slow
def test_pibar_form_holds_for_stationary_and_is_refuted_by_the_stored_non_stationary_chain(quick_outcomes):
    outcome = quick_outcomes["pibar_check"]
    stationary, non_stationary = outcome.findings
    assert stationary.status == "holds" and "stationary μ₀" in stationary.statement
    assert non_stationary.status == "refuted"
    stored = next(k for k in KNOWN_COUNTEREXAMPLES if k["target"] == "thm3")  # reference: the stored instance
    assert non_stationary.instance["init"] == stored["init"] and non_stationary.instance["h"] == stored["h"]
    assert not check_instance(non_stationary.instance)["holds"]
    assert outcome.figures == ["thm3_init_gradient_pibar.png"]  # the stored counterexample, not a random instance


@pytest.mark.slow
def test_j_form_fails_on_the_stored_non_stationary_instance_only(quick_outcomes):
    # reference: J by brute-force enumeration of the 27 sequences of the stored chain x_0 -> x_1 -> x_2 (below);
    # the sweep itself finds no violation, the stored J-form counterexample is the one
    outcome = quick_outcomes["exact_check"]
    assert outcome.verdict == "fail" and outcome.measured["violations"] == 1
    assert outcome.measured["by_init"]["stationary"]["violations"] == 0
    assert outcome.measured["max_chi2_identity_error"] < 1e-13 and outcome.measured["max_j_identity_error"] < 1e-13
    stored = [k for k in KNOWN_COUNTEREXAMPLES if k["target"] == "thm3"]
    j_form = next(k for k in stored if k["form"] == "approximate")
    assert outcome.instance["init"] == j_form["init"] and outcome.instance["kernel"] == j_form["kernel"]
    margins = dict(zip((k["form"] for k in stored), outcome.measured["stored_instance_margins"]))
    assert margins["exact"] > 0 and margins["approximate"] < 0
    kernel, mu0 = np.array(j_form["kernel"]), np.array(j_form["init"])
    p2 = mu0 @ kernel @ kernel
    J = {0: -1.0, 1: -1.0}
    for a, b, c in itertools.product(range(3), repeat=3):
        w = mu0[a] * kernel[a, b] * kernel[b, c]
        J[0] += w * kernel[a, c] / p2[c]
        J[1] += w * kernel[b, c] / p2[c]
    assert J[0] > J[1]  # the grandparent x_0 beats the parent x_1


@pytest.mark.slow
def test_the_monte_carlo_close_call_is_within_a_few_standard_errors(quick_outcomes):
    margin = quick_outcomes["monte_carlo_check"].measured["close_call"]["margin_in_stderr"]
    assert 2.5 < margin < 8, margin


def _not_discriminating(outcome) -> None:
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control is not None and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


@pytest.mark.parametrize("check", ["exact_check", "pibar_check"])
def test_exact_checks_whose_shuffled_label_never_loses_are_not_discriminating(check, monkeypatch, tmp_path):
    for key, value in SMALL.items():
        monkeypatch.setitem(claim.SWEEP_SIZES["quick"], key, value)
    original = claim.thm3_sweep

    def shuffled_label_wins(ctx):
        result = copy.deepcopy(original(ctx))
        for key in [k for k in result.counts if k.startswith("control/") and "/violations/" in f"/{k}"]:
            result.counts[key] = 0
        return result
    monkeypatch.setattr(claim, "thm3_sweep", shuffled_label_wins)
    monkeypatch.setattr(numeric_common, "KNOWN_COUNTEREXAMPLES", ())
    _not_discriminating(getattr(claim, check)(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_monte_carlo_check_whose_runner_up_claim_is_the_parent_is_not_discriminating(monkeypatch, tmp_path):
    original = claim.thm3_monte_carlo
    monkeypatch.setattr(claim, "thm3_monte_carlo", lambda *a, claimed=None, **k: original(*a, **k))
    _not_discriminating(claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_model_check_passes_and_its_control_is_rejected_by_its_z_alone(tmp_path):
    # the marginal form differs from the autograd mean by many standard errors at h >= 2, not only at h = 1
    outcome = claim.model_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass" and settle(outcome) == ("pass", "")
    assert outcome.control.measured["max_z_where_the_stderr_is_positive"] > 6
    assert outcome.measured["max_z"] <= 4


def test_model_check_whose_wrong_form_is_the_right_one_is_not_discriminating(monkeypatch):
    right = analysis_module.gradient_form
    monkeypatch.setattr(analysis_module, "gradient_form",
                        lambda kernel, parents, h, init, tokens, form: right(kernel, parents, h, init, tokens,
                                                                             "pibar"))
    _not_discriminating(claim.model_check(CheckContext(tier="quick", seed=0)))


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


@pytest.fixture(scope="module")
def stationary_outcome(tmp_path_factory):
    return claim.stationary_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path_factory.mktemp("figures")))


def test_the_stationary_proof_is_a_stronger_reading_whose_findings_hold(stationary_outcome):
    readings = {check.run.__name__: check.reading for check in claim.CLAIM.checks}
    assert readings["stationary_check"] == "stronger"
    assert settle(stationary_outcome) == ("pass", ""), stationary_outcome.summary
    proved, weaker = stationary_outcome.findings
    assert proved.status == "holds" and "stationary" in proved.statement and "ours" in proved.statement
    assert weaker.status == "holds" and "(1 − η)/η" in weaker.statement
    assert "0.0129 < 0.0632" in weaker.evidence  # the π̄ instance meets the condition at x_0 (test_thm3_stationary)
    measured = stationary_outcome.measured
    assert all(measured["symbolic"]["identities"].values())
    assert max(measured["max_residual"].values()) <= claim.CHAIN_ATOL and measured["max_eta"] < 1
    assert measured["min_slack"]["margin"] > 0


def test_the_stationary_check_names_step_two_as_the_one_the_j_form_counterexample_breaks(stationary_outcome):
    # reference: test_j_form_fails_on_the_stored_non_stationary_instance_only enumerates J(x_0) > J(x_1) there
    steps = {b["form"]: b for b in stationary_outcome.measured["counterexample_steps"]}["approximate"]
    assert steps["identity_error"][0] < 1e-12 and steps["cauchy_schwarz_slack"][0] > 0 and steps["sdpi_slack"][0] > 0
    assert steps["left_singular_residual"][0] > 0.9 and steps["pi_side_gap"][0] > steps["gap_allowance"][0]
    assert steps["margin"][0] < 0


def test_the_stationary_check_rejects_each_perturbed_step(stationary_outcome):
    control = stationary_outcome.control
    assert control.rejected and not control.measured["symbolic_identities_hold"]
    assert all(v < -claim.CHAIN_ATOL for v in control.measured["min_slacks"].values())
    assert control.measured["left_singular"]["rejected_instances"] == claim.STATIONARY_SIZES["quick"]["instances"]


def test_the_stationary_check_fails_when_a_step_has_negative_slack(monkeypatch, tmp_path):
    original = claim.stationary_chain_sweep

    def broken_sdpi(*args, **kwargs):
        out = copy.deepcopy(original(*args, **kwargs))
        out["min_slack"]["sdpi_slack"] = -1e-3  # a step that no longer holds somewhere
        return out
    monkeypatch.setattr(claim, "stationary_chain_sweep", broken_sdpi)
    outcome = claim.stationary_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "fail" and outcome.findings[0].status == "refuted"


@pytest.mark.slow
def test_monte_carlo_positive_control_is_the_exact_margins_and_passes(quick_outcomes):
    positive = quick_outcomes["monte_carlo_check"].positive_control
    assert positive.passed and set(positive.measured["verdicts"]) == {"pass"}, positive


def test_what_holds_instead_names_the_proved_repairs_and_the_observed_one(stationary_outcome, tmp_path):
    repairs = stationary_outcome.holds_instead
    assert [r.status for r in repairs] == ["proved", "proved", "observed"]
    assert "stationary" in repairs[0].statement and "(1 − η)/η" in repairs[1].statement
    assert "π̄" in repairs[2].statement and repairs[0].figures == ["thm3_init_gradient_boundary.png"]
    # the boundary sentence is written from the measured cells: every TV it quotes is a measured one
    cells = stationary_outcome.measured["boundary"]["smallest_tv"]
    found = [c for c in cells if c["smallest_tv"] is not None]
    assert found, "the quick tier's search finds no violation at all: the boundary says nothing"
    for cell in found:
        assert f"d = {cell['d']}, d·min π = {cell['d_min_pi']:g}: TV {cell['smallest_tv']:.3f}" in repairs[0].boundary


def test_every_boundary_violation_is_real_within_its_tv_and_misses_the_sufficient_condition(tmp_path):
    # reference: check_instance (exact enumeration over the d^(h+1) sequences) for the violation, stationary_distribution
    # by power iteration for the distance, and the proof chain for the condition (a proof: it cannot hold there)
    from bma_verify.numerics.thm3_stationary import condition_holds, proof_chain
    from bma_verify.reports.claims.thm3_init_gradient import boundary
    evidence = boundary.boundary_evidence(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    for cell in (c for c in evidence["cells"] if c["instance"] is not None):
        instance = cell["instance"]
        assert not check_instance(instance)["holds"]
        kernel = np.array(instance["kernel"])
        law = np.linalg.matrix_power(kernel.T, 4096) @ np.full(len(kernel), 1 / len(kernel))
        assert 0.5 * np.abs(np.array(instance["init"]) - law).sum() == pytest.approx(cell["smallest_tv"], abs=1e-9)
        assert np.min(kernel) >= cell["d_min_pi"] / cell["d"] - 1e-12
        if instance["form"] == "approximate":
            chain = proof_chain(kernel, np.array(instance["parents"]), instance["h"], np.array(instance["init"]))
            violated = chain["margin"] < 0
            assert violated.any() and not condition_holds(chain)[violated].any()
    assert boundary.boundary_holds(evidence) == (True, True)


def test_the_stationary_check_fails_when_the_sufficient_condition_misses_a_violation(monkeypatch, tmp_path):
    from bma_verify.reports.claims.thm3_init_gradient import boundary
    original = boundary.depth_sweep

    def broken(*args, **kwargs):
        out = original(*args, **kwargs)
        return dict(out, condition_violations=1)  # a case meeting the condition with J(h') ≥ J(pa)
    monkeypatch.setattr(boundary, "depth_sweep", broken)
    monkeypatch.setitem(boundary.BOUNDARY_SIZES, "quick", {"budget": 5, "depth_instances": 10})  # only the rule
    outcome = claim.stationary_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "fail" and outcome.holds_instead[0].status == "observed"


def test_the_condition_control_is_the_known_counterexample_and_is_rejected(stationary_outcome):
    control = stationary_outcome.control.measured["condition_on_counterexample"]
    assert control["instance"]["init"] == [0.4, 0.5, 0.1] and control["margin"] < 0
    assert not control["condition_met"] and control["widened_admits_violation"]


def test_a_refuted_finding_and_a_failing_summary_show_the_violating_instance_first(quick_outcomes):
    # reference: check_instance re-checks which stored instance violates each form (exact enumeration)
    refuted = quick_outcomes["pibar_check"].findings[1]
    violating = [i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3"
                 and not check_instance(dict(i, form="exact"))["holds"]]
    assert refuted.status == "refuted" and refuted.evidence.startswith(
        f"violated on the stored instance (chain, μ₀ = {violating[0]['init']}")
    assert "non-tie cases found none" in refuted.evidence  # where the sweep did not find one
    summary = quick_outcomes["exact_check"].summary
    j_violating = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3"
                       and not check_instance(dict(i, form="approximate"))["holds"])
    assert summary.index(f"μ₀ = {j_violating['init']}") < summary.index("the other stored instances hold")
