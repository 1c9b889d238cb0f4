"""lemma3-strict-dpi: the symbolic check on a user's kernel, the exact check and the α candidates on the shared
sweep, the Monte Carlo check, their controls, findings and what settle makes of an accepted control."""
from __future__ import annotations

import types

import numpy as np
import pytest

import bma_verify.reports.checks.numeric_common as numeric_common
import bma_verify.reports.claims.lemma3_strict_dpi.claim as claim
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, check_instance

SMALL = {"lemma3_instances": 24, "lemma3_chunk": 24, "mc_instances": 2, "mc_samples": 20_000}


@pytest.fixture(scope="module")
def quick_outcomes(tmp_path_factory):
    """Every numeric check once on the quick tier, seed 0 (the reference report's), sharing one context."""
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path_factory.mktemp("figures"))
    return {name: getattr(claim, name)(ctx) for name in ("exact_check", "alpha_candidates_check",
                                                         "monte_carlo_check")}


def test_symbolic_check_evaluates_a_users_kernel():
    kernel = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])
    outcome = claim.symbolic_check(CheckContext(tier="quick", seed=0, options={"kernel": kernel}))
    # Independent: the definitions evaluated directly in NumPy.
    tv = max(0.5 * np.abs(kernel[i] - kernel[j]).sum() for i in range(3) for j in range(3))
    assert outcome.measured["user_kernel"]["alpha_dobrushin"] == pytest.approx(tv, abs=1e-14)
    assert outcome.measured["user_kernel"]["alpha_doeblin"] == pytest.approx(1 - 3 * kernel.min(), abs=1e-14)
    assert outcome.control.rejected


def test_the_alpha_candidates_are_the_stronger_reading():
    readings = {check.run.__name__: check.reading for check in claim.CLAIM.checks}
    assert readings["alpha_candidates_check"] == "stronger"
    assert readings["exact_check"] == readings["monte_carlo_check"] == "as-stated"


@pytest.mark.slow
def test_every_numeric_check_rejects_its_control_in_the_quick_tier(quick_outcomes):
    for name, outcome in quick_outcomes.items():
        assert outcome.control is not None and outcome.control.rejected, (name, outcome.control)
        if name == "alpha_candidates_check":
            assert outcome.verdict == "fail"  # a stronger reading of ours, refuted (findings below)
        else:
            assert settle(outcome) == ("pass", ""), (name, outcome.verdict, outcome.summary)


@pytest.mark.slow
def test_alpha_candidates_refute_dobrushin_with_the_stored_chain_and_keep_doeblin(quick_outcomes):
    # δ(π) is refuted by the smallest stored instance (the chain x_0 → x_1 → x_2), replayable by check_instance;
    # the Doeblin bound holds on every sweep pair; η_KL of the pair's own channel is a consistency check, not a finding
    outcome = quick_outcomes["alpha_candidates_check"]
    dobrushin, doeblin, doeblin_ancestor, channel, proved = outcome.findings
    assert dobrushin.status == "refuted" and "δ(π)" in dobrushin.statement
    assert dobrushin.instance["parents"] == KNOWN_COUNTEREXAMPLES[1]["parents"] == [-1, 0, 1]
    assert not check_instance(dobrushin.instance)["holds"]
    assert doeblin.status == doeblin_ancestor.status == channel.status == "holds"
    assert outcome.measured["consistency"]["sdpi_violations"] == 0
    assert not any("η_KL" in f.statement.split(",")[0] for f in outcome.findings)
    assert outcome.control.measured["holds"] is False
    # the split: α* is proved (every step's slack ≥ 0, its perturbed steps rejected), Doeblin on ancestor pairs is
    # only observed (reference for the steps: tests/test_lemma3_alpha.py, against enumerated joints)
    assert proved.status == "holds" and "proved" in proved.statement and "rejected: True" in proved.evidence
    assert "observed, not proved" in doeblin_ancestor.statement
    split = outcome.measured["alpha_proved"]
    assert "1 − d·min π when h' is an ancestor of pa(h)" in split["observed"]
    assert min(split["min_slack"].values()) >= -1e-12 and split["max_ratio_over_alpha"] < 1
    assert all(s["ratio"] > s["dobrushin"] and s["relation"] == "ancestor" for s in split["stored"])
    assert all(split["symbolic"]["identities"].values()) and split["symbolic"]["max_abs_error"] < 1e-12


@pytest.mark.slow
def test_the_monte_carlo_close_call_is_within_a_few_standard_errors(quick_outcomes):
    margin = quick_outcomes["monte_carlo_check"].measured["close_call"]["margin_in_stderr"]
    assert 2.5 < margin < 8, margin


def _small(monkeypatch) -> None:
    for key, value in SMALL.items():
        monkeypatch.setitem(numeric_common.SIZES["quick"], key, value)


