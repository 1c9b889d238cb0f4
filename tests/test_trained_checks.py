"""The machinery every trained check shares (reports/checks/trained.py): the trained-run cache, the noise band
of a decided value, and the verdict of a rule on a run that may not have converged (its plateau test)."""
from __future__ import annotations

import pytest
import torch

import bma_verify.reports.checks.trained as trained
from bma_verify.model.convergence import runs_plateau
from bma_verify.reports.core import CheckContext, Control


def test_a_value_within_its_noise_band_is_not_decided():
    # reference: the band is symmetric around the threshold; NaN (nothing to measure) fails
    band = 0.075
    assert trained.threshold_side(0.25 - band / 2, 0.25, band) == "noise"
    assert trained.threshold_side(0.25 + band / 2, 0.25, band) == "noise"
    assert trained.threshold_side(0.25 - 2 * band, 0.25, band) == "pass"
    assert trained.threshold_side(0.25 + 2 * band, 0.25, band) == "fail"
    assert trained.threshold_side(float("nan"), 0.25, band) == "fail"
    assert trained.threshold_side(0.25 + 2 * band, 0.25, band, upper=False) == "pass"
    assert trained.combine_sides({"a": "pass", "b": "noise"}) == "noise"
    assert trained.combine_sides({"a": "fail", "b": "noise"}) == "fail"


def _curve_metrics(values) -> dict:
    return {"curves": {"step": list(range(100, 100 * len(values) + 1, 100)), "query_loss": list(values)}}


def test_a_failing_rule_on_an_unconverged_run_is_inconclusive():
    # an optimisation shortfall of ours is not evidence against the paper; a converged run's fail stands.
    # Reference: hand-made curves, flat (a plateau) and falling 0.1 nats per evaluation
    flat = trained.run_convergence(_curve_metrics([2.0] * 10))
    falling = trained.run_convergence(_curve_metrics([3.0 - 0.1 * i for i in range(10)]))
    assert flat["plateaued"] and not falling["plateaued"]
    assert falling["improvement"] == pytest.approx(0.4) and falling["objective"] == "held-out query_loss"
    confirmed = [{"confirmed": True}] * 3
    assert trained.count_verdict(["fail"] * 3, [flat] * 3, confirmed)[0] == "fail"
    verdict, reason, _ = trained.count_verdict(["fail"] * 3, [falling] * 3, confirmed)
    assert verdict == "inconclusive" and reason.endswith("3 not converged (needs 3 of 3)")
    # a converged miss without a continuation counts for neither side, and the reason says why
    verdict, reason, _ = trained.count_verdict(["fail"] * 3, [flat] * 3, why_unconfirmed="no budget")
    assert verdict == "inconclusive" and reason.endswith("3 converged seed(s) miss it unconfirmed, counted for "
                                                         "neither side: no budget")
    verdict, reason, _ = trained.count_verdict(["noise"] * 3, [flat] * 3)
    assert verdict == "inconclusive" and "3 within noise" in reason
    both = runs_plateau({"a": flat, "b": falling})
    assert not both["plateaued"] and both["not_plateaued"] == ["b"]


def test_a_run_that_never_evaluated_is_not_converged():
    # train(steps=0) records no curve: nothing to judge a plateau on
    test = trained.run_convergence({"steps": 0})
    assert not test["plateaued"] and test["improvement"] is None


def test_a_converged_run_far_from_bma_fails_its_parent_gap():
    # reference: the threshold (0.028 nats) and its band (0.003) by hand
    ctx = CheckContext(tier="quick", seed=0)
    assert trained.parent_gap_side(ctx, {"parent_loss_gap": 0.3}) == "fail"
    assert trained.parent_gap_side(ctx, {"parent_loss_gap": 0.01}) == "pass"
    assert trained.parent_gap_side(ctx, {"parent_loss_gap": 0.029}) == "noise"
    assert trained.parent_gap_side(ctx, {"parent_loss_gap": 0.032}) == "fail"


