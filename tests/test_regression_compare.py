"""reports.regression.compare_results flags exactly the values that moved beyond their stated tolerance."""
import copy

import pytest

from bma_verify.reports.core import CheckOutcome
from bma_verify.reports.regression import compare_results


def _results(measured, tolerances=None, verdict="pass"):
    return {"claims": [{"id": "c", "checks": [{"function": "m:f", "kind": "exact", "reading": "as-stated", "verdict": verdict, "measured": measured,
                                               "tolerances": tolerances or {}}]}]}


REF = _results({"exact": 0.5, "mc": {"estimate": 1.0, "stderr": 0.1}, "n": 10, "curve": [1.0, 2.0]},
               tolerances={"mc": {"abs": 0.3}, "curve": {"rel": 0.1}})


def test_identical_results_do_not_move():
    assert compare_results(REF, copy.deepcopy(REF)) == []


def test_exact_value_moving_past_default_tolerance_is_flagged():
    new = copy.deepcopy(REF)
    new["claims"][0]["checks"][0]["measured"]["exact"] = 0.5 + 1e-6
    moved = compare_results(REF, new)
    assert len(moved) == 1 and "exact" in moved[0] and "0.500001" in moved[0]


def test_monte_carlo_value_within_its_parent_tolerance_is_not_flagged():
    new = copy.deepcopy(REF)
    new["claims"][0]["checks"][0]["measured"]["mc"]["estimate"] = 1.25  # tolerance of "mc" covers "mc.estimate"
    assert compare_results(REF, new) == []
    new["claims"][0]["checks"][0]["measured"]["mc"]["estimate"] = 1.35
    assert any("mc.estimate" in m for m in compare_results(REF, new))


def test_relative_tolerance_on_lists_and_exact_integers():
    new = copy.deepcopy(REF)
    new["claims"][0]["checks"][0]["measured"]["curve"] = [1.05, 2.1]
    assert compare_results(REF, new) == []
    new["claims"][0]["checks"][0]["measured"]["curve"] = [1.05, 2.5]
    new["claims"][0]["checks"][0]["measured"]["n"] = 11
    assert len(compare_results(REF, new)) == 2


def test_verdict_change_and_missing_values_are_flagged():
    new = copy.deepcopy(REF)
    new["claims"][0]["checks"][0]["verdict"] = "fail"
    del new["claims"][0]["checks"][0]["measured"]["n"]
    moved = compare_results(REF, new)
    assert any("verdict pass -> fail" in m for m in moved) and any("'n'" in m for m in moved)


def test_checks_are_matched_by_claim_kind_and_rank_not_by_where_their_code_lives():
    moved_code = copy.deepcopy(REF)
    moved_code["claims"][0]["checks"][0]["function"] = "elsewhere:g"
    assert compare_results(REF, moved_code) == []
    other_kind = copy.deepcopy(REF)
    other_kind["claims"][0]["checks"][0]["kind"] = "monte-carlo"
    assert compare_results(REF, other_kind) == ["c elsewhere:g: not in the reference report".replace("elsewhere:g", "m:f")]


def test_a_reason_that_changes_is_flagged_but_its_decimals_are_not():
    # the reason is compared with decimal numbers masked: the values are compared within their tolerances,
    # while the words and integer counts (seeds meeting the rule) must stay
    ref = copy.deepcopy(REF)
    ref["claims"][0]["checks"][0] |= {"verdict": "inconclusive",
                                      "reason": "count rule undecided: 2 of 3 seeds meet the rule, drop 0.0123 nats"}
    new = copy.deepcopy(ref)
    new["claims"][0]["checks"][0]["reason"] = "count rule undecided: 2 of 3 seeds meet the rule, drop 0.0131 nats"
    assert compare_results(ref, new) == []
    new["claims"][0]["checks"][0]["reason"] = "count rule undecided: 1 of 3 seeds meet the rule, drop 0.0131 nats"
    moved = compare_results(ref, new)
    assert len(moved) == 1 and "reason" in moved[0]