def _not_discriminating(outcome) -> None:
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control is not None and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_exact_check_with_a_kernel_inside_the_hypothesis_as_control_is_not_discriminating(monkeypatch, tmp_path):
    _small(monkeypatch)
    monkeypatch.setattr(claim, "COPY_CONTROL", dict(claim.COPY_CONTROL, kernel=[[0.9, 0.1], [0.1, 0.9]]))
    _not_discriminating(claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_alpha_candidates_with_alpha_above_the_ratio_are_not_discriminating(monkeypatch, tmp_path):
    # α above the ratio; no stored counterexample, so the check can pass
    _small(monkeypatch)
    monkeypatch.setattr(claim, "PLANTED_ALPHA_SHORTFALL", -1e-3)
    monkeypatch.setattr(numeric_common, "KNOWN_COUNTEREXAMPLES", ())
    _not_discriminating(claim.alpha_candidates_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


def test_monte_carlo_check_with_alpha_above_the_ratio_is_not_discriminating(monkeypatch, tmp_path):
    # α 3 standard errors above the exact ratio
    _small(monkeypatch)
    monkeypatch.setattr(claim, "PLANTED_STDERRS", -3.0)
    _not_discriminating(claim.monte_carlo_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path)))


#: The full tier's near-independent pair (seed 0, "random 0"): I(x_h; x_h') = 4.4e-8 nats, I(x_h; x_pa) = 1.5e-4,
#: exact ratio 3e-4; the delta method's interval collapsed there (|z| = 10 on the Miller–Madow numerator).
NEAR_INDEPENDENT = {"kernel": [[0.20581465211269923, 0.7941853478873008], [0.18856502295256855, 0.8114349770474314]],
                    "parents": [-1, 0, 0, 1, 0, 3], "h": 2, "h_prime": 1}


def test_monte_carlo_rule_near_independence_agrees_with_the_exact_values():
    # over 20 seeded samples of 100 000 chains: every estimate within 4 (G-law) standard deviations of its exact
    # value; 2n·I(x_h; x_pa) = 29 does not resolve the ratio, which is therefore not judged against 1
    spec = NEAR_INDEPENDENT
    verdicts = []
    for seed in range(20):
        case = claim.lemma3_mc_case("near independence", np.array(spec["kernel"]), np.array(spec["parents"]), None,
                                     spec["h"], spec["h_prime"], 100_000, np.random.default_rng(seed))
        assert case["max_abs_z"] <= numeric_common.Z_AGREE, case
        verdicts.append(case["verdict"])
    assert set(verdicts) == {"unresolved"}


def test_a_pair_whose_parent_information_is_not_resolved_is_not_judged():
    spec = NEAR_INDEPENDENT
    case = claim.lemma3_mc_case("near independence", np.array(spec["kernel"]), np.array(spec["parents"]), None,
                                 spec["h"], spec["h_prime"], 2_000, np.random.default_rng(0))
    assert case["verdict"] == case["control_verdict"] == "unresolved"
    # an estimate far from its exact value still reads inconclusive on an unresolved pair
    wide = types.SimpleNamespace(low=0.0, high=2.0)
    assert claim.judge_ratio({"x": 5.0}, wide, 1.0, resolved=False) == "inconclusive"


@pytest.mark.slow
def test_monte_carlo_positive_control_is_the_exact_ratios_and_passes(quick_outcomes):
    outcome = quick_outcomes["monte_carlo_check"]
    positive = outcome.positive_control
    assert positive.passed, positive
    # a pair the sample size cannot resolve is left out of the ideal as of the real verdict
    assert [v == "unresolved" for v in positive.measured["verdicts"]] == [
        v == "unresolved" for v in outcome.measured["instance_verdicts"]]



@pytest.mark.slow
def test_exact_positive_control_is_an_enumerated_chain_and_passes(quick_outcomes):
    positive = quick_outcomes["exact_check"].positive_control
    assert positive.passed and 0 < positive.measured["max_ratio"] < 0.9, positive


def test_an_ideal_outside_the_hypothesis_fails_the_exact_positive_control(monkeypatch, tmp_path):
    # Planted wrong ideal: flip probability 0 (the copy kernel, ε = 0), where the ratio is exactly 1.
    monkeypatch.setitem(claim.FLIP_POSITIVE, "flip", 0.0)
    monkeypatch.setitem(numeric_common.SIZES, "quick", {**numeric_common.SIZES["quick"], "lemma3_instances": 24,
                                                        "lemma3_chunk": 24})
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert not outcome.positive_control.passed and outcome.positive_control.measured["max_ratio"] == pytest.approx(1.0)
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]


def test_what_holds_instead_of_dobrushin_is_alpha_star_proved_and_doeblin_observed(quick_outcomes):
    # reference: the stored δ(π) refutations re-checked by check_instance (exact pairwise joints), and α* from its
    # closed form 1 − ε/(1 − (d − 1)ε) written out here
    outcome = quick_outcomes["alpha_candidates_check"]
    proved, observed = outcome.holds_instead
    dobrushin = outcome.findings[0]
    assert proved.replaces == observed.replaces == dobrushin.statement
    assert (proved.status, observed.status) == ("proved", "observed") and "α*" in proved.statement
    assert "ancestor" in observed.statement and "1 − d·min π" in observed.statement
    for instance in (i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "lemma3"):
        eps, d = min(map(min, instance["kernel"])), len(instance["kernel"])
        ratio = check_instance(dict(instance, alpha="dobrushin"))["ratio"]
        alpha_star = 1 - eps / (1 - (d - 1) * eps)
        assert ratio < alpha_star
        assert f"ratio {ratio:.4f} against δ(π)" in proved.evidence[2] and f"α* = {alpha_star:.4f}" in proved.evidence[2]


def test_no_repair_is_recorded_when_dobrushin_is_not_refuted():
    findings = [claim.Finding(f"f{i}", "holds") for i in range(5)]
    assert claim.alpha_holds_instead(findings, {}, 0) == []
