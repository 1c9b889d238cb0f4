"""The check of claim ext-dag-training (reports/claims/ext_dag_training/claim.py).

Compared against: BMA reading fewer examples (``model.dag_training.truncated_bma_evaluation``, exact set posteriors)
as a converged stand-in that cannot represent BMA (it must fail) and as the near-miss control (rejected at m = L − 1,
accepted at m = L); the count rule over hand-set per-seed rule outcomes; the plateau test on flat and falling
curves. Training itself is tested in tests/test_dag_training.py.
"""
import importlib.util
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import bma_verify.reports.claims.ext_dag_training.claim as E
from bma_verify.model.convergence import plateau_test
from bma_verify.model.dag_training import eval_task, run_kernels, truncated_bma_evaluation
from bma_verify.model.seeds import require_dev_seeds
from bma_verify.reports.checks import trained
from bma_verify.reports.core import CheckContext, settle

GOOD = {"lpa_gap": 0.005, "lpa_gap_se": 0.001, "query_gap": 0.001, "query_gap_se": 0.001}
BASE = {"lpa_model": 1.0, "lpa_bma": 0.99, "loss_model": 1.0, "loss_bma": 0.99}


def _curve(shape: str) -> list:
    """[[step, held-out gap]] every 150 steps: "flat" (noise of 0.0005 around 0.001) or "falling" (0.3 nats over
    the last 20% of the steps)."""
    steps = np.arange(0, 3001, 150)
    noise = np.random.default_rng(0).normal(scale=0.0005, size=len(steps))
    values = 0.001 + noise + (0.0 if shape == "flat" else 600.0 / (steps + 1))
    return [[int(s), float(v)] for s, v in zip(steps, values)]


def _config(seed: int) -> dict:
    return asdict(E.run_config("quick", "pair", seed)) | {"eval_contexts": 300}


def _run(final: dict, shape: str = "flat", seed: int = 1000) -> dict:
    curve = _curve(shape)
    return {"config": _config(seed), "init": {**BASE, **GOOD, "lpa_gap": 0.3}, "final": {**BASE, **final},
            "curve": curve, "plateau": plateau_test(*zip(*curve)), "converged": True, "seconds": 0.0}


def _patch(monkeypatch, finals, shape="flat"):
    monkeypatch.setattr(E, "TRAINS", ("quick", "full"))  # the count rule over the quick tier's three seeds
    # ... with the full tier's miss rule; a stand-in holds no model: its continuation is itself (it does not move)
    monkeypatch.setitem(trained.CONTINUED, "quick", trained.CONTINUED["quick"] + (E.RUN_SET,))
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run)
    runs = {"seeds": [1000 + i for i in range(len(finals))], "pair": [_run(f, shape, 1000 + i)
                                                                   for i, f in enumerate(finals)],
            "heads": _run({"lpa_gap": 0.4, "lpa_gap_se": 0.01, "query_gap": 0.14, "query_gap_se": 0.01})}
    monkeypatch.setattr(E, "training_runs", lambda ctx: runs)


def _reading(examples: int, seed: int = 1000) -> dict:
    """BMA reading the last ``examples`` of L = 5 on the stand-in run's held-out contexts."""
    config = E.DagTrainConfig(**_config(seed))
    kernels = run_kernels(config)
    return truncated_bma_evaluation(kernels, eval_task(config, kernels), config.k, examples)


def test_converged_runs_at_bma_pass_and_the_near_miss_is_rejected(monkeypatch):
    _patch(monkeypatch, [GOOD] * 3)
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert settle(out) == ("pass", "")
    assert out.control.rejected and out.control.measured["examples"] == 4
    assert out.seeds["counts"] == {"meet": 3, "miss": 0, "unconfirmed_miss": 0, "still_learning": 0, "undecided": 0,
                                   "not_converged": 0}
    assert out.seeds["metrics"]["lpa_gap"]["median"] == pytest.approx(0.005)


