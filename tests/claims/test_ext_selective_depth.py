"""The check of ``ext-selective-depth``: its per-run rule, its count rule, its verdicts, its control, the quick
tier's inconclusive reading, and the full tier on fake runs."""
import pytest

import bma_verify.reports.claims.ext_selective_depth as D
from bma_verify.reports.core import CheckContext, settle


def test_run_rule():
    assert D.judge_run({"kl": 0.005, "kl_se": 0.001}, True) == "solves"
    assert D.judge_run({"kl": 0.1, "kl_se": 0.01}, True) == "does not solve"
    assert D.judge_run({"kl": 0.02, "kl_se": 0.01}, True) == "undecided"  # the interval straddles the tolerance
    assert D.judge_run({"kl": 0.005, "kl_se": 0.001}, False) == "undecided"  # not converged


def test_count_rule_and_verdicts():
    assert D.judge_depth(["solves"] * 4 + ["undecided"]) == "solves"
    assert D.judge_depth(["solves"] * 3 + ["does not solve"] * 2) == "undecided"
    assert D.judge_depth([]) == "undecided"
    assert D.decide("does not solve", "solves") == ("pass", "")
    assert D.decide("solves", "solves") == ("fail", "")
    verdict, reason = D.decide("does not solve", "does not solve")
    assert verdict == "inconclusive" and "do not separate" in reason


def test_quick_tier_cannot_decide_and_its_control_is_rejected():
    out = D.depth_reproduction(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and reason.startswith("quick tier cannot decide")
    assert out.control.rejected and out.control.measured["kl"] > 0.05


def _run(kl, seed, converged=True):
    return {"config": {"seed": seed}, "final": {"kl": kl, "kl_se": 0.001, "uniform_lag_kl": 0.2,
                                                "uniform_lag_kl_se": 0.01},
            "curve": [[0, 0.4], [100, kl]], "converged": {"plateaued": converged}}


@pytest.mark.parametrize("kl2,kl3,expected", [(0.1, 0.005, "pass"), (0.005, 0.005, "fail"),
                                              (0.1, 0.1, "inconclusive")])
def test_full_tier_on_fake_runs(monkeypatch, tmp_path, kl2, kl3, expected):
    monkeypatch.setattr(D, "depth_runs", lambda ctx: {2: [_run(kl2, s) for s in range(5)],
                                                      3: [_run(kl3, s) for s in range(5)]})
    out = D.depth_reproduction(CheckContext(tier="full", seed=0, figures_dir=tmp_path))
    assert settle(out)[0] == expected
    assert out.measured["depth_2"]["median_kl"] == pytest.approx(kl2)
    assert out.figures == ["ext_selective_depth.png"] and (tmp_path / "ext_selective_depth.png").exists()


def test_lag_finding_separates_by_the_uniform_lag_predictor():
    runs = {2: [_run(0.2, s) for s in range(5)], 3: [_run(0.1, s) for s in range(5)]}
    assert D.lag_finding(runs).status == "holds"
    runs[2] = [_run(0.1, s) for s in range(5)]
    assert D.lag_finding(runs).status == "refuted"
