"""The counterexample search (reports.search): it finds and shrinks planted violations, its results depend on the
seed and budget only, every recorded found_by command replays its instance, and instances re-check from scratch."""
import itertools
import json
import shlex
from pathlib import Path

import mpmath
import numpy as np
import pytest

from bma_verify import numerics as nm
from bma_verify.numerics.enumeration import brute_force_joint
from bma_verify.numerics.gradient import chi2_gain
from bma_verify.reports import cli, search
from bma_verify.reports.kernel_report import check_kernel_claims
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, as_instance, check_instance, run_search
from tests.test_gradient import brute_force_init_gradient

REFERENCE = Path(__file__).resolve().parent.parent / "reports" / "reference" / "results.json"
#: The fields that define an instance (the others are informative): a replay must give these exactly.
DEFINING = ("target", "kernel", "parents", "init", "h", "h_prime", "alpha", "form")


def _defining(instance: dict) -> dict:
    return {k: instance[k] for k in DEFINING if k in instance}


def _replay(found_by: str, capsys) -> dict:
    """Run a recorded ``found_by`` command through the command-line entry point; the instance it prints."""
    words = shlex.split(found_by)
    assert words[:2] == ["bma-verify", "search"], f"found_by is not a search command: {found_by!r}"
    cli.main(words[1:] + ["--json", "--quiet"])
    return json.loads(capsys.readouterr().out)["instance"]


def test_search_finds_and_shrinks_a_planted_wrong_alpha():
    # α = 0.05 is far below typical ratios: the search must find a violation and shrink it to the smallest shape
    # that has a non-parent pair (d = 2, H = 3); reference: the ratio recomputed from the foundation's joints
    result = run_search("lemma3", budget=200, seed=0, alpha=0.05)
    assert result["found"]
    instance = result["instance"]
    assert len(instance["kernel"]) == 2 and len(instance["parents"]) == 3
    recheck = check_instance(json.loads(json.dumps(instance)))  # the JSON round trip is what the CLI does
    assert not recheck["holds"] and recheck["verdict"] == "fail"
    kernel, parents = np.array(instance["kernel"]), np.array(instance["parents"])
    init = None if instance["init"] is None else np.array(instance["init"])
    h, hp = instance["h"], instance["h_prime"]
    ratio = (nm.mutual_information(nm.pairwise_joint(kernel, parents, hp, h, init))
             / nm.mutual_information(nm.pairwise_joint(kernel, parents, parents[h], h, init)))
    assert ratio == pytest.approx(recheck["ratio"], rel=1e-10) and ratio > 0.05


@pytest.mark.parametrize("target, kwargs", [("lemma3", {}), ("thm3", {}), ("thm3", {"init": "full-support"})])
def test_a_shrunk_counterexample_has_no_simpler_neighbour_that_still_fails(target, kwargs):
    # local minimality, checked against the shrinker's own candidate list: no leaf can go, no state can be dropped,
    # no number written with fewer decimals, without the violation disappearing
    result = run_search(target, budget=1000, seed=0, **kwargs)
    assert result["found"]
    i = result["instance"]
    shrunk = (np.array(i["kernel"]), np.array(i["parents"]), None if i["init"] is None else np.array(i["init"]))
    verdict = ((lambda c: search.lemma3_verdict(c, "dobrushin")) if target == "lemma3"
               else (lambda c: search.thm3_verdict(c, "exact")))
    assert verdict(shrunk)[2]
    assert not any(verdict(c)[2] for c in search.simpler_instances(shrunk, search.SearchSpace(kwargs.get("init", "any"))))


def test_the_result_depends_on_seed_and_budget_only():
    # a larger budget stops where the smaller one did, so it finds the same instance; another seed another one
    first, again, larger = (run_search("lemma3", b, 0) for b in (200, 200, 1000))
    assert first["examples"] < 200
    assert _defining(first["instance"]) == _defining(again["instance"]) == _defining(larger["instance"])
    assert larger["instance"]["found_by"] == "bma-verify search lemma3 --seed 0 --budget 1000"
    assert _defining(run_search("lemma3", 200, 8)["instance"]) != _defining(first["instance"])


def test_search_without_a_violation_reports_the_closest_call():
    result = run_search("lemma3", budget=30, seed=1, alpha="dobrushin_channel")  # a theorem: never violated
    assert not result["found"] and result["instance"] is None
    assert result["closest"]["score"] <= 1e-9
    assert "no counterexample in 30 examples" in result["message"]
    assert check_instance(result["closest"]["instance"])["holds"]


def test_thm3_closest_call_rechecks_with_its_margin():
    result = run_search("thm3", budget=6, seed=2)
    assert not result["found"] and result["examples"] == 6
    closest = result["closest"]["instance"]
    recheck = check_instance(closest)
    assert recheck["holds"]
    assert recheck["margin_exact"] == pytest.approx(closest["margin"], abs=1e-15)
    assert recheck["margin_exact"] / np.abs(recheck["exact"]).max() == pytest.approx(-result["closest"]["score"])