@pytest.mark.parametrize("examples", [2, 4])
def test_a_converged_model_that_cannot_represent_bma_misses_on_every_seed(monkeypatch, examples):
    # stand-in: BMA reading only the last m of the 5 examples (its law cannot be the full posterior), flat curves, and
    # a continuation that does not move it: every seed's miss is confirmed, NOT REPRODUCED
    _patch(monkeypatch, [_reading(examples, 1000 + i) for i in range(3)])
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.converged["plateaued"] and out.seeds["statuses"] == ["fail"] * 3
    assert out.seeds["counts"]["miss"] == 3 and settle(out)[0] == "fail"


def test_a_miss_whose_continuation_reaches_bma_was_still_learning(monkeypatch):
    _patch(monkeypatch, [_reading(2, 1000 + i) for i in range(3)])
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run | {"final": {**BASE, **GOOD}})
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.seeds["counts"]["still_learning"] == 3 and settle(out)[0] == "inconclusive"
    assert [c["confirmed"] for c in out.converged["continuations"]] == [False] * 3


def test_count_rule_needs_every_seed_of_three(monkeypatch):
    bad = _reading(2)
    _patch(monkeypatch, [GOOD, GOOD, bad])
    verdict, reason = settle(E.ext_dag_training(CheckContext(tier="quick", seed=0)))
    assert verdict == "inconclusive" and reason.startswith("count rule undecided: 2 of 3 seeds meet the rule, 1 miss "
                                                           "it (each confirmed by its continuation)")
    _patch(monkeypatch, [bad, bad, bad], shape="falling")  # still improving: no seed counts either way
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert not out.converged["plateaued"] and settle(out)[0] == "inconclusive"
    assert "3 not converged" in out.reason


def test_power_curve_reads_bma_at_m_equal_L_and_rejects_every_shorter_reading():
    # reference: the exact set posterior of the full context (m = L has gap 0 to itself)
    power = E.reading_power(_run(GOOD))
    assert [p["x"] for p in power] == [1, 2, 3, 4, 5]
    assert [p["rejected"] for p in power] == [True, True, True, True, False]
    assert power[-1]["value"] == pytest.approx(0.0, abs=1e-12)
    assert all(a["value"] > b["value"] for a, b in zip(power, power[1:]))  # more examples read, closer to BMA


def test_training_check_runs_small(monkeypatch):
    monkeypatch.setattr(E, "TRAINS", ("quick", "full"))
    monkeypatch.setitem(E.SIZES, "quick", {**E.SIZES["quick"], "pair_steps": 20, "heads_steps": 20,
                                           "eval_contexts": 50, "eval_every": 5})
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.seeds["n"] == 3 and all(s < 1000 for s in out.seeds["training_seeds"])
    assert out.control.rejected and len(out.control.power) == 5 and len(out.findings) == 2
    assert out.verdict in ("fail", "inconclusive")  # 20 steps are far from BMA


def test_quick_tier_cannot_decide_and_reports_its_control():
    # no training: the near-miss control on the first training seed's held-out contexts (exact set posteriors)
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and reason.startswith("quick tier cannot decide")
    assert out.control.rejected and [p["rejected"] for p in out.control.power] == [True] * 4 + [False]


def test_the_development_probe_refuses_report_seeds():
    # the probe that set LPA_TOL and checked the quick sizes (docs/probes) takes development seeds only
    path = Path(__file__).parents[2] / "docs" / "probes" / "ext_dag_training_dev_seeds.py"
    spec = importlib.util.spec_from_file_location("ext_dag_training_dev_seeds", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    with pytest.raises(ValueError, match="development seeds"):
        probe.main("quick", [E.training_seeds(CheckContext(tier="quick", seed=0), "ext-dag-training")[0]])
    assert require_dev_seeds(E.TUNED_ON) == list(E.TUNED_ON)
