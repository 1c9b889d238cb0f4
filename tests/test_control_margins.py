"""Negative controls strictly on the false side of their bar (issue 39): a control judged against a bar equal to itself
is not a control.

Compared against: the rule's own threshold, recorded beside each control (``reports.core.ControlMargin``: the
control's decisive number, the bar the rule compares it with, which side passes); ``reports.core.settle`` on planted
outcomes; the committed reference report (reports/reference/results.json) once it is regenerated with margins; and
fresh outcomes of a few exact checks (quick tier, seed 0, seconds each). Positive controls are held to passing by
tests/test_positive_controls.py and tests/test_regression.py (reference); here only on the fresh outcomes.
"""
import json
from dataclasses import replace
from pathlib import Path

import pytest

import bma_verify.reports.claims.bma_score_identity.claim as BSI
import bma_verify.reports.claims.ext_dag_construction.claim as DC
import bma_verify.reports.claims.ext_dag_posterior.claim as DP
import bma_verify.reports.claims.ext_selective_claim1.claim as C1
import bma_verify.reports.claims.ext_selective_fig3.claim as SF3
import bma_verify.reports.claims.footnote1_selective_induction.claim as F1
import bma_verify.reports.claims.lemma3_strict_dpi.claim as L3
import bma_verify.reports.claims.prop1_invariance.claim as P1
import bma_verify.reports.claims.thm1_construction.claim as T1
from bma_verify.reports.core import (AT_ITS_BAR, NOT_DISCRIMINATING, CheckContext, CheckOutcome, Control, ControlMargin,
                                     PositiveControl, settle)
from bma_verify.reports.registry import CLAIMS

REFERENCE = Path(__file__).resolve().parents[1] / "reports" / "reference" / "results.json"

#: Non-symbolic checks whose negative control is not one number against one bar, and why; their controls record no
#: margin. Symbolic checks are left out as a kind: their rule is a residual that simplifies to exactly 0 (a symbolic
#: fact, not a number near a threshold), and their control runs the same derivation with one term planted wrong.
NO_BAR = {
    "bma_verify.reports.claims.thm2_consistency.claim:limit_check":
        "its rule compares two Wilson intervals of one curve (at the largest L and at a quarter of it), not a number "
        "with a fixed threshold; the control records each instance's verdict",
    "bma_verify.reports.claims.thm3_init_gradient.claim:stationary_check":
        "its control perturbs each proof step (a symbolic identity, two bounds, η for √η, the identity with the "
        "wrong law), each caught by its own rule and recorded with its own slack: several bars, not one",
    "bma_verify.reports.claims.thm3_init_gradient.claim:monte_carlo_check":
        "its rule is a verdict per instance (z against the exact value, then a 95% interval against 0), combined; "
        "the control records those verdicts",
    "bma_verify.reports.claims.lemma3_strict_dpi.claim:monte_carlo_check":
        "its rule is a verdict per instance (z against the exact ratio, then an interval against 1) under a planted α "
        "per instance, combined; the control records those verdicts",
}


def _checks():
    """(claim id, function name 'module:function', kind) of every registered check that does not cite another."""
    return [(claim.id, check.function, check.kind)
            for claim in CLAIMS for check in claim.checks if not check.cites]


def _distance(margin: dict) -> float:
    # recomputed from value, bar and side: the recorded "distance" is not trusted
    return margin["value"] - margin["bar"] if margin["passes_below"] else margin["bar"] - margin["value"]


# ---------------------------------------------------------------------------------------------------------------
# The margin itself

def test_distance_is_how_far_the_control_sits_on_the_false_side_of_either_kind_of_bar():
    # against the rule read by hand: a ceiling (errors) fails above its bar, a floor (rates) below it
    assert ControlMargin("error", 0.3, 0.1).distance == pytest.approx(0.2)
    assert ControlMargin("error", 0.05, 0.1).distance == pytest.approx(-0.05)
    assert ControlMargin("rate", 0.5, 0.95, passes_below=False).distance == pytest.approx(0.45)
    assert ControlMargin("rate", 1.0, 0.95, passes_below=False).distance == pytest.approx(-0.05)


def test_a_band_moves_the_bar_to_the_edge_where_the_rule_fails():
    # against reports.checks.trained.threshold_side: 'fail' only beyond threshold ± band
    assert ControlMargin.beyond_band("gap", 0.062, 0.028, 0.003).bar == pytest.approx(0.031)
    floor = ControlMargin.beyond_band("accuracy", 0.5, 0.8, 0.01, upper=False)
    assert floor.bar == pytest.approx(0.79) and not floor.passes_below and floor.distance == pytest.approx(0.29)


