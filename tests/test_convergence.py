"""The plateau test that decides whether a trained run has converged (model/convergence.py), on synthetic curves."""
from __future__ import annotations

import numpy as np
import pytest

from bma_verify.model.convergence import (MIN_POINTS, plateau_test, record_plateau, run_plateau, runs_plateau,
                                          successive_difference_noise, trace_plateau)

STEPS = np.arange(100, 2001, 100)  # 20 evaluations, every 100 steps


def _noise(seed: int, sd: float = 0.002) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=sd, size=len(STEPS))


def test_a_curve_still_falling_has_not_plateaued():
    # reference: a 1/t decay whose last 20% still falls by 0.05 nats, far above its noise of 0.002
    falling = 2.0 + 400.0 / STEPS + _noise(0)
    result = plateau_test(STEPS, falling)
    assert not result["plateaued"] and result["improvement"] > 3 * result["noise_se"]
    assert result["window"] == {"from_step": 1600, "to_step": 2000, "points": 5, "noise_from_step": 1100}


@pytest.mark.parametrize("seed", range(10))
def test_a_flat_noisy_curve_has_plateaued(seed):
    # reference: a flat curve's fitted drop is ~N(0, SE): within 3 SE at every one of these seeds
    result = plateau_test(STEPS, 2.0 + _noise(seed))
    assert result["plateaued"], result


def test_a_flat_curve_with_a_late_drop_has_not_plateaued():
    # reference: the mean absolute deviation of successive differences takes 1/n of the one big step the drop makes
    curve = 2.0 + _noise(1)
    curve[-2:] -= 0.05
    result = plateau_test(STEPS, curve)
    assert not result["plateaued"] and result["improvement"] > 0.02


def test_the_noise_estimate_ignores_the_trend():
    # reference: successive differences of a straight line are constant, so their spread is zero
    assert successive_difference_noise(np.linspace(3.0, 2.0, 10)) == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(3)
    noisy = np.linspace(3.0, 2.0, 4000) + rng.normal(scale=0.01, size=4000)
    assert successive_difference_noise(noisy) == pytest.approx(0.01, rel=0.05)


def test_a_noise_free_line_still_falling_has_not_plateaued_and_a_constant_has():
    assert not plateau_test(STEPS, 3.0 - 1e-4 * STEPS)["plateaued"]
    assert plateau_test(STEPS, np.full(len(STEPS), 2.0))["plateaued"]


def test_too_few_evaluations_cannot_decide_a_plateau():
    result = plateau_test(STEPS[:MIN_POINTS - 1], np.full(MIN_POINTS - 1, 2.0))
    assert not result["plateaued"] and result["improvement"] is None
    assert run_plateau({"steps": 0})["plateaued"] is False  # a run that never evaluated (steps=0)


def test_the_window_holds_at_least_min_points_evaluations():
    # 10 evaluations: the last 20% of steps hold 3, so the window widens to the last MIN_POINTS
    result = plateau_test(STEPS[:10], np.full(10, 2.0))
    assert result["window"]["points"] == MIN_POINTS and result["window"]["from_step"] == 600
    with pytest.raises(ValueError):
        plateau_test([1, 2, 3], [1.0, 2.0])


def test_several_runs_are_plateaued_when_every_one_is():
    flat, falling = plateau_test(STEPS, np.full(len(STEPS), 2.0)), plateau_test(STEPS, 3.0 - 1e-4 * STEPS)
    both = runs_plateau({"a": flat, "b": falling})
    assert not both["plateaued"] and both["not_plateaued"] == ["b"] and both["runs"]["a"] is flat
    assert runs_plateau({"a": flat})["plateaued"]


def test_a_per_step_trace_is_judged_in_blocks():
    # reference: 250 flat steps give 25 block means (a plateau); a 1/t decay still falls over its last 50 steps
    flat = trace_plateau([1.0] * 250)
    assert flat["plateaued"] and flat["window"] == {"from_step": 200, "to_step": 250, "points": 6,
                                                     "noise_from_step": 130}
    assert not trace_plateau([1.0 + 50.0 / (s + 1) for s in range(250)])["plateaued"]
    assert record_plateau([[50, 1.0], [100, 1.0]])["plateaued"] is False  # two records cannot decide


def test_a_drop_within_the_objectives_resolution_counts_as_flat():
    # reference: a noise-free line falling 0.001 nats over its window: still improving by 3 SE (SE 0), flat once
    # drops up to 0.003 nats (a resolution the caller states) count as flat
    line = 2.0 - 1e-3 * (STEPS - STEPS[-5]) / (STEPS[-1] - STEPS[-5])
    assert not plateau_test(STEPS, line)["plateaued"]
    result = plateau_test(STEPS, line, min_drop=0.003)
    assert result["plateaued"] and result["min_drop"] == 0.003 and "or at most 0.003 nats" in result["rule"]
