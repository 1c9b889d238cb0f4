"""The checks of ``footnote1-selective-induction``: the exact construction on D'Angelo et al.'s task (its rule, its
off-by-one control, its findings) and the trained reproduction (its per-run rule, its control, its count rule)."""
import numpy as np
import pytest

import bma_verify.numerics.selective_induction as S
import bma_verify.reports.claims.footnote1_selective_induction as F
from bma_verify.model.selective_training import SelectiveTrainConfig
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


def _final(lag, query, uniform_lag, uniform_query, se=0.001):
    return {"lag_gap": lag, "lag_gap_se": se, "query_gap": query, "query_gap_se": se, "token_gap": lag / 2,
            "lag_lpa_model": 0.5, "lag_lpa_bayes": 0.45, "uniform_lag_gap": uniform_lag, "uniform_lag_gap_se": se,
            "uniform_lag_query_gap": uniform_query, "uniform_lag_query_gap_se": se}


def _run(final, seed=1):
    config = SelectiveTrainConfig(steps=10).__dict__ | {"lags": [1, 2, 3], "seed": seed}
    return {"config": config, "kernel": [[0.5, 0.5], [0.5, 0.5]], "init": _final(0.4, 0.3, 0.4, 0.1),
            "final": final, "converged": {"plateaued": True}, "curve": [[0, 0.3], [10, 0.002]],
            "laws": {"posterior": np.full((3, 3), 1 / 3), "attention": np.full((3, 3), 1 / 3)}}


GOOD, BAD = _final(0.02, 0.002, 0.4, 0.1), _final(0.5, 0.03, 0.4, 0.1)


@pytest.mark.parametrize("finals,expected", [
    ([GOOD] * 5, ("pass", "")),                                     # every run reaches it, control rejected
    ([GOOD] * 4 + [BAD], ("pass", "")),                             # 4 of 5 is the count rule's 80 %
    ([GOOD] + [BAD] * 4, ("fail", "")),                             # at most 20 % pass
    ([GOOD] * 3 + [BAD] * 2, ("inconclusive", "the runs disagree: 3 of 5")),
])
def test_full_tier_count_rule(monkeypatch, finals, expected):
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(f, i) for i, f in enumerate(finals)])
    out = F.footnote1_selective_training(CheckContext(tier="full", seed=0))
    assert out.control.rejected
    verdict, reason = settle(out)
    assert verdict == expected[0] and reason.startswith(expected[1])


def test_quick_tier_cannot_decide(monkeypatch):
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(GOOD)])
    verdict, reason = settle(F.footnote1_selective_training(CheckContext(tier="quick", seed=0)))
    assert verdict == "inconclusive" and reason.startswith("quick tier cannot decide")


def test_an_uninformative_kernel_withholds_the_pass(monkeypatch):
    # the kernel's rows alike: the uniform-lag predictor is itself within the tolerance, so nothing was tested
    monkeypatch.setattr(F, "selective_runs", lambda ctx: [_run(_final(0.02, 0.002, 0.01, 0.005))] * 5)
    out = F.footnote1_selective_training(CheckContext(tier="full", seed=0))
    verdict, reason = settle(out)
    assert not out.control.rejected and verdict == "inconclusive" and "not discriminating" in reason


def test_the_check_runs_small_with_its_figure(monkeypatch, tmp_path):
    monkeypatch.setitem(F.TRAIN_SIZES, "quick", {"steps": 30, "eval_contexts": 200})
    out = F.footnote1_selective_training(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert out.verdict == "inconclusive" and out.figures == ["footnote1_selective_training.png"]
    assert out.control.rejected
    assert (tmp_path / "footnote1_selective_training.png").exists()
    assert out.measured["runs"][0]["final"]["uniform_lag_query_gap"] > 0.0