def test_trained_runs_train_once_per_report(monkeypatch):
    # reference: the calls a stand-in trainer records
    asked = []

    def fake(name, *, tier, seed, device, quiet, output):
        asked.append((name, output))
        return {name: object()}

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    ctx = CheckContext(tier="quick", seed=0)
    first = trained.trained_runs(ctx, "fig2")
    assert trained.trained_runs(ctx, "fig2") is first
    trained.trained_runs(ctx, "fig2", output="logit")
    assert asked == [("fig2", "mixture"), ("fig2", "logit")]


def test_presets_train_on_the_checks_device(monkeypatch):
    # reference: the device argument train_preset_runs receives, recorded by a stand-in (CUDA reported present so
    # that the context accepts "cuda" on a machine without one; nothing is trained)
    seen = []

    def fake(name, *, tier, seed, device, quiet, output):
        seen.append(device)
        return {}

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    trained.trained_runs(CheckContext(tier="quick", seed=0), "robustness")
    trained.trained_runs(CheckContext(tier="quick", seed=0, device="cuda"), "robustness")
    assert seen == ["cpu", "cuda"]
    with pytest.raises(ValueError, match="device must be one of"):
        CheckContext(device="tpu")


def test_with_two_jobs_every_seeds_runs_train_once_in_the_executor_longest_first(monkeypatch):
    # how the full tier's fig5 (10 runs a seed) uses both cores: one map over every (seed, run), the largest runs
    # first (steps × batch × stream × heads), each seed's runs then read from the cache in the preset's label order.
    # Reference: the preset's configs and training seeds, enumerated here; train_preset_runs must not be called.
    from bma_verify.reports.plans import preset_configs
    mapped = []

    def fake_map(fn, configs, desc=None):
        mapped.append(list(configs))
        return [("run", c) for c in configs]

    monkeypatch.setattr(trained, "train_preset_runs", lambda *a, **k: pytest.fail("trained one by one"))
    ctx = CheckContext(tier="full", seed=0, jobs=2)
    monkeypatch.setattr(ctx, "map", fake_map)
    runs = trained.seeded_runs(ctx, "fig5")
    seeds = trained.training_seeds(ctx, "fig5")
    configs = {s: preset_configs("fig5", tier="full", seed=s, device="cpu") for s in seeds}
    assert len(mapped) == 1 and len(mapped[0]) == sum(len(c) for c in configs.values())
    costs = [c.steps * c.batch_size * (c.L + 1) * c.H * c.K for c in mapped[0]]
    assert costs == sorted(costs, reverse=True)
    assert [list(r) for r in runs] == [list(configs[s]) for s in seeds]
    assert all(runs[i][label] == ("run", configs[s][label]) for i, s in enumerate(seeds) for label in configs[s])
    assert trained.seeded_runs(ctx, "fig5") == runs and len(mapped) == 1  # cached: no second map
    # one job: no map, each seed trains where it is read
    calls = []
    monkeypatch.setattr(trained, "train_preset_runs", lambda name, **k: calls.append(k["seed"]) or {})
    trained.seeded_runs(CheckContext(tier="quick", seed=0, jobs=1), "fig5")
    assert calls == trained.training_seeds(CheckContext(tier="quick", seed=0), "fig5") and len(mapped) == 1