@pytest.mark.parametrize("init", ["stationary", "full-support"])
def test_search_init_modes_draw_the_requested_laws(init):
    result = run_search("lemma3", budget=10, seed=3, init=init, alpha="doeblin")
    law = result["closest"]["instance"]["init"]
    if init == "stationary":
        assert law is None
    else:
        assert min(law) >= 0.02 - 1e-12


def test_every_stored_found_by_command_replays_its_instance(capsys):
    # Reference: the stored instance itself; the command is run as a user would (the CLI entry point)
    for stored in KNOWN_COUNTEREXAMPLES:
        replayed = _replay(stored["found_by"], capsys)
        assert _defining(replayed) == _defining(stored), stored["found_by"]
        assert replayed["found_by"] == stored["found_by"]


def _found_by_values(node, out: dict) -> dict:
    if isinstance(node, dict):
        if isinstance(node.get("found_by"), str) and "target" in node:
            out.setdefault(node["found_by"], _defining(node))
        for value in node.values():
            _found_by_values(value, out)
    elif isinstance(node, list):
        for value in node:
            _found_by_values(value, out)
    return out


def test_every_found_by_in_the_reference_results_replays_its_instance(capsys):
    # Reference: each instance as reports/reference/results.json records it (after `make reference`)
    recorded = _found_by_values(json.loads(REFERENCE.read_text()), {})
    assert recorded, "the reference report records no found_by"
    for found_by, instance in recorded.items():
        assert _defining(_replay(found_by, capsys)) == instance, found_by


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


def test_an_instance_is_read_from_a_finding_or_a_search_result():
    # the three sources of an instance give the same replay: the instance, a finding holding it, search --json
    stored = KNOWN_COUNTEREXAMPLES[0]
    finding = {"statement": "s", "status": "refuted", "instance": stored}
    result = {"target": "lemma3", "found": True, "instance": stored, "closest": {}}
    assert as_instance(finding) is stored and as_instance(result) is stored
    assert check_instance(finding)["ratio"] == check_instance(stored)["ratio"]


def test_a_kernel_mode_finding_replays():
    # `check --kernel` on the stored chain: its refuted δ(π) finding carries a full instance, and replaying it
    # gives the ratio of the swept row (reference: the row of the same (h, h') computed by the kernel report)
    stored = KNOWN_COUNTEREXAMPLES[1]
    result = check_kernel_claims(stored["kernel"], claims=("lemma3-strict-dpi", "thm3-init-gradient"),
                                 parents=stored["parents"], init=stored["init"])
    refuted = next(f for f in result["claims"]["lemma3-strict-dpi"]["findings"] if f["status"] == "refuted")
    instance = json.loads(json.dumps(refuted["instance"]))
    assert _defining(instance) == _defining(stored)
    row = next(r for r in result["claims"]["lemma3-strict-dpi"]["rows"]
               if (r["h"], r["h_prime"]) == (stored["h"], stored["h_prime"]))
    replay = check_instance(instance)
    assert not replay["holds"] and replay["ratio"] == pytest.approx(row["ratio"], rel=1e-12)


@pytest.mark.parametrize("bad, match", [
    ({"target": "lemma5"}, "target"),
    ({"target": "lemma3", "kernel": [[1.0, 0.0], [0.0, 1.0]], "parents": [-1, 0, 1]}, "'h'"),
    ({"target": "lemma3", "kernel": [[0.5, 0.5], [0.5, 0.5]], "parents": [-1, 0, 1], "h": 2}, "h_prime"),
    ({"target": "lemma3", "kernel": [[0.5, 0.5], [0.5, 0.5]], "parents": [-1, 0, 1], "h": 2, "h_prime": 0,
      "alpha": "kl"}, "alpha"),
    ({"kernels": [[[0.5, 0.5], [0.5, 0.5]]], "parent_sets": [[-1], [0]], "h": 1}, "DAG task"),
    ([1, 2], "JSON object"),
])
def test_bad_instances_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        check_instance(bad)


def test_bad_search_arguments_are_rejected():
    for args, kwargs, match in [(("lemma4", 10, 0), {}, "target"), (("lemma3", 0, 0), {}, "budget"),
                                (("lemma3", 10, -1), {}, "seed"), (("thm3", 10, 0), {"alpha": 0.5}, "alpha"),
                                (("thm3", 10, 0), {"init": "uniform"}, "init"),
                                (("thm3", 10, 0), {"form": "mixture"}, "form")]:
        with pytest.raises(ValueError, match=match):
            run_search(*args, **kwargs)


def _information_50_digits(kernel, init, parents, i: int, j: int):
    """I(x_i; x_j) by summing all d^H sequences at 50 digits (mpmath; no floats, no LCA formula)."""
    d = len(kernel)
    joint = [[mpmath.mpf(0)] * d for _ in range(d)]
    for x in itertools.product(range(d), repeat=len(parents)):
        p = init[x[0]]
        for k in range(1, len(parents)):
            p *= kernel[x[parents[k]]][x[k]]
        joint[x[i]][x[j]] += p
    rows = [sum(r) for r in joint]
    cols = [sum(joint[a][b] for a in range(d)) for b in range(d)]
    return sum(joint[a][b] * mpmath.log(joint[a][b] / (rows[a] * cols[b])) for a in range(d) for b in range(d))


