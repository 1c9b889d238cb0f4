"""exp-fig5-generalization on stand-in runs: Theorem 1 constructions (BMA at their training L, W_tf = log π), the
construction with its selector frozen at another kernel (converged, cannot represent BMA) and untrained models.
The check must run each reading's ideal reader through its rule (positive control: R1's and R2's ideal, BMA reading
min(L, L') examples, is rejected, so they never decide; R3's, BMA itself, passes), decide each testable reading over
the training seeds by the count rule, reject its near-miss control and show the control's power curve (rejecting its
far end, passing the claimed order), fail converged runs that miss, and say when too few training L values cannot
decide.

Reference: ``numerics`` BMA on the same contexts (``analysis.truncated_bma_metrics``), the runs' own ``by_test_L``
rows, hand-made grids and per-seed outcomes counted by hand.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from xml.etree import ElementTree

import pytest

import bma_verify.reports.checks.trained as trained
import bma_verify.reports.claims.exp_fig5_generalization.claim as fig5
from bma_verify.model import analysis, figures
from bma_verify.model.generalization import end_to_end_grid, held_out_batches, reader_grids
from bma_verify.model.presets import FIG5_R2_PREFIX
from bma_verify.reports.core import NOT_DISCRIMINATING, NOT_TESTABLE, CheckContext, settle
from tests.trained_stand_ins import patch_runs, stand_in_run

TEST_L = (1, 2, 3, 5)


@pytest.fixture(scope="module")
def fig5_runs():
    return {f"L{L}": stand_in_run(L=L, H=6, test_L=TEST_L, construction=True) for L in (1, 2, 3)}


@pytest.fixture(scope="module")
def wrong_selector_runs():
    return {f"L{L}": stand_in_run(L=L, H=6, test_L=TEST_L, construction=True, wrong_selector=True)
            for L in (1, 2, 3)}


@pytest.fixture(scope="module")
def untrained_runs():
    return {f"L{L}": stand_in_run(L=L, H=6, test_L=TEST_L, K=L + 1) for L in (1, 2, 3)}


def _runs_by_seed(monkeypatch, tier: str, runs_for_seed: list) -> list[int]:
    """Train the i-th training seed of ``tier`` to ``runs_for_seed[i]``; returns the seeds asked for."""
    seeds = trained.training_seeds(CheckContext(tier=tier, seed=0), "fig5")
    asked = []

    def fake(name, *, tier, seed, device, quiet, output):
        asked.append(seed)
        return runs_for_seed[seeds.index(seed)]

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    return asked


def test_fig5_decides_on_three_seeds_and_rejects_its_near_miss_control(fig5_runs, monkeypatch):
    # the control's rows are ideal readers still ordered the wrong way (larger L reads more): ρ < 0 must fail
    asked = _runs_by_seed(monkeypatch, "quick", [fig5_runs] * 3)
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert asked == trained.training_seeds(CheckContext(tier="quick", seed=0), "fig5") and len(asked) == 3
    assert outcome.seeds["n"] == 3 and outcome.seeds["training_seeds"] == asked
    assert outcome.assumptions[0].startswith("reading R1:") and "R1" in outcome.summary
    assert outcome.converged["plateaued"] and outcome.converged["converged_seeds"] == 3
    assert set(outcome.converged["seeds"][0]["runs"]) == {"L1", "L2", "L3"}
    assert outcome.control.measured["spearman"]["high"] < 0 and outcome.control.rejected
    # positive controls: R1's ideal (BMA reading its training L examples) is rejected (ρ = −1), R3's (BMA) passes
    positive = outcome.positive_control.measured
    assert not positive["R1"]["passed"] and positive["R1"]["spearman_rho"] == -1.0
    assert positive["R3"]["passed"] and positive["R3"]["mean_gap"] == [0.0] * 3 and outcome.positive_control.passed
    # the constructions' selector is log π at every L: under R3 their rows tie, so the order side is within noise
    assert outcome.measured["count_readings"]["R3"] == "inconclusive" and outcome.verdict == "inconclusive"
    # the median and range of every seed's ρ, read off the per-seed values
    rho = outcome.seeds["metrics"]["R1.spearman_rho"]
    assert rho["median"] == rho["min"] == rho["max"] == outcome.measured["spearman_train_L_vs_mean_gap"]
    monkeypatch.setattr(fig5, "combine_sides", lambda sides: "pass")
    verdict, reason = settle(fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0)))
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig5_control_power_rejects_the_wrong_order_and_passes_the_claimed_one(fig5_runs):
    # reference: BMA reading the last min(m, L') examples computed here by numerics, one entry at a time
    g = fig5.compute_grids(fig5_runs)
    power, grids = fig5.control_power(g)
    assert [p["x"] for p in power] == list(fig5.CONTROL_PATH)
    assert power[0]["examples_read"] == {"L1": 1, "L2": 2, "L3": 3}  # t = 0: an ideal reader of its training L
    assert power[-1]["examples_read"] == {"L1": 3, "L2": 2, "L3": 1}  # t = 1: the claimed order
    batches = held_out_batches(g["first"], TEST_L)
    for p, grid in zip(power, grids):
        for row, m in p["examples_read"].items():
            expected = [analysis.truncated_bma_metrics(g["first"].kernel, batches[L], min(m, L))["parent_loss_gap"]
                        for L in TEST_L]
            assert grid[int(row[1:])] == pytest.approx(expected, abs=1e-12)
    assert power[0]["rejected"] and not power[-1]["rejected"]
    assert trained.combine_sides(power[-1]["rule"]) == "pass"  # the truth end passes the whole rule
    assert power[0]["value"] < 0 < power[-1]["value"]  # ρ of the far end and of the truth end


def test_reader_grids_share_one_table_and_refuse_zero_examples(fig5_runs):
    # reference: each grid computed alone with truncated_bma_metrics (the table is a cache, not a change)
    g = fig5.compute_grids(fig5_runs)
    batches = held_out_batches(g["first"], TEST_L)
    grids = reader_grids(g["first"].kernel, batches, [{1: 2, 3: 5}, {1: 1}])
    assert grids[0][3] == [0.0, 0.0, 0.0, pytest.approx(
        analysis.truncated_bma_metrics(g["first"].kernel, batches[5], 5)["parent_loss_gap"])]
    with pytest.raises(ValueError, match="reads"):
        reader_grids(g["first"].kernel, batches, [{1: 0}])


def test_fig5_a_converged_model_that_cannot_represent_bma_is_not_reproduced(wrong_selector_runs, monkeypatch):
    # the construction with its selector frozen at another kernel's log π, flat held-out curves on every seed:
    # far from BMA at every L' under R3 (the testable reading), so every seed misses; the continuation of each seed's
    # runs (the stand-ins train zero steps, so it cannot move them) confirms each miss: NOT REPRODUCED
    _runs_by_seed(monkeypatch, "quick", [wrong_selector_runs] * 3)
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] and outcome.seeds["readings"]["R3"]["statuses"] == ["fail"] * 3
    assert outcome.seeds["readings"]["R3"]["counts"]["miss"] == 3
    continuations = outcome.converged["by_reading"]["R3"]["continuations"]
    assert len(continuations) == 3 and all(c["confirmed"] and c["status_after"] == "fail" for c in continuations)
    assert outcome.measured["count_readings"]["R3"] == "fail" and settle(outcome)[0] == "fail"


def test_fig5_count_rule_needs_three_of_three_converged_seeds(fig5_runs, wrong_selector_runs, untrained_runs,
                                                              monkeypatch):
    # reference: the per-seed R3 outcomes planted below, counted by hand. Two seeds that miss (each confirmed by its
    # continuation) and one still improving cannot decide (2 of 3 < 3)
    _runs_by_seed(monkeypatch, "quick", [wrong_selector_runs, wrong_selector_runs, untrained_runs])
    ctx = CheckContext(tier="quick", seed=0)
    outcome = fig5.exp_fig5_generalization(ctx)
    counts = outcome.seeds["readings"]["R3"]["counts"]
    assert counts == {"meet": 0, "miss": 2, "unconfirmed_miss": 0, "still_learning": 0, "undecided": 0,
                      "not_converged": 1}
    assert outcome.verdict == "inconclusive" and "0 of 3 seeds meet the rule, 2 miss it" in outcome.reason
    seed3 = trained.training_seeds(ctx, "fig5")[2]
    assert outcome.seeds["training_seeds"][2] == seed3 and "still improving: seed" in outcome.reason
    planted = itertools.chain(["pass", "pass"], itertools.repeat("fail"))  # the third seed, and its continuation
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run)  # which more training does not move
    real = fig5.seed_decision

    def decision(g):
        d = real(g)
        return d | {"readings": d["readings"] | {"R3": next(planted)}}

    _runs_by_seed(monkeypatch, "quick", [fig5_runs] * 3)
    monkeypatch.setattr(fig5, "seed_decision", decision)
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))  # a fresh report cache
    assert outcome.seeds["readings"]["R3"]["counts"] == {"meet": 2, "miss": 1, "unconfirmed_miss": 0,
                                                        "still_learning": 0, "undecided": 0, "not_converged": 0}
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith(
        "reading R3: count rule undecided: 2 of 3 seeds meet the rule, 1 miss it (each confirmed by its continuation)")


def test_fig5_full_tier_counts_each_reading_over_five_seeds(fig5_runs, wrong_selector_runs, monkeypatch):
    # four seeds of constructions (R1 misses: ρ < 0) and one wrong selector (R1 misses too): 5 of 5 miss R1, which
    # never decides (its ideal fails). R3 decides: the constructions' R3 reads within noise, the wrong selector's fails
    asked = _runs_by_seed(monkeypatch, "full", [fig5_runs] * 4 + [wrong_selector_runs])
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="full", seed=0))
    assert len(asked) == 5 and outcome.seeds["n"] == 5
    assert outcome.seeds["readings"]["R1"]["statuses"] == ["fail"] * 5
    assert outcome.seeds["readings"]["R3"]["statuses"] == ["noise"] * 4 + ["fail"]
    assert outcome.measured["count_readings"] == {"R1": "inconclusive", "R3": "inconclusive"}
    assert settle(outcome)[0] == "inconclusive" and "at least 4 of 5" in outcome.threshold["count_rule"]
    # R1 never decides, so its misses are not continued; R3's one miss is, and is confirmed
    assert outcome.reason.startswith("reading R3: count rule undecided: 0 of 5 seeds meet the rule, 1 miss it (each "
                                     "confirmed by its continuation), 4 within noise")


def test_fig5_rule_reads_both_halves():
    # reference: hand-made grids; 'many' is half of the four L'
    good = fig5.fig5_rule([1, 5], [1, 2, 5, 10], {1: [0.0, 0.0, 0.01, 0.3], 5: [0.5, 0.4, 0.0, 0.6]})
    assert good["sides"] == {"near_bma_for_many_L": "pass", "smaller_L_generalizes_better": "pass"}
    bad = fig5.fig5_rule([1, 5], [1, 2, 5, 10], {1: [0.0, 0.9, 1.0, 1.2], 5: [0.5, 0.4, 0.0, 0.6]})
    assert bad["sides"] == {"near_bma_for_many_L": "fail", "smaller_L_generalizes_better": "fail"}
    tie = fig5.fig5_rule([1, 5], [1, 2], {1: [0.0, 0.5], 5: [0.01, 0.5]})
    assert tie["sides"]["smaller_L_generalizes_better"] == "noise"


def test_the_end_to_end_grid_is_each_runs_own_rows(untrained_runs):
    # reference: each run's by_test_L rows, L_pa minus BMA's, read here by hand
    grid = end_to_end_grid(list(untrained_runs.values()), TEST_L)
    assert grid == {r.config.L: [r.metrics["by_test_L"][str(L)]["parent_loss"]
                                 - r.metrics["by_test_L"][str(L)]["bma_parent_loss"] for L in TEST_L]
                    for r in untrained_runs.values()}


def test_fig5_reading_r2_is_judged_on_its_own_runs_when_trained(fig5_runs, untrained_runs, monkeypatch):
    # R2 runs (label prefix "R2-") are read apart from R1's. Reference: each R2 stand-in's own by_test_L rows. The
    # R2 stand-ins are untrained models (not constructions), so their grid differs from R1's: a check that read R1's
    # runs for R2 would fail here. Their curves still fall, so R2 is undecided while R1 (converged) is decided
    patch_runs(monkeypatch, {"fig5": {**fig5_runs, **{FIG5_R2_PREFIX + k: r for k, r in untrained_runs.items()}}})
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert list(outcome.measured["readings"]) == ["R1", "R2", "R3"]
    r2 = outcome.measured["R2_shared_budget"]
    expected = {k: [r.metrics["by_test_L"][str(L)]["parent_loss"] - r.metrics["by_test_L"][str(L)]["bma_parent_loss"]
                    for L in TEST_L] for k, r in untrained_runs.items()}
    assert r2["grid"] == expected and r2["grid"] != outcome.measured["grid"]
    assert r2["own_L_parent_loss_gap"] == {k: r.metrics["parent_loss_gap"] for k, r in untrained_runs.items()}
    assert outcome.seeds["readings"]["R2"]["counts"]["not_converged"] == 3
    assert outcome.converged["by_reading"]["R3"]["plateaued"] and list(outcome.converged["by_reading"]) == ["R3"]
    assert not outcome.positive_control.measured["R2"]["passed"]  # R2's ideal reads min(L, L') too: never decides
    assert outcome.verdict == "inconclusive" and "R2-L1, R2-L2, R2-L3" in outcome.reason
    assert any(a.startswith("reading R2") for a in outcome.assumptions) and "R2 (shared head budget)" in outcome.summary
    assert any(t.title.startswith("reading R2") for t in outcome.tables)


def test_only_the_readings_whose_ideal_passes_decide():
    # a reading not in ``testable`` never turns another's outcome into a pass, a fail or noise
    assert fig5.decide_readings({"R1": "pass", "R3": "fail"}, ("R3",)) == "fail"
    assert fig5.decide_readings({"R1": "fail", "R3": "noise"}, ("R3",)) == "noise"
    assert fig5.decide_readings({"R1": "fail", "R2": "pass", "R3": "fail"}, ("R2", "R3")) == "pass"
    assert fig5.decide_readings({"R1": "pass", "R3": "pass"}, ()) == "noise"


def test_a_reading_whose_ideal_fails_never_decides_whatever_it_reads(fig5_runs, monkeypatch):
    # reference: R1 forced to pass on every seed; it is not testable (its ideal reads ρ = −1), so the verdict is
    # R3's (within noise on the constructions), never a pass
    patch_runs(monkeypatch, {"fig5": fig5_runs})
    real = fig5.seed_decision
    monkeypatch.setattr(fig5, "seed_decision", lambda g: (lambda d: d | {"readings": d["readings"] | {"R1": "pass"}})(
        real(g)))
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert outcome.measured["count_readings"] == {"R1": "pass", "R3": "inconclusive"}
    assert settle(outcome)[0] == "inconclusive" and "not testable: its ideal fails the rule" in outcome.summary


def test_with_no_testable_reading_the_check_says_so_and_never_decides(fig5_runs, monkeypatch):
    # every reading's ideal planted as failing: the reason names each ideal, and settle withholds any verdict
    patch_runs(monkeypatch, {"fig5": fig5_runs})
    real = fig5.positive_controls
    monkeypatch.setattr(fig5, "positive_controls", lambda g, grids: {
        k: v | {"passed": False} for k, v in real(g, grids).items()})
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert outcome.reason.startswith("not testable under any reading: R1's ideal")
    assert not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and reason.startswith(NOT_TESTABLE)


def test_two_training_L_values_cannot_decide(fig5_runs, monkeypatch):
    # over two training L, Spearman ρ is ±1 whatever the runs do: the check says it cannot decide
    patch_runs(monkeypatch, {"fig5": {k: fig5_runs[k] for k in ("L1", "L3")}})
    outcome = fig5.exp_fig5_generalization(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith("cannot decide: 2 training L values")



def _svg_texts(svg: str, group: str) -> list[str]:
    """The texts matplotlib drew in the SVG group ``group`` (it writes each text's source as a comment before it)."""
    root = ElementTree.fromstring(svg, ElementTree.XMLParser(target=ElementTree.TreeBuilder(insert_comments=True)))
    found = next(g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("id") == group)
    return [node.text.strip() for node in found.iter() if node.tag is ElementTree.Comment]


@pytest.mark.parametrize("spread", [10.0, 1.2], ids=["over a decade", "within a decade"])
def test_fig5_figure_labels_in_math_and_its_log_axis_has_several_tick_labels(spread, tmp_path):
    # hand-made rows whose losses span a factor `spread`: BMA falls from 1 to 1/spread, the runs stay above it
    def row(L, floor):
        bma = spread ** (-TEST_L.index(L) / (len(TEST_L) - 1))
        return {"parent_loss": max(bma, floor), "bma_parent_loss": bma, "parent_loss_se": 0.001}

    metrics = {f"L{L}": {"by_test_L": {str(t): row(t, spread ** (-i / 3)) for t in TEST_L}}
               for i, L in enumerate((1, 2, 3))}
    svg = Path(figures.generalization_grid(metrics, tmp_path / "fig5.png")).with_suffix(".svg").read_text()
    *ticks, label = _svg_texts(svg, "matplotlib.axis_2")  # the losses' axis: its tick labels, then its label
    assert label.startswith("parent-selection loss $L_{") and "L_pa" not in svg
    assert len([t for t in ticks if t.strip()]) >= 2, ticks


def test_fig5_figure_labels_at_most_ten_test_L_of_the_full_tiers_thirty(tmp_path):
    tested = range(1, 31)  # the full tier's test L'
    metrics = {f"L{L}": {"by_test_L": {str(t): {"parent_loss": 1.0 + 0.1 * L, "bma_parent_loss": 1.0 / t}
                                       for t in tested}} for L in (1, 2)}
    svg = Path(figures.generalization_grid(metrics, tmp_path / "fig5.png")).with_suffix(".svg").read_text()
    for axis in ("matplotlib.axis_1", "matplotlib.axis_3"):  # the curves' and the heat map's test L'
        *ticks, label = _svg_texts(svg, axis)
        assert label == "test examples $L'$" and 2 <= len([t for t in ticks if t.strip()]) <= 10, (axis, ticks)