def test_runs_trained_in_two_real_workers_equal_the_serial_runs():
    # the joblib path that `check --jobs 2` takes (loky processes, one torch thread each), on real short runs of two
    # different sizes given smallest first. Reference: the same configs trained one by one in this process; each run
    # is seeded by its config, so every curve and metric must be equal, and come back in the order given.
    from bma_verify.model.presets import train_config
    from bma_verify.model.train_config import TrainConfig
    configs = [TrainConfig(d=3, H=3, L=2, K=4, steps=6, batch_size=16, eval_every=3, eval_contexts=32, seed=5,
                           device="cpu"),
               TrainConfig(d=3, H=4, L=3, K=6, steps=6, batch_size=16, eval_every=3, eval_contexts=32, seed=6,
                           device="cpu")]
    parallel = trained.train_in_workers(CheckContext(tier="quick", seed=0, jobs=2), configs)
    assert trained.train_in_workers(CheckContext(tier="quick", seed=0, jobs=1), configs) is None
    serial = [train_config(c) for c in configs]
    assert [run.config for run in parallel] == configs
    for got, want in zip(parallel, serial):
        curves = {k: v for k, v in want.metrics["curves"].items() if k != "seconds"}  # wall time differs
        assert curves.keys() >= {"step", "query_loss"}
        assert {k: got.metrics["curves"][k] for k in curves} == curves
        assert got.metrics["parent_loss_gap"] == want.metrics["parent_loss_gap"]


@pytest.mark.parametrize("statuses, plateaued, verdict", [
    (["pass"] * 3, [True] * 3, "pass"),
    (["pass", "pass", "fail"], [True] * 3, "inconclusive"),  # 2 of 3 meet: short of 3 of 3
    (["fail"] * 3, [True] * 3, "fail"),
    (["pass"] * 3, [True, True, False], "inconclusive"),  # a seed still improving counts for neither side
    (["pass"] * 4 + ["fail"], [True] * 5, "pass"),  # 4 of 5
    (["fail"] * 4 + ["noise"], [True] * 5, "fail"),
    (["pass"] * 3 + ["fail"] * 2, [True] * 5, "inconclusive"),
])
def test_count_rule(statuses, plateaued, verdict):
    # reference: the rule by hand, at least ceil(0.8 n) converged seeds on one side; every miss here is confirmed by
    # its continuation (the unconfirmed ones: test_a_miss_counts_only_when_its_continuation_confirms_it)
    tests = [{"plateaued": p} for p in plateaued]
    continuations = [{"confirmed": True} if s == "fail" else None for s in statuses]
    got, reason, converged = trained.count_verdict(statuses, tests, continuations)
    assert got == verdict
    assert (reason == "") == (verdict != "inconclusive")
    assert converged["converged_seeds"] == sum(plateaued) and converged["seeds"] == tests
    assert converged["plateaued"] == (sum(plateaued) >= trained.seeds_needed(len(statuses)))


@pytest.mark.parametrize("continuation, verdict, key", [
    (None, "inconclusive", "unconfirmed_miss"),  # no continuation: the miss counts for neither side
    ({"confirmed": True}, "fail", "miss"),
    ({"confirmed": False}, "inconclusive", "still_learning"),  # moved at 2× its steps: not converged
])
def test_a_miss_counts_only_when_its_continuation_confirms_it(continuation, verdict, key):
    # reference: the miss rule by hand (model.continuation): 3 of 3 converged misses, each with the same record
    flat = {"plateaued": True}
    got, reason, converged = trained.count_verdict(["fail"] * 3, [flat] * 3, [continuation] * 3)
    counts = trained.seed_counts(["fail"] * 3, [flat] * 3, [continuation] * 3)
    assert got == verdict and counts[key] == 3 and sum(counts.values()) == 3
    assert converged["plateaued"] == (key != "still_learning")
    assert converged["continuations"] == [continuation] * 3
    # a seed still improving, or one that met the rule, needs no continuation: its record is ignored
    assert trained.seed_category("pass", flat, {"confirmed": False}) == "meet"
    assert trained.seed_category("fail", {"plateaued": False}, continuation) == "not_converged"


