"""The counterexample search (reports.search) finds and shrinks planted violations; instances re-check."""
import itertools
import json

import mpmath
import numpy as np
import pytest

from bma_verify import numerics as nm
from bma_verify.numerics.enumeration import brute_force_joint
from bma_verify.numerics.gradient import chi2_gain
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, check_instance, run_search
from tests.test_gradient import brute_force_init_gradient


def test_search_finds_and_shrinks_a_planted_wrong_alpha():
    # α = 0.05 is far below typical ratios: the search must find a violation and shrink it to the simplest
    # shape the strategies allow (d = 2, the shortest tree H = 3)
    result = run_search("lemma3", budget=200, seed=0, alpha=0.05)
    assert result["found"]
    instance = result["instance"]
    assert len(instance["kernel"]) == 2 and len(instance["parents"]) == 3
    recheck = check_instance(json.loads(json.dumps(instance)))  # the JSON round trip is what the CLI does
    assert not recheck["holds"] and recheck["verdict"] == "fail"
    assert recheck["ratio"] > 0.05
    # independent recomputation of the ratio from the foundation's joints
    kernel, parents = np.array(instance["kernel"]), np.array(instance["parents"])
    init = None if instance["init"] is None else np.array(instance["init"])
    h, hp = instance["h"], instance["h_prime"]
    ratio = (nm.mutual_information(nm.pairwise_joint(kernel, parents, hp, h, init))
             / nm.mutual_information(nm.pairwise_joint(kernel, parents, parents[h], h, init)))
    assert ratio == pytest.approx(recheck["ratio"], rel=1e-10)


def test_search_without_a_violation_reports_the_closest_call():
    result = run_search("lemma3", budget=30, seed=1, alpha="dobrushin_channel")  # a theorem: never violated
    assert not result["found"] and result["instance"] is None
    assert result["closest"]["score"] <= 1e-9
    assert "no counterexample in 30 examples" in result["message"]
    assert check_instance(result["closest"]["instance"])["holds"]


def test_thm3_search_runs_and_its_closest_call_rechecks():
    result = run_search("thm3", budget=15, seed=2)
    assert result["examples"] >= 1
    if not result["found"]:
        recheck = check_instance(result["closest"]["instance"])
        assert recheck["holds"]
        assert recheck["margin_exact"] == pytest.approx(result["closest"]["instance"]["margin"], abs=1e-15)
        assert recheck["margin_exact"] / np.abs(recheck["exact"]).max() == pytest.approx(-result["closest"]["score"])


def test_check_instance_on_a_known_instance():
    # binary chain 0 → 1 → 2 with a symmetric kernel: I(x_2; x_0)/I(x_2; x_1) is below δ(π) = |1 − 2p|
    p = 0.1
    instance = {"target": "lemma3", "kernel": [[1 - p, p], [p, 1 - p]], "parents": [-1, 0, 1], "init": None,
                "h": 2, "h_prime": 0, "alpha": "dobrushin"}
    out = check_instance(instance)
    assert out["holds"] and out["relation"] == "ancestor"
    assert out["alphas"]["dobrushin"] == pytest.approx(0.8)
    thm3 = check_instance({"target": "thm3", "kernel": instance["kernel"], "parents": [-1, 0, 1], "init": None,
                           "h": 2})
    assert thm3["holds"] and thm3["margin_exact"] > 0


@pytest.mark.parametrize("bad, match", [
    ({"target": "lemma5"}, "target"),
    ({"target": "lemma3", "kernel": [[1.0, 0.0], [0.0, 1.0]], "parents": [-1, 0, 1]}, "'h'"),
    ({"target": "lemma3", "kernel": [[0.5, 0.5], [0.5, 0.5]], "parents": [-1, 0, 1], "h": 2}, "h_prime"),
    ({"target": "lemma3", "kernel": [[0.5, 0.5], [0.5, 0.5]], "parents": [-1, 0, 1], "h": 2, "h_prime": 0,
      "alpha": "kl"}, "alpha"),
])
def test_bad_instances_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        check_instance(bad)