@pytest.mark.parametrize("index", [i for i, k in enumerate(KNOWN_COUNTEREXAMPLES) if k["target"] == "lemma3"])
def test_stored_dobrushin_counterexamples_are_real_at_50_digits(index):
    # each stored instance (decimals, so exact as written) breaks α = δ(π) at 50 digits by far more than
    # rounding, and holds for the Doeblin bound 1 − d·min π; the float recheck agrees
    instance = KNOWN_COUNTEREXAMPLES[index]
    mpmath.mp.dps = 50
    kernel = [[mpmath.mpf(str(v)) for v in row] for row in instance["kernel"]]
    init = [mpmath.mpf(str(v)) for v in instance["init"]]
    parents, h, hp = instance["parents"], instance["h"], instance["h_prime"]
    ratio = (_information_50_digits(kernel, init, parents, hp, h)
             / _information_50_digits(kernel, init, parents, parents[h], h))
    dobrushin = max(sum(abs(a - b) for a, b in zip(r, s)) / 2 for r in kernel for s in kernel)
    assert ratio > mpmath.mpf("1.5") * dobrushin
    assert float(ratio) == pytest.approx(check_instance(instance)["ratio"], rel=1e-9)
    assert not check_instance(instance)["holds"]
    assert check_instance(dict(instance, alpha="doeblin"))["holds"]
    floats = np.array(instance["kernel"])
    brute = (nm.mutual_information(brute_force_joint(floats, np.array(parents), [hp, h], np.array(instance["init"])))
             / nm.mutual_information(brute_force_joint(floats, np.array(parents), [parents[h], h],
                                                       np.array(instance["init"]))))
    assert brute == pytest.approx(float(ratio), rel=1e-9)


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


def _tv_by_power_iteration(kernel, init) -> float:
    """TV(μ₀, μ) with μ from iterating π (a second route to the stationary law than numerics' linear solve)."""
    law = np.full(len(kernel), 1.0 / len(kernel))
    for _ in range(5000):
        law = law @ np.asarray(kernel)
    return 0.5 * float(np.abs(np.asarray(init) - law).sum())


def test_a_search_within_a_tv_ball_finds_only_laws_inside_it_and_replays():
    # the same search space that finds a J-form violation within TV ≤ 1 (seed 5, d = 3) finds one within 0.2; its
    # distance (power iteration, not stationary_distribution) is at most 0.2 and its found_by command replays it
    result = run_search("thm3", 200, 5, form="approximate", states=3, max_tv=0.2)
    assert result["found"] and not result["check"]["holds"]
    instance = result["instance"]
    assert len(instance["kernel"]) == 3
    assert _tv_by_power_iteration(instance["kernel"], instance["init"]) == pytest.approx(result["tv"], abs=1e-9)
    assert result["tv"] <= 0.2 + 1e-12
    words = shlex.split(instance["found_by"])[2:]
    args = cli.build_parser().parse_args(["search", *words])
    again = run_search(args.target, args.budget, args.seed, form=args.form, states=args.states, min_pi=args.min_pi,
                       max_tv=args.max_tv)
    assert again["instance"] == instance


def test_a_kernel_floor_bounds_every_drawn_entry():
    result = run_search("thm3", 30, 2, form="approximate", states=2, min_pi=0.1)
    assert np.min(result["closest"]["instance"]["kernel"]) >= 0.1 - 1e-12


def test_the_smallest_violating_tv_shrinks_until_a_search_finds_none():
    # seed 13 finds J-form violations at d = 3 (seeds 11, 12 find none within 200 examples)
    out = search.smallest_violating_tv("approximate", 3, None, budget=200, rng=np.random.default_rng(13))
    found = [s for s in out["searches"] if s["found"]]
    # each later search looks strictly inside the previous violation's distance, and the last finds nothing
    assert all(b["max_tv"] < a["tv"] for a, b in zip(out["searches"], out["searches"][1:]))
    assert found and not out["searches"][-1]["found"]
    assert out["smallest_tv"] == min(s["tv"] for s in found)
    assert not check_instance(out["instance"])["holds"]
    assert out["examples"] == sum(s["examples"] for s in out["searches"])


def test_bad_search_space_arguments_are_rejected():
    for kwargs, match in [({"states": 5}, "states"), ({"min_pi": 0.6, "states": 2}, "min_pi"),
                          ({"max_tv": 0.0}, "max_tv"), ({"max_tv": 1.5}, "max_tv")]:
        with pytest.raises(ValueError, match=match):
            run_search("thm3", 10, 0, **kwargs)
    with pytest.raises(ValueError, match="thm3 search only"):
        run_search("lemma3", 10, 0, max_tv=0.5)
    with pytest.raises(ValueError, match="rng"):
        search.smallest_violating_tv("approximate", 3, None, budget=5, rng=0)