def test_seeds_record_median_and_range():
    # reference: numpy's median of the per-seed values; bools and strings are not metrics
    record = trained.seeds_record([3, 1, 2], ["pass", "fail", "noise"], [{"plateaued": True}] * 3,
                                  [{"gap": 0.3, "ok": True, "name": "a"}, {"gap": 0.1, "ok": True, "name": "b"},
                                   {"gap": 0.2, "ok": False, "name": "c"}])
    assert set(record["metrics"]) == {"gap"}
    assert record["metrics"]["gap"] == {"median": 0.2, "min": 0.1, "max": 0.3, "values": [0.3, 0.1, 0.2]}
    assert record["counts"] == {"meet": 1, "miss": 0, "unconfirmed_miss": 1, "still_learning": 0, "undecided": 1,
                                "not_converged": 0}
    assert record["training_seeds"] == [3, 1, 2] and "3 of 3" in record["count_rule"]


def test_a_tier_that_trains_nothing_records_no_seed_and_no_plateau_and_cannot_pass(tmp_path):
    # Reference: the count rule for the quick tier's 3 seeds (count_rule_text) and settle(): a check that trained
    # nothing records zero seeds, no converged run, and stays inconclusive even if it were handed a "pass".
    from bma_verify.reports.core import CheckOutcome, Control, settle
    from bma_verify.reports.render_evidence import seeds_line
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    record = trained.untrained_record(ctx, "quick tier cannot decide: too slow")
    assert record["seeds"]["n"] == 0 and record["seeds"]["decided"] is False
    assert record["seeds"]["count_rule"] == trained.count_rule_text(3)
    assert record["converged"]["plateaued"] is False and record["converged"]["converged_seeds"] == 0
    control = Control("a near miss", {}, rejected=True)
    outcome = CheckOutcome(verdict="pass", measured={}, control=control, **record)
    assert settle(outcome) == ("inconclusive", "not converged")
    assert seeds_line(record["seeds"]).startswith("none trained at this tier (quick tier cannot decide: too slow)")


def test_every_check_of_the_reference_that_cannot_decide_says_it_trained_nothing():
    # Reference: reports/reference/results.json (the quick tier): each trained check whose reason is that its tier
    # cannot decide records zero training seeds and no converged run, and reads inconclusive (a check that trained
    # some readings and not others, exp-robustness's, names the untrained one after its trained ones)
    import json
    from pathlib import Path
    results = json.loads((Path(__file__).resolve().parents[1] / "reports/reference/results.json").read_text())
    undecided = [(c["id"], k) for c in results["claims"] for k in c["checks"]
                 if k["kind"] == "model" and (k.get("reason") or "").startswith("quick tier cannot decide")]
    assert len(undecided) >= 5
    for claim, check in undecided:
        assert check["verdict"] == "inconclusive", claim
        assert check["seeds"]["n"] == 0 and check["seeds"]["decided"] is False, claim
        assert check["converged"]["plateaued"] is False, claim


def test_a_gpt_runs_cost_follows_its_width_and_depth_as_measured():
    # train_in_workers hands out the costliest run first; a GPT has no K, so its cost must come from its width and
    # depth. Compared with measured wall times of two full-tier runs (two one-thread processes on this machine kind,
    # docs/notes/exp-robustness.md): gpt-d3-rope at width 128, 8 heads, 698 s; gpt-d2-rope at the shared setting
    # (width 64, 4 heads) 161 s. The estimate must order them and get their ratio within a third.
    from dataclasses import replace

    from bma_verify.reports.plans import preset_configs
    from bma_verify.model.train_config import GPTOptions
    base = preset_configs("robustness", tier="full", seed=1000, device="cpu")["gpt-d2-rope"]
    shared = replace(base, model=GPTOptions(depth=2, width=64, heads=4, position="rope"), batch_size=64, steps=1600)
    wide = replace(shared, model=GPTOptions(depth=3, width=128, heads=8, position="rope"))
    ratio = trained.run_cost(wide) / trained.run_cost(shared)
    assert 698 / 161 * 0.75 < ratio < 698 / 161 * 1.35
    absolute = preset_configs("robustness", tier="full", seed=1000, device="cpu")["absolute"]
    # the rate's two sizes, written as literals in trained.py, are the sizes this code computes for its two runs
    from bma_verify.model.gpt_training import gpt_multiply_adds
    assert gpt_multiply_adds(shared) == pytest.approx(1.42e12, rel=0.01)
    assert trained.run_cost(replace(absolute, steps=1500, batch_size=512)) == pytest.approx(2.03e9, rel=0.01)
    assert trained.run_cost(shared) > trained.run_cost(absolute)  # 161 s against about 60 s (44 s per 1500 steps at 512)


