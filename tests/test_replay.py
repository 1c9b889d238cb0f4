"""Every refuted finding of the report replays with `bma-verify check --instance FILE` (reports.replay for the
extension targets, reports.search for Lemma 3 and Theorem 3): a reproduced refutation of ours exits 0, one of the
paper exits 1, and the nearest instance on which the statement holds reads "pass"."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from bma_verify.numerics.dag_gradient import dag_thm3_check_position
from bma_verify.numerics.dag_law import draw_dag_instance, overlap_ratio_one_instance
from bma_verify.numerics.dag_lemma3 import LEMMA3_SET_CANDIDATES, dag_lemma3_sets, kernel_constants, violates
from bma_verify.numerics.dag_lemma4 import dag_lemma4_terms
from bma_verify.reports import cli
from bma_verify.reports.replay import check_extension_instance
from bma_verify.reports.search import check_instance

REFERENCE = Path(__file__).resolve().parents[1] / "reports" / "reference" / "results.json"


def _refuted_instances():
    results = json.loads(REFERENCE.read_text())
    for claim in results["claims"]:
        for check in claim["checks"]:
            for finding in check.get("findings") or []:
                if finding["status"] == "refuted":
                    yield claim["id"], finding


def _recorded_value(instance: dict):
    """The number the report recorded for the instance (key names differ by target and by where it was found)."""
    target = instance["target"]
    if target == "dag-lemma3" and instance["candidate"] != "below_one":
        if LEMMA3_SET_CANDIDATES[instance["candidate"]][0] == "excess":
            return instance.get("value", instance.get("excess_ratio")), "value"
        return instance.get("value", instance.get("ratio")), "value"
    key = {"dag-lemma3": ("ratio", "value"), "dag-lemma4": ("gap", "gap"), "dag-thm3": ("margin", "margin"),
           "footnote1": ("error", "error"), "lemma3": ("ratio", "ratio"), "thm3": ("margin", None)}[target]
    return instance.get(key[0]), key[1]


REFUTED = list(_refuted_instances())


def test_the_reference_report_has_refuted_findings_of_every_replayable_kind():
    # Reference: the claims whose findings the reference report refutes (the test below is not vacuous).
    targets = {finding["instance"]["target"] for _, finding in REFUTED if finding.get("instance")}
    assert {"lemma3", "thm3", "dag-lemma3", "dag-lemma4", "dag-thm3", "footnote1"} <= targets


@pytest.mark.parametrize("claim, finding", REFUTED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(REFUTED)])
def test_every_refuted_finding_replays_and_recomputes_its_number(claim, finding, tmp_path, capsys):
    # Reference: the number the report recorded when it found the instance (a sweep, a stored counterexample or a
    # planted instance), recomputed here from the instance's kernels alone.
    assert finding.get("instance"), f"{claim}: refuted without an instance: {finding['statement']}"
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(finding))  # a finding holding its instance is accepted as it is
    code = cli.main(["check", "--instance", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    # a finding is a statement of ours (reports.core.Finding), so its refutation is reproduced with exit 0
    assert (code, result["holds"], result["outcome"]) == (0, False, "refuted finding reproduced")
    recorded, key = _recorded_value(finding["instance"])
    if recorded is not None and key is not None:
        assert math.isclose(result[key], recorded, rel_tol=1e-9, abs_tol=1e-12)


def test_the_papers_failed_instance_replays_as_a_failure_with_exit_1(tmp_path, capsys):
    # Reference: the README's exit codes: Theorem 3's J form (the paper's statement) failing on the reference
    # report's instance exits 1, where a refuted finding of ours exits 0 (the test above).
    results = json.loads(REFERENCE.read_text())
    check = next(c for c in next(c for c in results["claims"] if c["id"] == "thm3-init-gradient")["checks"]
                 if (c.get("instance") or {}).get("form") == "approximate")
    path = tmp_path / "thm3.json"
    path.write_text(json.dumps(check["instance"]))
    code = cli.main(["check", "--instance", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert (code, result["owner"], result["outcome"]) == (1, "paper", "fail")


def test_a_dag_lemma3_pair_below_one_reads_pass_and_the_planted_overlap_fails():
    # Reference: the planted overlap instance (π_2 ignores the non-shared parent) has ratio 1 for S = {0, 2}; on the
    # same DAG the disjoint-from-nothing set S = {1, 2} shares one parent and carries less, so its ratio is < 1.
    inst = overlap_ratio_one_instance(2, 0.05)
    record = {"target": "dag-lemma3", "kernels": [t.tolist() for t in inst["kernels"]],
              "parent_sets": inst["parent_sets"].tolist(), "init": None, "h": inst["h"], "S": list(inst["S"]),
              "candidate": "below_one"}
    assert check_extension_instance(record)["holds"] is False
    exact = dag_lemma3_sets(inst["kernels"], inst["parent_sets"])
    others = [tuple(S) for h, S in zip(exact["h"], exact["S"]) if h == inst["h"] and tuple(S) != tuple(inst["S"])]
    for S in others:
        result = check_extension_instance({**record, "S": list(S)})
        assert result["holds"] is True and result["value"] < 1.0


def test_dag_lemma3_candidates_agree_with_the_sweep_rule_on_random_dags():
    # Reference: numerics.dag_lemma3.violates applied to dag_lemma3_sets directly, pair by pair, on 5 random DAGs
    # (both outcomes occur: the tree's α's fail on overlapping sets, hold on many disjoint ones).
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(5):
        inst = draw_dag_instance(rng)
        exact = dag_lemma3_sets(inst["kernels"], inst["parent_sets"])
        alphas = kernel_constants(inst["kernels"])["alphas"]
        base = {"target": "dag-lemma3", "kernels": [t.tolist() for t in inst["kernels"]],
                "parent_sets": inst["parent_sets"].tolist(), "init": None}
        for p in range(min(exact["h"].size, 6)):
            for name, (bound, alpha) in LEMMA3_SET_CANDIDATES.items():
                value = exact[bound][p]
                if not np.isfinite(value):
                    continue
                expected = not violates(value, alphas[alpha], exact["mi_true"][p])
                result = check_extension_instance({**base, "h": int(exact["h"][p]), "S": list(exact["S"][p]),
                                                   "candidate": name})
                assert result["holds"] is expected
                seen.add(expected)
    assert seen == {True, False}


def test_dag_lemma4_gap_zero_fails_and_a_kernel_that_reads_both_parents_passes():
    # Reference: dag_lemma4_terms on the planted instance (Δ = 0) and on the same DAG with π_2 made to depend on
    # the non-shared parent (row (a, b) = (0, 1) pulled halfway to uniform): Δ > 0 there.
    inst = overlap_ratio_one_instance(2, 0.05)
    kernels = [t.copy() for t in inst["kernels"]]
    record = {"target": "dag-lemma4", "kernels": [t.tolist() for t in kernels],
              "parent_sets": inst["parent_sets"].tolist(), "init": None, "h": inst["h"], "S": list(inst["S"])}
    flat = check_extension_instance(record)
    assert flat["holds"] is False and abs(flat["gap"]) <= 1e-10
    kernels[1][1] = 0.5 * kernels[1][1] + 0.25
    moved = check_extension_instance({**record, "kernels": [t.tolist() for t in kernels]})
    expected = dag_lemma4_terms(kernels, inst["parent_sets"], inst["h"], tuple(inst["S"]))["lhs"]
    assert moved["holds"] is True and moved["gap"] == pytest.approx(expected) and expected > 1e-4


def test_dag_thm3_replay_passes_where_the_true_set_leads_and_fails_where_it_does_not():
    # Reference: dag_thm3_check_position's margins on random DAGs, both signs met.
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(40):
        inst = draw_dag_instance(rng)
        for h in range(inst["k"] + 1, inst["H"]):
            out = dag_thm3_check_position(inst["kernels"], inst["parent_sets"], h, inst["init"])
            for form in ("exact", "approximate"):
                if abs(out[f"margin_{form}"]) < 1e-9:
                    continue
                result = check_extension_instance({"target": "dag-thm3", "form": form, "h": h,
                                                   "kernels": [t.tolist() for t in inst["kernels"]],
                                                   "parent_sets": inst["parent_sets"].tolist(),
                                                   "init": inst["init"].tolist()})
                assert result["holds"] is (out[f"margin_{form}"] > 0)
                seen.add(result["holds"])
    assert seen == {True, False}


def test_footnote1_dropped_mu_terms_pass_on_their_task_and_fail_on_ours():
    # Reference: the module docstring of numerics.selective_induction: on their task the first k̂ tokens' μ terms
    # are common to every lag and cancel (holds); on our per-lag variant they depend on κ (the reference report's
    # refuted instance). The same kernel, lags and sequence, read as their task, must pass.
    instance = next(f["instance"] for _, f in REFUTED if f["instance"]["target"] == "footnote1"
                    and f["instance"]["statement"] == "per_lag_mu_terms_dropped")
    assert check_extension_instance(instance)["holds"] is False
    theirs = check_extension_instance({**instance, "statement": "mu_terms_dropped"})
    assert theirs["holds"] is True and theirs["error"] <= 1e-10


@pytest.mark.parametrize("change, words", [
    ({"S": None}, "'S' field"), ({"candidate": "delta"}, "instance['candidate']"),
    ({"S": [0, 1]}, "not a candidate pair"), ({"target": "dag-lemma5"}, "instance['target']"),
])
def test_a_malformed_extension_instance_is_refused_in_one_line_with_exit_2(change, words, tmp_path, capsys):
    # Reference: the README's exit codes (2: bad input); S = [0, 1] is the true set of h = 3, not a candidate.
    inst = overlap_ratio_one_instance(2, 0.05)
    record = {"target": "dag-lemma3", "kernels": [t.tolist() for t in inst["kernels"]],
              "parent_sets": inst["parent_sets"].tolist(), "init": None, "h": 3, "S": [0, 2],
              "candidate": "below_one", **change}
    record = {k: v for k, v in record.items() if v is not None}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record))
    code = cli.main(["check", "--instance", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and words in err and str(path) in err and len(err.strip().splitlines()) == 1


def _large_instance(form: str, **extra) -> dict:
    # d = 60, h = 4: 60^5 = 7.8e8 sequences, beyond enumeration (MAX_SEQUENCES = 2e6)
    from bma_verify.numerics.task import random_kernel
    kernel = random_kernel(60, alpha=0.3, eps=0.001, rng=np.random.default_rng(0))
    return {"target": "thm3", "kernel": kernel.tolist(), "parents": [-1, 0, 1, 2, 1], "init": None, "h": 4,
            "form": form, **extra}


def test_a_thm3_instance_beyond_enumeration_replays_with_the_kernel_modes_methods():
    # Reference: numerics.large_kernels.j_form_gradients called directly (J form, closed form at any d), and two
    # Monte Carlo replays of the exact form from different seeds, which must agree within 5 combined s.e.
    from bma_verify.numerics.large_kernels import j_form_gradients
    j_form = check_instance(_large_instance("approximate"))
    instance = _large_instance("approximate")
    direct = j_form_gradients(np.asarray(instance["kernel"]), np.asarray(instance["parents"]), 4)
    assert j_form["method"].startswith("closed form") and j_form["approximate"] == pytest.approx(direct.tolist())
    first = check_instance(_large_instance("exact"))
    second = check_instance(_large_instance("exact", replay_seed=1, exact_samples=5000))
    assert first["method"].startswith("Monte Carlo, 20000 chains") and "5000 chains (seed 1)" in second["method"]
    spread = 5 * math.hypot(first["margin_stderr"], second["margin_stderr"])
    assert abs(first["margin_exact"] - second["margin_exact"]) <= spread and first["margin_stderr"] > 0
    assert first["verdict"] == "pass" and first["margin_exact"] > 4 * first["margin_stderr"]


def test_a_monte_carlo_margin_within_its_standard_errors_reads_undecided(tmp_path, capsys):
    # Reference: the decision rule of check --kernel (MONTE_CARLO_Z = 4 s.e.): with 2 chains the standard error
    # dwarfs the margin, so the replay can neither reproduce nor refute, and says so (exit 0).
    path = tmp_path / "mc.json"
    path.write_text(json.dumps(_large_instance("exact", exact_samples=2, replay_seed=3)))
    code = cli.main(["check", "--instance", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["verdict"] == "undecided" and result["outcome"] == "undecided"


def test_the_closed_form_replay_agrees_with_enumeration_on_the_papers_j_form_counterexample():
    # Reference: thm3_check_position's enumerated approximate form (sums over all 27 sequences) on the stored
    # J-form counterexample (d = 3); the closed form used beyond enumeration must give the same margin.
    from bma_verify.numerics.init_gradient_sweep import thm3_check_position
    from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES, check_thm3_large
    stored = next(c for c in KNOWN_COUNTEREXAMPLES if c["target"] == "thm3" and c["form"] == "approximate")
    args = (np.asarray(stored["kernel"]), np.asarray(stored["parents"]), stored["h"], np.asarray(stored["init"]))
    enumerated = thm3_check_position(*args)["enumerated_approximate"]
    parent = stored["parents"][stored["h"]]
    margin = enumerated[parent] - np.delete(enumerated, parent).max()
    closed = check_thm3_large(stored, *args, "approximate")
    assert closed["verdict"] == "fail" and closed["margin_approximate"] == pytest.approx(margin, abs=1e-12)
