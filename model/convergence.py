"""When a trained run has converged: a plateau test on its own held-out evaluation curve, never on the target.

Claim ids served: every trained reproduction (``exp-fig2-attention``, ``exp-fig3-parameters``,
``exp-fig5-generalization``, ``exp-fig6-column-alignment``, ``exp-robustness``, ``thm2-consistency``,
``prop2-ds-quadratic``, ``ext-dag-training``, ``footnote1-selective-induction``).

The rule: over the window of the last 20% of steps (at least the last ``MIN_POINTS`` evaluations), the held-out
objective's least-squares drop is at most 3 standard errors. The noise comes from the curve itself: the spread of
its successive differences over the last half of the evaluations (differences remove the slow trend), taken as the
mean absolute deviation from their median, which a single late drop moves by only 1/n of its size (a standard
deviation would count it as noise) and which is steadier than a median over a few differences. The per-context
spread at one evaluation is not used: the held-out contexts are fixed, so it measures which contexts were drawn,
not how much the curve moves between evaluations.
"""
from __future__ import annotations

import numpy as np

#: The share of the run's steps the plateau is judged on.
WINDOW_FRACTION = 0.2
#: The share of the evaluations whose successive differences give the noise (at least the window's).
NOISE_FRACTION = 0.5
#: The fewest evaluations a window holds (fewer successive differences give no usable spread).
MIN_POINTS = 5
#: How many standard errors of evaluation noise the window's drop may reach and still count as flat.
MAX_SE = 3.0
#: A drop this small (nats) is flat whatever the noise (a noise-free constant curve has zero spread); a caller
#: passes a larger ``min_drop`` where it knows the resolution of the objective (e.g. its run-to-run noise).
FLAT_ATOL = 1e-9
RULE = (f"plateau: the held-out objective's least-squares drop over the last {WINDOW_FRACTION:.0%} of steps "
        f"(at least {MIN_POINTS} evaluations) is at most {MAX_SE:g} standard errors of its evaluation noise "
        "(successive differences over the last half of the evaluations: 1.2533 × mean |Δ − median Δ| / √2)")


def successive_difference_noise(values) -> float:
    """Standard deviation of one evaluation's noise around a slow trend: 1.2533 × the mean absolute deviation of
    the successive differences from their median (the normal law's σ), / √2 (a difference carries two noises)."""
    diffs = np.diff(np.asarray(values, float))
    return float(1.2533 * np.mean(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0))


def plateau_test(steps, values, *, min_drop: float = FLAT_ATOL) -> dict:
    """Whether a held-out curve (``values`` at evaluation ``steps``, lower is better) has stopped improving.

    Parameters
    ----------
    steps, values : sequences of equal length, the evaluation steps (increasing) and the held-out objective
    min_drop : a drop at most this large counts as flat whatever the noise (the objective's resolution)

    Returns
    -------
    dict with ``plateaued`` (bool), ``improvement`` (the fitted drop over the window, nats; > 0 is still
    improving), ``noise_se`` (its standard error), ``window`` ({from_step, to_step, points, noise_from_step})
    and ``rule``.
    A curve with fewer than ``MIN_POINTS`` evaluations is not plateaued (nothing to judge a plateau on).
    """
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(f"steps and values must be 1-d of one length, got {steps.shape} and {values.shape}")
    if len(steps) < MIN_POINTS or not np.all(np.isfinite(values)):
        return {"plateaued": False, "improvement": None, "noise_se": None,
                "window": {"from_step": None, "to_step": None, "points": int(len(steps))},
                "rule": RULE + f"; {len(steps)} finite evaluations recorded, fewer than {MIN_POINTS} cannot decide"}
    start = min(int(np.searchsorted(steps, (1 - WINDOW_FRACTION) * steps[-1])), len(steps) - MIN_POINTS)
    x, y = steps[start:], values[start:]
    centred = x - x.mean()
    slope = float(centred @ (y - y.mean()) / (centred @ centred))
    span = float(x[-1] - x[0])
    improvement = -slope * span
    noise_from = min(start, len(steps) - int(np.ceil(NOISE_FRACTION * len(steps))))
    noise_se = successive_difference_noise(values[noise_from:]) * span / float(np.sqrt(centred @ centred))
    return {"plateaued": bool(improvement <= max(MAX_SE * noise_se, min_drop)), "improvement": improvement,
            "noise_se": noise_se, "window": {"from_step": int(x[0]), "to_step": int(x[-1]), "points": int(len(x)),
                       "noise_from_step": int(steps[noise_from])},
            "min_drop": float(min_drop), "rule": RULE + (f", or at most {min_drop:g} nats" if min_drop > FLAT_ATOL
                                                         else "")}


def runs_plateau(tests: dict) -> dict:
    """The plateau tests of several runs ({label: test}) as one record: plateaued when every run is, with the
    labels of those still improving."""
    return {"plateaued": all(t["plateaued"] for t in tests.values()), "rule": RULE,
            "not_plateaued": [label for label, t in tests.items() if not t["plateaued"]], "runs": tests}


def run_plateau(metrics: dict, objective: str = "query_loss", *, min_drop: float = FLAT_ATOL) -> dict:
    """:func:`plateau_test` on a trained run's held-out curve ``metrics["curves"][objective]`` (the curve
    :func:`bma_verify.model.training.train` records every ``eval_every`` steps); ``objective`` is named in it."""
    curves = metrics.get("curves") or {}
    result = plateau_test(curves.get("step", []), curves.get(objective, []), min_drop=min_drop)
    return result | {"objective": f"held-out {objective}"}


def record_plateau(losses) -> dict:
    """:func:`plateau_test` on a loss record ``[[step, mean loss since the last record], ...]`` of online training
    (``bma_verify.model.loop.window_means``): each batch is fresh, unseen before its step, so the record is a
    held-out estimate of the objective."""
    steps = [step for step, _ in losses]
    values = [loss for _, loss in losses]
    return plateau_test(steps, values) | {"objective": "online training loss (fresh batches: held out)"}


def trace_plateau(trace, block: int = 10) -> dict:
    """:func:`record_plateau` on per-step online training losses ``trace``, averaged over blocks of ``block`` steps
    (one step's batch is too small to show a trend; a trailing partial block is left out)."""
    trace = np.asarray(trace, float)
    n = len(trace) // block
    means = trace[:n * block].reshape(n, block).mean(axis=1) if n else np.empty(0)
    return record_plateau([[(i + 1) * block, float(m)] for i, m in enumerate(means)])


def last_quarters_flat(trace, tol: float = 0.01) -> bool:
    """The older flag of the DAG runs (``ext-dag-training`` records it beside its plateau test): the mean training
    loss of the last quarter of ``trace`` (one per step) is within ``tol`` nats of the quarter before."""
    q = max(1, len(trace) // 4)
    return bool(len(trace) >= 2 * q and abs(np.mean(trace[-q:]) - np.mean(trace[-2 * q:-q])) < tol)
