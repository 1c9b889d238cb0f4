"""What the exact and Monte Carlo checks of several claims share: the Lemma 3 sweep (lemma3-strict-dpi and
lemma4-loglik-gap), the Monte Carlo agreement-and-interval rule, the stored counterexamples, and figure saving.

Every check applies its decision rule twice in the same call: to the real input and to a negative control known
to be false (a planted wrong formula, a violated bound, a shuffled parent label). A Monte Carlo estimate is judged
by its agreement with its exact value (|z| ≤ ``Z_AGREE``) and by its interval against the bound. Its positive
control (:func:`ideal_estimate_verdict`) is the same rule on the ideal estimate, one that lands on the exact value.

Regression tolerances: every value of these checks is a function of the report seed alone. The exact values are
float64 sums, and the Monte Carlo values come from NumPy generators seeded from the report seed, so a rerun with
the same seed reproduces them bit for bit on one machine (spread 0 over OMP_NUM_THREADS=1|2 ×
ATEN_CPU_CAPABILITY=default|avx2, seed 0, quick tier; no torch kernels). Values without a listed tolerance are
therefore compared at the default abs 1e-9 (floats) or exactly; listed tolerances are for values at rounding
level (identity errors), which no rule should pin.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from bma_verify.numerics.claim_sweeps import merge_sweeps
from bma_verify.numerics.dpi_sweep import lemma3_sweep_chunk
from bma_verify.reports.core import CheckContext, PositiveControl, save_figure, verdict_from_interval
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES

#: Sizes shared by two claims: the Lemma 3 sweep (lemma3 and lemma4 exact checks) and the Monte Carlo pairs
#: (lemma3 and lemma4 Monte Carlo checks). The quick tier of every numeric check runs in about 10 s on one core.
SIZES = {
    "quick": {"lemma3_instances": 400, "lemma3_chunk": 100, "mc_instances": 4, "mc_samples": 20_000},
    "full": {"lemma3_instances": 5000, "lemma3_chunk": 250, "mc_instances": 20, "mc_samples": 100_000},
}
#: A Monte Carlo estimate agrees with its exact value when |estimate − exact| ≤ Z_AGREE standard errors: a false
#: alarm has probability 6e-5 per estimate, ~2e-3 for the ~30 estimates of one check.
Z_AGREE = 4.0
#: Largest |lhs − rhs| of an exact identity (Lemma 4; J(pa) = I_χ²; E = (1/h) J) that reads as equal.
IDENTITY_ATOL = 1e-10


def save_check_figure(fig, ctx: CheckContext, filename: str) -> str:
    """Save ``fig`` as the check's figure (PNG at FIGURE_DPI and an SVG copy); returns its file name."""
    save_figure(fig, ctx.figure_path(filename))
    return filename


def chunks(n: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of at most ``size`` items covering ``range(n)``: the work items of a sweep."""
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def combine_verdicts(verdicts) -> str:
    """fail if any part fails, pass if every part passes, else inconclusive."""
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    return "pass" if verdicts and all(v == "pass" for v in verdicts) else "inconclusive"


def _lemma3_task(seed: int, kernel, chunk: tuple[int, int]):
    return lemma3_sweep_chunk(seed, *chunk, kernel=kernel)


def lemma3_sweep(ctx: CheckContext):
    """The exact Lemma 3 / Lemma 4 sweep, run once per report and shared through ``ctx.cache``."""
    kernel = ctx.options.get("kernel")  # a user's kernel (bma-verify check lemma3-strict-dpi --kernel FILE)
    key = ("numeric", "lemma3_sweep", ctx.tier, ctx.seed, None if kernel is None else np.asarray(kernel).tobytes())
    if key not in ctx.cache:
        seed = ctx.seed_for("lemma3-sweep")
        parts = chunks(SIZES[ctx.tier]["lemma3_instances"], SIZES[ctx.tier]["lemma3_chunk"])
        ctx.cache[key] = merge_sweeps(ctx.map(partial(_lemma3_task, seed, kernel), parts, desc="lemma3 sweep"))
    return ctx.cache[key]


def stored_counterexamples(target: str) -> list[dict]:
    """Counterexamples found earlier by the search (reports.search), re-checked from scratch on every report."""
    return [i for i in KNOWN_COUNTEREXAMPLES if i["target"] == target]


def smallest_instance(instances: list[dict]) -> dict:
    """The smallest instance: fewest states, then fewest positions."""
    return min(instances, key=lambda i: (len(i["kernel"]), len(i["parents"])))


def binary_flip_kernel(flip: float) -> np.ndarray:
    """The binary symmetric kernel that flips the state with probability ``flip``."""
    return np.array([[1.0 - flip, flip], [flip, 1.0 - flip]])


def z_scores(estimate, exact) -> np.ndarray:
    """(estimate − exact) / stderr, elementwise; near independence, the normal quantile of the estimate's G
    statistic under its χ² law at ``exact`` (``numerics.estimators.Estimate.agreement_z``)."""
    return np.asarray(estimate.agreement_z(exact))


def decide_interval(z, low, high, bound: float, *, below: bool = True) -> str:
    """The Monte Carlo rule: every estimate within Z_AGREE standard errors of its exact value (else inconclusive:
    the sampling does not corroborate the exact computation), then the 95% interval(s) against ``bound``: pass
    when wholly on the claimed side, fail when one is wholly on the other, else inconclusive."""
    if np.max(np.abs(z)) > Z_AGREE:
        return "inconclusive"
    return combine_verdicts(verdict_from_interval(lo, hi, bound, below=below)
                            for lo, hi in zip(np.atleast_1d(low), np.atleast_1d(high)))


def ideal_estimate_verdict(exact, estimate, low, high, bound: float, *, below: bool = True) -> str:
    """:func:`decide_interval` on the ideal estimate: one that lands on its exact value (z = 0), with the real
    estimate's interval moved to centre on it (same width: the same sample size). It passes when the check's
    sample size can decide the bound at the exact value; inconclusive when the exact value lies within the interval's
    half-width of the bound; fail when the exact value is on the wrong side."""
    shift = np.asarray(exact, dtype=float) - np.asarray(estimate, dtype=float)
    return decide_interval(np.zeros(np.size(shift)), np.asarray(low) + shift, np.asarray(high) + shift, bound,
                           below=below)


def ideal_estimates_control(cases: list[dict], estimates: str) -> PositiveControl:
    """The positive control of a Monte Carlo check: every case's ``ideal_verdict`` (:func:`ideal_estimate_verdict`),
    combined as the real verdicts are (a case ``unresolved`` by its sample size, as lemma3-strict-dpi has, is left
    out); ``estimates`` names what the ideal estimates equal (e.g. "the exact gaps")."""
    verdicts = [c["ideal_verdict"] for c in cases]
    passed = combine_verdicts(v for v in verdicts if v != "unresolved") == "pass"
    return PositiveControl(f"estimates equal to {estimates} (z = 0), each with its real estimate's interval width, "
                           "judged by the same rule", {"verdicts": verdicts}, passed)