def test_the_ideal_end_of_a_power_curve_is_the_positive_control():
    # reference: hand-made power curves; the last point is the ideal (BMA reading all L examples)
    power = [{"x": 1, "label": "BMA reading 1 of 2", "rejected": True, "value": 0.5, "rule": {"gap": "fail"}},
             {"x": 2, "label": "BMA reading 2 of 2", "rejected": False, "value": 0.0, "rule": {"gap": "pass"}}]
    control = Control("near miss", {}, rejected=True, power=power)
    ideal = trained.ideal_control(control, "BMA itself")
    assert ideal.passed and ideal.measured == {"x": 2, "value": 0.0, "rule": {"gap": "pass"}}
    within_noise = [power[0], power[1] | {"rule": {"gap": "pass", "accuracy": "noise"}}]
    assert not trained.ideal_control(Control("n", {}, True, power=within_noise), "BMA").passed
    rejected = [power[0], {"x": 2, "label": "", "rejected": True, "value": 0.1}]
    assert not trained.ideal_control(Control("n", {}, True, power=rejected), "BMA").passed


def test_confirm_misses_continues_only_converged_misses_of_a_run_set_that_continues(monkeypatch):
    # reference: stand-in runs whose "value" the judge reads, and a stand-in continuation that moves it by hand
    from types import SimpleNamespace
    moved_to = {"a": 0.099, "b": 0.05}  # a: moved 1/70 of the way to 0.03 (stands); b: moved 5/7 of it (learning)
    calls = []

    def fake_continue(run, quiet=True):
        calls.append(run.name)
        return SimpleNamespace(name=run.name, value=moved_to[run.name],
                               metrics={"curves": {"step": [20, 40], "query_loss": [1.0, 0.9]}})
    monkeypatch.setattr(trained, "continue_run", fake_continue)
    judge = lambda run: ("fail" if run.value > 0.03 else "pass", {"v": (run.value, 0.03, True)})  # noqa: E731
    runs = [SimpleNamespace(name=n, value=0.1) for n in ("a", "b", "c")]
    flat = {"plateaued": True}
    quick = CheckContext(tier="quick", seed=0)
    records = trained.confirm_misses(quick, "fig2", runs, ["fail", "fail", "pass"], [flat] * 3, judge,
                                     ["1:a", "2:b", "3:c"])
    assert [r and r["confirmed"] for r in records] == [True, False, None] and calls == ["a", "b"]
    assert records[0]["values"]["v"]["moved_fraction"] == pytest.approx(0.001 / 0.07)
    assert records[1]["status_after"] == "fail" and records[0]["steps"] == 40
    # cached per report: asking again continues nothing more
    trained.confirm_misses(quick, "fig2", runs, ["fail", "fail", "pass"], [flat] * 3, judge, ["1:a", "2:b", "3:c"])
    assert calls == ["a", "b"]
    # a seed still improving is never continued; a run set that does not continue at this tier records None
    assert trained.confirm_misses(quick, "fig2", runs[:1], ["fail"], [{"plateaued": False}], judge, ["9:a"]) == [None]
    assert trained.confirm_misses(quick, "robustness", runs, ["fail"] * 3, [flat] * 3, judge,
                                  ["1:a", "2:b", "3:c"]) == [None] * 3
    assert "quick tier runs no continuation" in trained.why_unconfirmed(quick, "robustness")