@pytest.mark.parametrize("kwargs, name", [
    ({"quantity": "", "value": 1.0, "bar": 0.0}, "quantity"),
    ({"quantity": "x", "value": float("nan"), "bar": 0.0}, "value"),
    ({"quantity": "x", "value": True, "bar": 0.0}, "value"),
    ({"quantity": "x", "value": 1.0, "bar": float("inf")}, "bar"),
    ({"quantity": "x", "value": 1.0, "bar": "0.1"}, "bar"),
    ({"quantity": "x", "value": 1.0, "bar": 0.0, "passes_below": "yes"}, "passes_below"),
    ({"quantity": "x", "value": 1.0, "bar": 0.0, "units": 3}, "units"),
])
def test_a_margin_refuses_what_is_not_a_finite_number_against_a_finite_bar(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ControlMargin(**kwargs)


def test_a_negative_band_and_a_margin_of_the_wrong_type_are_refused():
    with pytest.raises(ValueError, match="band"):
        ControlMargin.beyond_band("gap", 0.1, 0.028, -0.003)
    with pytest.raises(ValueError, match="margin"):
        Control("planted", {}, True, margin={"value": 1.0, "bar": 0.0})


def test_the_margin_lands_in_results_json_with_its_distance_and_null_where_unset():
    # against the dataclass: results.json gets every field plus the derived distance
    margin = ControlMargin("max_abs_error", 0.75, 1e-10, units="nats")
    assert Control("planted", {}, True, margin=margin).as_dict()["margin"] == {
        "quantity": "max_abs_error", "value": 0.75, "bar": 1e-10, "passes_below": True, "units": "nats",
        "distance": 0.75 - 1e-10}
    assert Control("planted", {}, True).as_dict()["margin"] is None


# ---------------------------------------------------------------------------------------------------------------
# settle: a control at its bar does not earn a pass

def _passing(margin: ControlMargin | None) -> CheckOutcome:
    return CheckOutcome(verdict="pass", measured={"error": 0.0}, threshold=0.1,
                        control=Control("planted", {"error": 0.1}, rejected=True, margin=margin),
                        positive_control=PositiveControl("ideal", {"error": 0.0}, True))


@pytest.mark.parametrize("value", [0.1, 0.05])
def test_a_pass_whose_control_sits_at_or_inside_its_bar_is_inconclusive(value):
    # against the rule: a control equal to its bar (or on the true side), even if its rule said "rejected"
    # (a strict rule, ratio < bar), cannot tell the claim from its negation
    verdict, reason = settle(_passing(ControlMargin("error", value, 0.1)))
    assert verdict == "inconclusive" and reason.startswith(f"{NOT_DISCRIMINATING}, {AT_ITS_BAR}"), reason


def test_a_pass_whose_control_sits_strictly_beyond_its_bar_or_records_none_stands():
    assert settle(_passing(ControlMargin("error", 0.1 + 1e-12, 0.1))) == ("pass", "")
    assert settle(_passing(None)) == ("pass", "")


def test_the_bar_does_not_turn_a_fail_into_anything_else():
    outcome = replace(_passing(ControlMargin("error", 0.1, 0.1)), verdict="fail")
    assert settle(outcome) == ("fail", "")


# ---------------------------------------------------------------------------------------------------------------
# The declared exceptions and the reference

def test_the_checks_declared_without_a_bar_are_real_non_symbolic_checks():
    # against the registry: an exception for a check that is gone, or symbolic, would hide nothing and rot
    kinds = {name: kind for _, name, kind in _checks()}
    assert all(kinds.get(name) not in (None, "symbolic") for name in NO_BAR), NO_BAR


def _reference_checks():
    results = json.loads(REFERENCE.read_text())
    return [(claim["id"], check) for claim in results["claims"] for check in claim["checks"] if not check["cites"]]


def margin_problems(checks) -> tuple[list[str], list[str]]:
    """(controls at or inside their bar, non-symbolic controls with neither a margin nor a declared reason) among
    results.json check entries ``(claim id, check)``."""
    at_bar, missing = [], []
    for claim, check in checks:
        margin = (check["control"] or {}).get("margin")
        if margin is not None and not (_distance(margin) > 0 and margin["value"] != margin["bar"]):
            at_bar.append(f"{claim}: {check['function']} ({margin})")
        if margin is None and check["kind"] != "symbolic" and check["function"] not in NO_BAR:
            missing.append(f"{claim}: {check['function']}")
    return at_bar, missing


def test_every_reference_control_with_a_margin_sits_strictly_beyond_its_bar_and_the_others_are_declared():
    # against the committed reference report; it holds once the reference is regenerated with ControlMargin (before
    # that the reference has no margin key and the test says so)
    checks = _reference_checks()
    if not any("margin" in (check["control"] or {}) for _, check in checks):
        pytest.skip("reports/reference/results.json predates ControlMargin: regenerate it (make reference)")
    at_bar, missing = margin_problems(checks)
    assert not at_bar, f"controls at or inside their bar: {at_bar}"
    assert not missing, f"non-symbolic controls with neither a margin nor a declared reason: {missing}"


def test_the_reference_test_catches_a_control_at_its_bar_and_an_undeclared_one():
    # against a planted copy of the reference entries: margins at 1 beyond their bar pass; one moved onto its bar, and
    # one non-symbolic control stripped of its margin, are each named
    checks = [(claim, json.loads(json.dumps(check))) for claim, check in _reference_checks()]
    for _, check in checks:
        check["control"]["margin"] = {"quantity": "x", "value": 1.0, "bar": 0.0, "passes_below": True}
    assert margin_problems(checks) == ([], [])
    non_symbolic = [check for _, check in checks if check["kind"] != "symbolic" and check["function"] not in NO_BAR]
    non_symbolic[0]["control"]["margin"]["value"] = 0.0
    non_symbolic[1]["control"]["margin"] = None
    at_bar, missing = margin_problems(checks)
    assert [non_symbolic[0]["function"]] == [a.split(": ")[1].split(" ")[0] for a in at_bar]
    assert [non_symbolic[1]["function"]] == [m.split(": ")[1] for m in missing]


# ---------------------------------------------------------------------------------------------------------------
# Fresh outcomes: the new code path on checks that run in seconds

CHEAP = {
    "bma-score-identity exact": BSI.exact_check,
    "bma-score-identity model": BSI.model_check,
    "prop1 exact": P1.exact_check,
    "thm1 rate": T1.rate_check,
    "ext-dag-posterior": DP.ext_dag_posterior,
    "ext-dag-construction model": DC.ext_dag_construction_model,
    "ext-selective-claim1 exact (a floor)": C1.claim1_exact,
    "ext-selective-fig3": SF3.fig3_comparison,
    "footnote1 exact": F1.footnote1_selective_induction,
    # the copy kernel's ratio 1 against the strict rule ratio < 1 − 1e-9: a near miss 1e-9 beyond its bar
    "lemma3 exact": L3.exact_check,
}


@pytest.fixture(scope="module")
def cheap_outcomes(tmp_path_factory):
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path_factory.mktemp("figures"))
    return {name: check(ctx) for name, check in CHEAP.items()}


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_a_fresh_control_records_its_bar_and_sits_strictly_beyond_it(cheap_outcomes, name):
    # against the check's own threshold: the margin's bar is the number the check reports as its threshold, and the
    # control's decisive number lies strictly on the false side of it
    outcome = cheap_outcomes[name]
    margin = outcome.control.margin
    assert margin is not None and margin.distance > 0 and margin.value != margin.bar, margin
    assert margin.quantity in json.dumps(outcome.control.measured), (margin.quantity, outcome.control.measured)
    assert outcome.control.rejected and outcome.positive_control.passed
    assert outcome.control.as_dict()["margin"]["distance"] == margin.distance
    assert settle(outcome) == (outcome.verdict, outcome.reason)


def test_a_fresh_check_whose_control_is_moved_onto_its_bar_does_not_pass(cheap_outcomes):
    # against settle: the same outcome with its control's number set to the bar (as a rule that flips on rounding
    # would see it) loses its pass
    outcome = cheap_outcomes["bma-score-identity exact"]
    assert settle(outcome) == ("pass", "")
    on_bar = replace(outcome.control.margin, value=outcome.control.margin.bar)
    verdict, reason = settle(replace(outcome, control=replace(outcome.control, margin=on_bar)))
    assert verdict == "inconclusive" and AT_ITS_BAR in reason
