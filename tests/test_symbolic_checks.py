"""Tests of the machinery shared by every symbolic check (``reports.checks.symbolic``): every symbolic claim check
runs, passes, records kind ``symbolic`` with its seconds and fits the quick-tier budget (< 60 s on one core from a
cold cache).

Negative controls: each check applies the shared decision (residuals exactly 0 AND numerics within tolerance) to a
perturbed derived expression (its ``SymbolicCheck.perturbation``) and must reject it; with the perturbation removed
(the control is then the true expression) the control is accepted, so ``reports.core.settle`` must withhold the
pass as ``inconclusive (not discriminating)``. The control's path with nothing planted must pass the same decision
(else the control is not rejected for what was planted); a wrong derived result still reads ``fail``. Tests of one
claim's symbolic check live in tests/claims/.
"""
from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from bma_verify import theory
from bma_verify.reports.builder import run_claims
from bma_verify.reports.checks import symbolic
from bma_verify.reports.checks.symbolic import SymbolicCheck
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from bma_verify.reports.registry import CLAIMS
from bma_verify.theory.derivation import DEFAULT_TOLERANCE


def _symbolic_spec(check) -> tuple[object, str] | None:
    """The module of a check and the name of its SymbolicCheck constant, when it runs the shared machinery."""
    module = sys.modules[check.run.__module__]
    names = [name for name, value in vars(module).items() if isinstance(value, SymbolicCheck)]
    return (module, names[0]) if len(names) == 1 else None


SYMBOLIC_CHECKS = [(claim, check) for claim in CLAIMS for check in claim.checks
                   if check.kind == "symbolic" and _symbolic_spec(check) is not None]
CLAIM_IDS = [claim.id for claim, _ in SYMBOLIC_CHECKS]


def _check(claim_id: str):
    return next(check for claim, check in SYMBOLIC_CHECKS if claim.id == claim_id)


def _quick(claim_id: str):
    return _check(claim_id).run(CheckContext(tier="quick", seed=0))


def _clear_caches():
    for name in theory.__all__:
        if name.startswith(("derive_", "perturb_")):
            getattr(theory, name).cache_clear()


def _unperturbed(results):
    """The perturbation removed: the control is the derived (true) expression itself."""
    return {}


def test_every_paper_symbolic_check_runs_the_shared_machinery():
    paper = [(claim.id, check) for claim in CLAIMS if claim.section == "paper" for check in claim.checks
             if check.kind == "symbolic"]
    assert len(paper) == 8
    for claim_id, check in paper:
        module, name = _symbolic_spec(check)
        assert getattr(module, name).claim == claim_id


