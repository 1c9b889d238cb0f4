"""The checks of ``footnote1-selective-induction``: the exact construction on D'Angelo et al.'s task (its rule, its
off-by-one control, its findings) and the trained reproduction (its per-run rule, the count rule over training
seeds, and its near-miss control: the Bayes predictor reading fewer windows, computed exactly)."""
import importlib.util
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import bma_verify.numerics.selective_induction as S
import bma_verify.reports.claims.footnote1_selective_induction.claim as F
from bma_verify.model.seeds import DEV_SEED_MIN, require_dev_seeds
from bma_verify.model.selective_training import (RECIPE_SEEDS, SelectiveTrainConfig, eval_batch, run_kernel,
                                                 truncated_bayes_evaluation)
from bma_verify.reports.checks import trained
from bma_verify.reports.core import CheckContext, settle


def test_exact_check_passes_on_their_task_and_rejects_the_off_by_one_lag():
    outcome = F.footnote1_selective_induction(CheckContext(tier="quick", seed=0))
    assert settle(outcome) == ("pass", "")
    assert outcome.measured["max_error"] <= 1e-13
    assert outcome.control.rejected and outcome.control.measured["max_error"] > 0.05
    statuses = [f.status for f in outcome.findings]
    assert statuses == ["holds", "refuted", "refuted"]  # μ terms cancel on theirs; not on ours; every window not theirs
    assert outcome.measured["every_window_max_error"] > 0.05 and outcome.measured["per_lag_max_error"] <= 1e-13


def test_exact_check_fails_when_the_construction_reads_every_window(monkeypatch):
    # planted: the per-lag mapping (windows from s = 0, pad row μ) fed to their task
    real = S.construction_predictive
    monkeypatch.setattr(F, "construction_predictive",
                        lambda k, l, x, init=None, *, task="dangelo", **kw: real(k, l, x, init, task="per_lag", **kw))
    assert settle(F.footnote1_selective_induction(CheckContext(tier="quick", seed=0)))[0] == "fail"


def test_a_harmless_shift_withholds_the_exact_pass(monkeypatch):
    real = S.construction_predictive
    monkeypatch.setattr(F, "construction_predictive", lambda *a, lag_shift=0, **k: real(*a, **k))
    verdict, reason = settle(F.footnote1_selective_induction(CheckContext(tier="quick", seed=0)))
    assert verdict == "inconclusive" and "not discriminating" in reason


def test_exact_positive_control_is_the_per_lag_variant_and_passes():
    outcome = F.footnote1_selective_induction(CheckContext(tier="quick", seed=0))
    assert outcome.positive_control.passed and outcome.positive_control.measured["max_error"] <= 1e-13


def test_a_wrong_per_lag_construction_fails_the_exact_positive_control(monkeypatch):
    # planted wrong ideal: on the per-lag variant the construction reads the lag off by one
    real = S.construction_predictive

    def off_by_one_on_per_lag(*a, task="dangelo", **k):
        return real(*a, task=task, **k) if task != "per_lag" else real(*a, task=task, lag_shift=1, **k)

    monkeypatch.setattr(F, "construction_predictive", off_by_one_on_per_lag)
    outcome = F.footnote1_selective_induction(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.positive_control.passed
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and "not testable" in reason


def _final(lag, query, se=0.001):
    return {"lag_gap": lag, "lag_gap_se": se, "query_gap": query, "query_gap_se": se, "token_gap": lag / 2,
            "lag_lpa_model": 0.5, "lag_lpa_bayes": 0.45, "uniform_lag_gap": 0.4, "uniform_lag_gap_se": se,
            "uniform_lag_query_gap": 0.1, "uniform_lag_query_gap_se": se}


def _config(seed):
    return asdict(SelectiveTrainConfig(steps=10, eval_contexts=400, seed=seed)) | {"lags": [1, 2, 3]}


@pytest.fixture(autouse=True)
def _continuation_does_not_move(monkeypatch):
    """Stand-in runs hold no model: their continuation (the miss rule) is the run itself, a model more training
    does not move, unless a test says otherwise."""
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run)


def _run(final, seed=1000, plateaued=True):
    return {"config": _config(seed), "kernel": [[0.5, 0.5], [0.5, 0.5]], "init": _final(0.4, 0.3),
            "final": final, "converged": {"plateaued": plateaued}, "curve": [[0, 0.3], [10, 0.002]],
            "laws": {"posterior": np.full((3, 3), 1 / 3), "attention": np.full((3, 3), 1 / 3)}}


def _reading(windows, seed=1000):
    """The Bayes predictor reading the last ``windows`` of L = 8 on the stand-in run's held-out sequences."""
    config = SelectiveTrainConfig(**_config(seed))
    kernel = run_kernel(config)
    reading = truncated_bayes_evaluation(kernel, config, eval_batch(config, kernel), windows)
    return _final(reading["lag_gap"], reading["query_gap"]) | reading  # the undecided columns as _final's


GOOD, BAD = _final(0.01, 0.002), _final(0.5, 0.03)