def test_bad_search_arguments_are_rejected():
    with pytest.raises(ValueError, match="target"):
        run_search("lemma4", 10, 0)
    with pytest.raises(ValueError, match="budget"):
        run_search("lemma3", 0, 0)
    with pytest.raises(ValueError, match="alpha"):
        run_search("thm3", 10, 0, alpha=0.5)
    with pytest.raises(ValueError, match="init"):
        run_search("thm3", 10, 0, init="uniform")
    with pytest.raises(ValueError, match="form"):
        run_search("thm3", 10, 0, form="mixture")


@pytest.mark.parametrize("init", ["stationary", "full-support"])
def test_search_init_modes_draw_the_requested_laws(init):
    result = run_search("lemma3", budget=10, seed=3, init=init, alpha="doeblin")
    law = result["closest"]["instance"]["init"]
    if init == "stationary":
        assert law is None
    else:
        assert min(law) >= 0.02 - 1e-12


def test_known_dobrushin_counterexample_is_real_at_50_digits():
    # the stored search counterexample re-checks as a violation, and an independent 50-digit enumeration
    # over all 2^5 sequences (mpmath, no floats, no LCA formula) confirms ratio > δ(π) = 31/64
    instance = KNOWN_COUNTEREXAMPLES[0]
    assert not check_instance(instance)["holds"]
    mpmath.mp.dps = 50
    kernel = [[mpmath.mpf(1) / 2, mpmath.mpf(1) / 2], [mpmath.mpf(1) / 64, mpmath.mpf(63) / 64]]
    init, parents = [mpmath.mpf(1) / 2] * 2, instance["parents"]

    def information(i, j):
        joint = [[mpmath.mpf(0)] * 2 for _ in range(2)]
        for x in itertools.product(range(2), repeat=len(parents)):
            p = init[x[0]]
            for k in range(1, len(parents)):
                p *= kernel[x[parents[k]]][x[k]]
            joint[x[i]][x[j]] += p
        rows = [sum(r) for r in joint]
        cols = [joint[0][b] + joint[1][b] for b in range(2)]
        return sum(joint[a][b] * mpmath.log(joint[a][b] / (rows[a] * cols[b])) for a in range(2) for b in range(2))

    h, hp = instance["h"], instance["h_prime"]
    ratio = information(hp, h) / information(parents[h], h)
    dobrushin = mpmath.mpf(1) / 2 - mpmath.mpf(1) / 64  # max TV between the two rows
    assert ratio - dobrushin > mpmath.mpf("4e-4")


def test_chain_counterexample_to_dobrushin_is_far_from_rounding():
    # second stored counterexample: the plain chain x_0 → x_1 → x_2; the ratio from the brute-force joints
    # (all 2^3 sequences, no LCA formula) exceeds δ(π) by far more than any rounding
    instance = KNOWN_COUNTEREXAMPLES[1]
    kernel, parents, init = (np.array(instance[k]) for k in ("kernel", "parents", "init"))
    ratio = (nm.mutual_information(brute_force_joint(kernel, parents, [0, 2], init))
             / nm.mutual_information(brute_force_joint(kernel, parents, [1, 2], init)))
    assert ratio > 2.5 * nm.dobrushin_coefficient(kernel)
    assert not check_instance(instance)["holds"]
    assert check_instance(dict(instance, alpha="doeblin"))["holds"]


def test_thm3_exact_form_counterexample_is_confirmed_by_finite_differences():
    # the stored Theorem 3 counterexample, recomputed by the brute-force finite-difference derivative of the
    # real loss (tests/test_gradient.py, no closed form): a non-parent candidate has the larger expected
    # gradient under this non-stationary μ₀, the parent leads under the stationary law, and the J form
    # (exact, from pairwise joints) still ranks the parent first
    instance = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3")
    kernel, parents, init = (np.array(instance[k]) for k in ("kernel", "parents", "init"))
    h = instance["h"]
    gradient = brute_force_init_gradient(kernel, parents, h, init)
    others = np.delete(gradient, parents[h])
    assert others.max() - gradient[parents[h]] > 1e-3  # far above the finite-difference error (~1e-10)
    stationary = brute_force_init_gradient(kernel, parents, h, None)
    assert stationary[parents[h]] > np.delete(stationary, parents[h]).max()
    gain = chi2_gain(kernel, parents, h, init)
    assert gain[parents[h]] > np.delete(gain, parents[h]).max()
    assert not check_instance(instance)["holds"]