def test_records_inside_a_list_compare_their_numbers_within_tolerance():
    # a list of per-case records (as lemma3's Monte Carlo cases): a rounding-level move passes, a real one does not,
    # and a changed label or key is a move
    ref = _results({"cases": [{"case": "a", "ratio": 0.33021161676624580, "n": 3}]})
    new = copy.deepcopy(ref)
    new["claims"][0]["checks"][0]["measured"]["cases"][0]["ratio"] = 0.33021161676624560
    assert compare_results(ref, new) == []
    new["claims"][0]["checks"][0]["measured"]["cases"][0]["ratio"] = 0.3303
    assert len(compare_results(ref, new)) == 1
    new["claims"][0]["checks"][0]["measured"]["cases"][0] = {"case": "b", "ratio": 0.33021161676624580, "n": 3}
    assert len(compare_results(ref, new)) == 1
    new["claims"][0]["checks"][0]["measured"]["cases"][0] = {"case": "a", "ratio": 0.33021161676624580}
    assert len(compare_results(ref, new)) == 1


def _with_reason(reason, tolerances=None):
    results = copy.deepcopy(REF)
    check = results["claims"][0]["checks"][0]
    check |= {"verdict": "inconclusive", "reason": reason}
    if tolerances is not None:
        check["tolerances"] = {**check["tolerances"], **tolerances}
    return results


REASON = ("count rule undecided: 2 of 3 seeds meet the rule, 1 miss it, 0 within noise, 0 not converged "
          "(needs 3 of 3)")
HOST_MOVED = ("count rule undecided: 2 of 3 seeds meet the rule, 0 miss it, 0 within noise, 1 not converged "
              "(needs 3 of 3)")
DECLARED = {"reason": {"counts": "a seed's plateau statistic sits at its bound"}}


def test_reason_counts_move_only_where_the_check_declares_it():
    # footnote 1's case: a stuck seed moves from "miss" to "not converged" on another host. Undeclared, that is a
    # move; declared, only the words are compared, and changed words still move. The reference's declaration
    # decides, not the rerun's.
    assert len(compare_results(_with_reason(REASON), _with_reason(HOST_MOVED))) == 1
    assert compare_results(_with_reason(REASON), _with_reason(HOST_MOVED, DECLARED)) != []
    assert compare_results(_with_reason(REASON, DECLARED), _with_reason(HOST_MOVED)) == []
    reworded = HOST_MOVED.replace("count rule undecided", "converged seeds miss the rule")
    moved = compare_results(_with_reason(REASON, DECLARED), _with_reason(reworded))
    assert len(moved) == 1 and "reason" in moved[0]
    # the declaration masks the reason only: a measured count still compares exactly
    new = _with_reason(HOST_MOVED)
    new["claims"][0]["checks"][0]["measured"]["n"] = 11
    assert len(compare_results(_with_reason(REASON, DECLARED), new)) == 1


@pytest.mark.parametrize("tolerance", [{"counts": True}, {"counts": "why", "abs": 1}, "counts", {"abs": 0.1}])
def test_a_malformed_reason_tolerance_is_refused(tolerance):
    with pytest.raises(ValueError, match=r"tolerances\['reason'\]"):
        CheckOutcome(verdict="inconclusive", measured={}, tolerances={"reason": tolerance})
    with pytest.raises(ValueError, match="no measured value named 'reason'"):
        CheckOutcome(verdict="inconclusive", measured={"reason": 1}, tolerances=DECLARED)
    CheckOutcome(verdict="inconclusive", measured={"n": 1}, tolerances=DECLARED)  # the declared form is accepted


def test_a_text_value_declared_to_move_is_not_compared_but_the_numbers_beside_it_are():
    # a diagnostic's verdict at its plateau edge may read "inconclusive" on another CPU path: declared with why,
    # it is not compared; the same move undeclared is flagged, and a number under the same reading still is
    ref = _results({"diag": {"verdict": "fail", "kl": 0.06}},
                   tolerances={"diag.verdict": {"moves": "plateau test at its edge"}, "diag.kl": {"abs": 0.01}})
    new = copy.deepcopy(ref)
    new["claims"][0]["checks"][0]["measured"]["diag"]["verdict"] = "inconclusive"
    assert compare_results(ref, new) == []
    new["claims"][0]["checks"][0]["measured"]["diag"]["kl"] = 0.075
    assert [m for m in compare_results(ref, new) if "diag.kl" in m]
    undeclared = copy.deepcopy(ref)
    del undeclared["claims"][0]["checks"][0]["tolerances"]["diag.verdict"]
    moved = copy.deepcopy(undeclared)
    moved["claims"][0]["checks"][0]["measured"]["diag"]["verdict"] = "inconclusive"
    assert len(compare_results(undeclared, moved)) == 1