@pytest.mark.parametrize("tier,finals,expected", [
    ("full", [GOOD] * 5, ("pass", "")),                                     # every seed reaches it
    ("full", [GOOD] * 4 + [BAD], ("pass", "")),                             # 4 of 5: the count rule
    # 4 of 5 converged seeds miss, each confirmed by its continuation (a stand-in that more training does not move)
    ("full", [GOOD] + [BAD] * 4, ("fail", "")),
    ("full", [GOOD] * 3 + [BAD] * 2, ("inconclusive", "count rule undecided: 3 of 5 seeds meet the rule, 2 miss it "
                                                      "(each confirmed by its continuation)")),
    ("quick", [GOOD] * 3, ("pass", "")),                                    # the quick tier decides on 3 of 3
    ("quick", [GOOD] * 2 + [BAD], ("inconclusive", "count rule undecided: 2 of 3 seeds meet")),
])
def test_count_rule_over_training_seeds(monkeypatch, tier, finals, expected):
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(f, 1000 + i) for i, f in enumerate(finals)])
    out = F.footnote1_selective_training(CheckContext(tier=tier, seed=0))
    assert out.control.rejected and out.seeds["n"] == len(finals)
    verdict, reason = settle(out)
    assert verdict == expected[0] and reason.startswith(expected[1])


def test_a_converged_model_that_cannot_represent_the_bayes_predictor_misses_on_every_seed(monkeypatch):
    # stand-in: the Bayes predictor reading half of the 8 windows (its lag law is not the posterior), flat curves,
    # and a continuation that does not move it: every seed's miss is confirmed and the claim reads NOT REPRODUCED
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(_reading(4, 1000 + i), 1000 + i) for i in range(3)])
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    assert out.seeds["statuses"] == ["fail"] * 3 and out.seeds["counts"]["miss"] == 3
    assert [c["confirmed"] for c in out.converged["continuations"]] == [True] * 3
    assert settle(out)[0] == "fail"


def test_a_miss_whose_continuation_reaches_the_bayes_predictor_was_still_learning(monkeypatch):
    # stand-in: the same misses, but the continuation of each run ends at GOOD (more training reached the rule)
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run | {"final": GOOD})
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(_reading(4, 1000 + i), 1000 + i) for i in range(3)])
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    assert out.seeds["counts"]["still_learning"] == 3 and settle(out)[0] == "inconclusive"
    assert "3 missed but moved at 2× their steps" in out.reason


def test_a_seed_whose_attention_never_found_the_lags_is_named(monkeypatch):
    # reference: the stand-ins' init lag KL is 0.4; BAD ends at 0.5 (no better than at initialisation), GOOD at 0.01
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(f, 1000 + i) for i, f in enumerate([GOOD, GOOD, BAD])])
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    assert out.measured["never_found_lags"] == [1002]
    assert out.reason.endswith("seed 1002 never found the lags (lag KL 0.5 at the end, 0.4 at initialisation)")
    assert "seed 1000 never" not in out.summary and "seed 1002 never found the lags" in out.summary


def test_unconverged_seeds_do_not_count(monkeypatch):
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(BAD, 1000 + i, plateaued=False) for i in range(3)])
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0))
    assert settle(out)[0] == "inconclusive" and "3 not converged" in out.reason


def test_power_curve_accepts_the_bayes_predictor_and_rejects_reading_few_windows():
    # reference: the exact lag posterior of the full prefix (m = L reads it: gap 0)
    power = F.reading_power(_run(GOOD))
    assert [p["x"] for p in power] == list(range(1, 9))
    assert power[-1]["value"] == pytest.approx(0.0, abs=1e-12) and not power[-1]["rejected"]
    assert all(p["rejected"] for p in power[:4])  # half the windows or fewer
    assert all(a["value"] > b["value"] for a, b in zip(power, power[1:]))  # more windows read, closer to Bayes


@pytest.mark.parametrize("seed", [1000, 1001, 1002])
def test_lag_tolerance_alone_rejects_the_one_window_near_miss(seed):
    # Reference: the exact lag posterior of the full prefix; the Bayes predictor reading 7 of the 8 windows (the
    # near-miss control) is rejected by its lag KL alone, not only through its query part as under LAG_TOL 0.1.
    decided = F.decide_run(_reading(7, seed))
    assert decided["lag_upper"] > F.LAG_TOL and decided["verdict"] == "fail"
    assert F.decide_run(_reading(8, seed))["verdict"] == "pass"


def test_recipe_was_not_set_on_report_training_seeds():
    # the report's training seeds (any report seed) are below DEV_SEED_MIN; the recipe's runs are not
    assert all(s >= DEV_SEED_MIN for seeds in RECIPE_SEEDS.values() for s in seeds)
    assert require_dev_seeds(RECIPE_SEEDS["checked_on"]) == list(RECIPE_SEEDS["checked_on"])
    assert require_dev_seeds(RECIPE_SEEDS["grid_on"]) == list(RECIPE_SEEDS["grid_on"])


def test_the_check_runs_small_with_its_figure(monkeypatch, tmp_path):
    monkeypatch.setitem(F.TRAIN_SIZES, "quick", {"steps": 30, "eval_contexts": 200})
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert out.figures == ["footnote1_selective_training.png"] and out.seeds["n"] == 3
    assert all(s < DEV_SEED_MIN for s in out.seeds["training_seeds"])
    assert (tmp_path / "footnote1_selective_training.png").exists()
    assert out.measured["first_run"]["final"]["uniform_lag_query_gap"] > 0.0 and len(out.control.power) == 8


def test_the_development_probe_refuses_report_seeds():
    # the probe that checked the recipe at the quick size (docs/probes) takes development seeds only
    path = Path(__file__).parents[2] / "docs" / "probes" / "footnote1_dev_seeds.py"
    spec = importlib.util.spec_from_file_location("footnote1_dev_seeds", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    with pytest.raises(ValueError, match="development seeds"):
        probe.main("quick", [F.training_seeds(CheckContext(tier="quick", seed=0), "footnote1-selective-induction")[0]])