@pytest.mark.slow
def test_all_symbolic_checks_pass_in_the_quick_tier():
    # Cold start (every SymPy derivation rebuilt); the 60 s budget is measured in benchmarks/bench_theory.py.
    _clear_caches()
    paper = [claim for claim in CLAIMS if claim.section == "paper"]  # the ext-* symbolic checks live elsewhere
    records = run_claims(paper, CheckContext(tier="quick", seed=0), kinds=["symbolic"])
    checks = [(r["id"], c) for r in records for c in r["checks"]]
    assert len(checks) == 8
    for claim_id, check in checks:
        assert check["kind"] == "symbolic"
        # The settled verdict: a pass here also means the builder saw the control rejected.
        assert check["verdict"] == "pass", (claim_id, check["summary"], check["error"], check["reason"])
        assert check["control"]["rejected"] is True
        assert check["seconds"] > 0
        assert check["derivation"] and all(len(step) == 2 for step in check["derivation"])
        assert check["measured"]["identities_hold"] is True
        assert check["measured"]["max_abs_error"] <= check["threshold"]["max_abs_error"]
    json.dumps(records)  # results.json must be able to hold them


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_control_is_rejected_by_both_the_residuals_and_the_numerics(claim_id):
    # Compared against: the perturbed expression (a dropped term, an exponent x4, a transposed kernel) must make
    # at least one re-derived identity fail AND at least one numeric comparison miss by far more than rounding.
    outcome = _quick(claim_id)
    assert outcome.verdict == "pass", outcome.summary
    control = outcome.control
    assert control is not None and control.rejected, control
    assert control.measured["identities_failed"], control.measured
    missed = {**control.measured["errors_over_tolerance"], **{k: -v for k, v in
                                                               control.measured["negative_slacks"].items()}}
    assert missed and max(missed.values()) > 1e-4, control.measured
    assert settle(outcome) == ("pass", "")
    assert "Control (" in outcome.summary and "rejected" in outcome.summary
    json.dumps(control.as_dict())


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_unperturbed_control_is_accepted_so_the_pass_is_withheld(claim_id, monkeypatch):
    # Compared against: with the perturbation removed the control is the true derived expression, so the same
    # decision accepts it; a check whose control is accepted cannot tell the claim from its negation.
    module, name = _symbolic_spec(_check(claim_id))
    monkeypatch.setattr(module, name, dataclasses.replace(getattr(module, name), perturbation=_unperturbed))
    outcome = _quick(claim_id)
    assert outcome.verdict == "pass"
    assert not outcome.control.rejected, outcome.control
    assert outcome.control.measured["identities_failed"] == []
    assert outcome.control.measured["errors_over_tolerance"] == {}
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_zero_by_construction_residuals_are_shown_but_not_counted():
    # Compared against: the residuals that are an expression minus itself once unfolded (L* substituted back into
    # the equation it solves; the monomials of a split put back together) are listed under "definitions" only.
    thm2 = _quick("thm2-consistency").measured
    assert "definition union_at_sufficient_L_minus_target = 0" in thm2["definitions"]
    assert not any("union_at_sufficient_L" in name for name in thm2["identities"])
    ds = _quick("prop2-ds-quadratic").measured
    assert "definition split_reassembles = 0" in ds["definitions"]
    assert not any("split_reassembles" in name for name in ds["identities"])
    # The α candidates of Lemma 3 are definitions typed in on both sides: their comparison is listed apart.
    lemma3 = _quick("lemma3-strict-dpi").measured
    assert {"alpha_dobrushin", "alpha_doeblin", "dobrushin_d2"} <= set(lemma3["definition_errors"])
    assert not {"alpha_dobrushin", "alpha_doeblin"} & set(lemma3["errors"])


def test_regression_tolerances_bound_rounding_errors_without_pinning_them():
    # Compared against: the verifier's own tolerance (the effect the regression guards) and the rounding level of
    # the errors (1.6e-14 at most): the regression bound sits between the two.
    outcome = _quick("prop2-ds-quadratic")
    bound = outcome.tolerances["errors"]["abs"]
    assert 1000 * outcome.measured["max_abs_error"] <= bound <= DEFAULT_TOLERANCE


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_the_control_path_accepts_the_unperturbed_formula(claim_id):
    # Compared against: the control's own path (perturb, re-derived identities, verify at the same points) with
    # nothing planted: every identity holds and every comparison is within rounding, so the rule passes it.
    outcome = _quick(claim_id)
    unplanted = outcome.control.measured["same_path_unplanted"]
    assert unplanted["passed"] and outcome.control.rejected, unplanted
    assert unplanted["identities_failed"] == [] and unplanted["errors_over_tolerance"] == {}
    assert unplanted["max_abs_error"] <= unplanted["tolerance"]
    assert outcome.positive_control is None and settle(outcome) == ("pass", "")
    json.dumps(outcome.control.as_dict())


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_a_control_path_that_rejects_the_true_formula_cannot_reject_the_control(claim_id, monkeypatch):
    # Planted: the "nothing planted" path carries the check's own wrong formula (its negative control's perturbation),
    # so the path rejects everything: the control is not counted as rejected and the pass is withheld.
    module, name = _symbolic_spec(_check(claim_id))
    monkeypatch.setattr(symbolic, "nothing_planted", getattr(module, name).perturbation)
    outcome = _quick(claim_id)
    assert outcome.verdict == "pass" and not outcome.control.measured["same_path_unplanted"]["passed"]
    assert not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


@pytest.mark.parametrize("claim_id", CLAIM_IDS)
def test_a_wrong_derived_result_still_reads_fail_beside_its_positive_control(claim_id, monkeypatch):
    # The check's derive replaced by the control's wrong expression: the verdict is fail and stays fail after
    # settle, since the positive control re-derives through theory's own perturb path (nothing planted).
    module, name = _symbolic_spec(_check(claim_id))
    real = getattr(module, name)
    monkeypatch.setattr(module, name, dataclasses.replace(
        real, derive=lambda *args: real.perturb(*args, perturbation=real.perturbation)))
    outcome = _quick(claim_id)
    assert outcome.verdict == "fail" and settle(outcome) == ("fail", "")