@pytest.mark.parametrize("tolerances", [{"x": {"moves": "why"}}, {"t": {"moves": 1}}, {"t": {"moves": "why", "abs": 1}},
                                        {"absent": {"moves": "why"}}])
def test_a_moves_tolerance_must_name_a_measured_text_value_with_its_reason(tolerances):
    # "moves" on a number would leave it uncompared (a check that cannot fail), so it is refused
    with pytest.raises(ValueError, match="moves"):
        CheckOutcome(verdict="pass", measured={"x": 1.0, "t": "fail"}, tolerances=tolerances)
    CheckOutcome(verdict="pass", measured={"x": 1.0, "t": "fail"}, tolerances={"t": {"moves": "why"}})


def _model_check(verdict, reason, value=0.5, kind="model"):
    out = _results({"gap": value}, tolerances={"gap": {"abs": 0.01}}, verdict=verdict)
    out["claims"][0]["checks"][0].update(kind=kind, reason=reason)
    return out


@pytest.mark.parametrize("ref, new, kind, tolerated", [
    ("inconclusive", "pass", "model", True),  # a seed at a transition settled on this processor
    ("fail", "inconclusive", "model", True),
    ("pass", "fail", "model", False),  # a decided verdict turning into the opposite always counts
    ("inconclusive", "pass", "exact", False),  # only trained runs settle differently
])
def test_on_another_processor_only_a_trained_verdict_that_moves_to_or_from_inconclusive_is_set_aside(
        ref, new, kind, tolerated):
    reference, current = _model_check(ref, "2 of 3 seeds", kind=kind), _model_check(new, "3 of 3 seeds", kind=kind)
    aside = []
    moved = compare_results(reference, current, other_processor=aside)
    assert (aside != [] and moved == []) if tolerated else (aside == [] and "verdict" in moved[0])
    assert compare_results(reference, current) != []  # on the reference's processor every move counts


def test_on_another_processor_reasons_go_aside_and_values_still_count():
    aside = []
    moved = compare_results(_model_check("pass", "3 of 3 seeds"), _model_check("pass", "2 of 3 seeds", value=0.52),
                            other_processor=aside)
    assert len(aside) == 1 and "reason" in aside[0] and len(moved) == 1 and "gap moved" in moved[0]


def test_cpu_identity_reads_the_first_processor_block():
    # reference: a /proc/cpuinfo excerpt written out by hand
    from bma_verify.reports.float_path import cpu_identity
    info = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
            "model name\t: Intel(R) Xeon(R) Platinum\nflags\t\t: fpu sse avx avx2 fma avx512f amx_tile\n\n"
            "processor\t: 1\nvendor_id\t: AuthenticAMD\n")
    assert cpu_identity(info) == "GenuineIntel 6/143: Intel(R) Xeon(R) Platinum [avx avx2 fma avx512f amx_tile]"
    assert cpu_identity("") is None


def _with_seeds(values, tolerance=0.01):
    out = _model_check("pass", "")
    check = out["claims"][0]["checks"][0]
    check["tolerances"]["lpa"] = {"abs": tolerance}
    check["seeds"] = {"metrics": {"lpa": {"values": values}, "untoleranced": {"values": values}}}
    return out


def test_every_seeds_value_is_compared_within_its_tolerance_on_the_reference_processor():
    # reference: seed values moved by hand, one within the stated tolerance of 0.01 and one beyond it
    reference = _with_seeds([0.1, 0.2, 0.3])
    assert compare_results(reference, _with_seeds([0.1, 0.205, 0.3])) == []
    moved = compare_results(reference, _with_seeds([0.1, 0.2, 0.5]))
    assert len(moved) == 1 and "seeds' lpa moved" in moved[0]  # 'untoleranced' is not compared seed by seed
    assert compare_results(reference, _with_seeds([0.1, 0.2, 0.5]), other_processor=[]) == []
