"""The check of ``ext-selective-depth``: its per-run rule, its per-seed reading and the count rule over seeds, its
verdicts, its control and the control's power curve (computed on the exact Bayes predictive), the quick tier's
inconclusive reading, and the full tier on stand-in runs."""
import numpy as np
import pytest

import bma_verify.reports.claims.ext_selective_depth.claim as D
from bma_verify.model.convergence import plateau_test
from bma_verify.reports.core import CheckContext, settle


def test_run_rule():
    assert D.judge_run({"kl": 0.005, "kl_se": 0.001}, True) == "solves"
    assert D.judge_run({"kl": 0.1, "kl_se": 0.01}, True) == "does not solve"
    assert D.judge_run({"kl": 0.02, "kl_se": 0.01}, True) == "undecided"  # the interval straddles the tolerance
    assert D.judge_run({"kl": 0.005, "kl_se": 0.001}, False) == "undecided"  # not converged


def test_seed_status():
    assert D.seed_status("does not solve", "solves") == "pass"
    assert D.seed_status("solves", "solves") == "fail"
    assert D.seed_status("does not solve", "does not solve") == "noise"
    assert D.seed_status("undecided", "solves") == "noise"


def test_quick_tier_cannot_decide_and_its_control_is_rejected_with_its_power():
    # reference: the exact Bayes predictive (w = 1 has KL 0 to itself); the uniform-lag predictor is far from it
    out = D.depth_reproduction(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and reason.startswith("quick tier cannot decide")
    assert out.control.rejected and out.control.measured["kl"] > 0.05
    power = out.control.power
    assert [p["x"] for p in power] == list(D.POWER_WEIGHTS) and power[0]["rejected"] and not power[-1]["rejected"]
    assert power[-1]["value"] == pytest.approx(0.0, abs=1e-12)
    assert all(a["value"] > b["value"] for a, b in zip(power, power[1:]))


def test_positive_control_is_the_bayes_predictor_and_passes():
    positive = D.depth_reproduction(CheckContext(tier="quick", seed=0)).positive_control
    assert positive.passed and positive.measured["x"] == 1.0 and positive.measured["value"] == pytest.approx(0.0)


def test_a_tolerance_nothing_meets_fails_the_positive_control(monkeypatch):
    # planted broken rule: a negative KL tolerance, which even the Bayes predictor (KL 0) cannot meet
    monkeypatch.setattr(D, "KL_TOL", -1.0)
    outcome = D.depth_reproduction(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    assert "not testable" in settle(outcome)[1]


def _curve(kl, shape):
    steps = np.arange(0, 3001, 100)
    noise = np.random.default_rng(0).normal(scale=1e-4, size=len(steps))
    values = kl + noise + (0.0 if shape == "flat" else 300.0 / (steps + 1))
    return [[int(s), float(v)] for s, v in zip(steps, values)]


def _run(kl, seed, shape="flat"):
    curve = _curve(kl, shape)
    return {"config": {"seed": seed}, "final": {"kl": kl, "kl_se": 0.001, "uniform_lag_kl": 0.2,
                                                "uniform_lag_kl_se": 0.01},
            "curve": curve, "converged": plateau_test(*zip(*curve))}


@pytest.mark.parametrize("kl2,kl3,expected", [(0.1, 0.005, "pass"), (0.005, 0.005, "fail"),
                                              (0.1, 0.1, "inconclusive")])
def test_full_tier_on_stand_in_runs(monkeypatch, tmp_path, kl2, kl3, expected):
    # stand-ins: converged runs (flat held-out curves) at hand-set KLs; a converged depth 2 that solves the task
    # (0.005) fails their negative result; two depths that both miss read inconclusive
    monkeypatch.setattr(D, "depth_runs", lambda ctx: {2: [_run(kl2, s) for s in range(5)],
                                                      3: [_run(kl3, s) for s in range(5)]})
    out = D.depth_reproduction(CheckContext(tier="full", seed=0, figures_dir=tmp_path))
    assert settle(out)[0] == expected and out.converged["plateaued"]
    assert out.measured["depth_2"]["median_kl"] == pytest.approx(kl2)
    assert out.seeds["metrics"]["kl_depth_3"]["median"] == pytest.approx(kl3)
    assert out.measured["depth_2"]["runs"][0]["converged"]["plateaued"] is True  # the plateau test, not a bool
    assert out.figures == ["ext_selective_depth.png"] and (tmp_path / "ext_selective_depth.png").exists()


def test_count_rule_over_seeds(monkeypatch):
    # 3 seeds separate the depths, 2 do not (depth 3 at 0.1): 3 of 5 is undecided; depth-3 runs still falling on
    # 2 seeds leave 3 counted seeds, too few to decide
    monkeypatch.setattr(D, "depth_runs", lambda ctx: {2: [_run(0.1, s) for s in range(5)],
                                                      3: [_run(0.005 if s < 3 else 0.1, s) for s in range(5)]})
    out = D.depth_reproduction(CheckContext(tier="full", seed=0))
    assert out.verdict == "inconclusive" and out.reason.startswith("count rule undecided: 3 of 5 seeds meet")
    monkeypatch.setattr(D, "depth_runs", lambda ctx: {2: [_run(0.1, s) for s in range(5)],
                                                      3: [_run(0.005, s, "falling" if s < 2 else "flat")
                                                          for s in range(5)]})
    out = D.depth_reproduction(CheckContext(tier="full", seed=0))
    assert out.verdict == "inconclusive" and "2 not converged" in out.reason and not out.converged["plateaued"]


def test_lag_finding_separates_by_the_uniform_lag_predictor():
    runs = {2: [_run(0.2, s) for s in range(5)], 3: [_run(0.1, s) for s in range(5)]}
    assert D.lag_finding(runs).status == "holds"
    runs[2] = [_run(0.1, s) for s in range(5)]
    assert D.lag_finding(runs).status == "refuted"
