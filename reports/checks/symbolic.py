"""The machinery of every symbolic check: derive a claim with SymPy (``theory``), verify it against ``numerics``.

A claim module describes its symbolic check once, as a :class:`SymbolicCheck` (the ``theory.derive_*``,
``theory.perturb_*`` and ``theory.verify_*`` functions, the negative control, the sizes per tier), then runs it in
two steps: :func:`run_symbolic` (compute: the derivations, the verification at random points from
``ctx.rng(f"symbolic:{claim}")``, and the same for the perturbed control at the same points) and
:func:`symbolic_outcome` (decide and render: the verdict, the control, the tables and the summary).

Verdict (:func:`decide`): ``pass`` when every residual is exactly 0, every witness is nonzero, every stated slack
is provably >= 0, and every numeric comparison is within the verifier's tolerance (float64 rounding, 1e-9);
otherwise ``fail``, with the failing pieces as the instance. Residuals that are zero by construction (a definition
unfolded, a solution substituted back into its own equation) are shown under ``definitions`` and not counted.

Negative control: in the same call, the same decision is applied to a perturbed derived expression (a dropped
term, an exponent x4, a transposed kernel), whose identities are re-derived by the derivation's own code and which
the verifier compares with the same numerics at the same random points. The control is rejected when that
decision is not ``pass``.

The control's path is also run with nothing planted (:func:`nothing_planted`): the same ``perturb`` re-derivation of
every identity, the same ``verify`` at the same points, the same :func:`decide`. The control counts as rejected only
when that path accepts the unperturbed formula, so it is rejected for what was planted, not for the path it takes.
This is part of the negative control, not a positive control: the derived formula is the ideal, and a run of it that
is not independent of ``theory`` must never turn a failing derivation into "not testable" (a wrong derivation reads
``fail``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Table
from bma_verify.theory.derivation import Derivation, Perturbation, Verification

# Regression tolerances (tests/test_regression.py). The errors are float64 rounding (at most 3.2e-14 measured; per
# seed and environment: docs/notes/symbolic-checks.md), compared against a bound, not pinned: abs 1e-10 (x3000 the
# largest) still flags an error approaching the verifier's 1e-9. The slacks are values of the claim (not rounding),
# bit-identical across environments at one seed; abs 1e-9 is the verifier's tolerance.
TOLERANCES = {"max_abs_error": {"abs": 1e-10}, "errors": {"abs": 1e-10}, "definition_errors": {"abs": 1e-10},
              "min_slacks": {"abs": 1e-9}}


@dataclass(frozen=True)
class SymbolicCheck:
    """What one claim's symbolic check derives, how it verifies it, and the control it must reject.

    Attributes
    ----------
    claim : str
        The claim id; the random points are drawn from ``ctx.rng(f"symbolic:{claim}")``.
    derive, perturb, verify : callable
        ``theory.derive_*(*args)``, ``theory.perturb_*(*args, perturbation=...)`` and
        ``theory.verify_*(rng, perturbation=None, **sizes)``.
    perturbation : Perturbation
        The negative control: a wrong replacement of the derived results (false by construction).
    control : str
        What the perturbation plants, in words (the report's control description).
    sizes : dict
        Per tier (``"quick"``, ``"full"``), the keyword arguments of ``verify`` (sizes and number of points).
    tolerances : dict
        Per-check exceptions to :data:`TOLERANCES` (regression bounds of ``measured`` values).
    """

    claim: str
    derive: Callable[..., Derivation]
    perturb: Callable[..., Derivation]
    verify: Callable[..., Verification]
    perturbation: Perturbation
    control: str
    sizes: dict[str, dict]
    tolerances: dict = field(default_factory=dict)

    def sizes_for(self, ctx: CheckContext) -> dict:
        """The verifier's arguments at ``ctx.tier`` (a copy)."""
        return dict(self.sizes[ctx.tier])


def nothing_planted(results) -> dict:
    """The perturbation of the positive control: it replaces no result (the derivation's formula, unchanged)."""
    return {}


@dataclass(frozen=True)
class SymbolicRun:
    """The derivations and verification of a check, the same for its control, and the same for the control's path
    with nothing planted (the positive control); all three at the same random points."""

    derivations: list[Derivation]
    verification: Verification
    control_derivations: list[Derivation]
    control_verification: Verification
    ideal_derivations: list[Derivation]
    ideal_verification: Verification


def run_symbolic(ctx: CheckContext, check: SymbolicCheck, derive_args: list[tuple]) -> SymbolicRun:
    """Derive once per argument tuple, verify at the tier's sizes, then the same for the perturbed control and for
    the control's path with :func:`nothing_planted`.

    Every verification draws from a fresh ``ctx.rng(f"symbolic:{claim}")``, so the controls see the same points.
    """
    sizes = check.sizes_for(ctx)
    derivations = [check.derive(*args) for args in derive_args]
    verification = check.verify(ctx.rng(f"symbolic:{check.claim}"), **sizes)
    control_derivations, control_verification = perturbed_run(ctx, check, derive_args, check.perturbation)
    ideal_derivations, ideal_verification = perturbed_run(ctx, check, derive_args, nothing_planted)
    return SymbolicRun(derivations, verification, control_derivations, control_verification, ideal_derivations,
                       ideal_verification)


def perturbed_run(ctx: CheckContext, check: SymbolicCheck, derive_args: list[tuple],
                  perturbation) -> tuple[list[Derivation], Verification]:
    """The derivations re-derived under ``perturbation`` and their verification at the check's random points."""
    derivations = [check.perturb(*args, perturbation=perturbation) for args in derive_args]
    verification = check.verify(ctx.rng(f"symbolic:{check.claim}"), perturbation=perturbation,
                                **check.sizes_for(ctx))
    return derivations, verification


def decide(derivations: list[Derivation], verification: Verification) -> tuple[str, dict[str, bool]]:
    """The decision rule of every symbolic check: ``pass`` iff every identity holds and the numerics agree.

    Returns the verdict and the per-identity status (definitions, zero by construction, are not identities).
    """
    status: dict[str, bool] = {}
    for derivation in derivations:
        status.update(derivation.status())
    return ("pass" if all(status.values()) and verification.passed else "fail"), status


def _decided(derivations: list[Derivation], verification: Verification) -> tuple[str, dict]:
    """:func:`decide` and what it saw (the identities that failed, the comparisons over tolerance)."""
    verdict, status = decide(derivations, verification)
    return verdict, {"identities_failed": [name for name, ok in status.items() if not ok],
                     "errors_over_tolerance": verification.errors_over_tolerance,
                     "negative_slacks": verification.negative_slacks, "max_abs_error": verification.max_abs_error,
                     "tolerance": verification.tolerance}


def _control(check: SymbolicCheck, run: SymbolicRun) -> Control:
    """The control: :func:`decide` on the perturbed derivations and their verification; rejected only when the same
    path with nothing planted passes (``same_path_unplanted``)."""
    verdict, seen = _decided(run.control_derivations, run.control_verification)
    unplanted_verdict, unplanted = _decided(run.ideal_derivations, run.ideal_verification)
    return Control(
        description=f"{check.control}, through the same residuals and numeric comparison (the same path with "
                    "nothing planted must pass)",
        measured={**seen, "same_path_unplanted": {**unplanted, "passed": unplanted_verdict == "pass"}},
        rejected=verdict != "pass" and unplanted_verdict == "pass",
    )


def _tables(status: dict[str, bool], definitions: dict[str, bool], verification: Verification) -> list[Table]:
    """The identities (definitions apart) and the numeric comparisons, as the report's two tables."""
    rows = [[name, "yes" if ok else "NO"] for name, ok in status.items()]
    rows += [[f"{name} (by construction, not counted)", "yes" if ok else "NO"] for name, ok in definitions.items()]
    numeric_rows = [[name + (" (definition)" if name in verification.definitions else ""), f"{err:.3g}",
                     f"≤ {verification.tolerance:g}"] for name, err in verification.errors.items()]
    numeric_rows += [[f"slack {name}", f"{slack:.3g}", "≥ 0"] for name, slack in verification.slacks.items()]
    return [Table("Symbolic identities", ["identity", "holds"], rows),
            Table("Numeric verification", ["quantity", "measured", "required"], numeric_rows)]


def _instance(ctx: CheckContext, check: SymbolicCheck, status: dict[str, bool],
              verification: Verification) -> dict:
    """The failing pieces of a failed check, with the seed, tier and sizes that reproduce it."""
    return {
        "claim": check.claim, "kind": "symbolic", "seed": ctx.seed, "tier": ctx.tier,
        "identities_failed": [name for name, ok in status.items() if not ok],
        "errors_over_tolerance": verification.errors_over_tolerance,
        "negative_slacks": verification.negative_slacks,
        "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in check.sizes_for(ctx).items()},
    }


def _summary(check: SymbolicCheck, summary: str, status: dict[str, bool], definitions: dict[str, bool],
             verification: Verification, control: Control) -> str:
    """The claim's own sentence, then the numeric agreement, the identity count and the control's fate."""
    c = control.measured
    n_failed, n_missed = len(c["identities_failed"]), len(c["errors_over_tolerance"]) + len(c["negative_slacks"])
    control_clause = (f" Control ({check.control}): {'rejected' if control.rejected else 'NOT rejected'}; on it "
                      f"{n_failed} identit{'y' if n_failed == 1 else 'ies'} and {n_missed} numeric "
                      f"comparison{'' if n_missed == 1 else 's'} fail (max error {c['max_abs_error']:.2g}).")
    by_construction = f" ({len(definitions)} more zero by construction, not counted)" if definitions else ""
    return (summary + f" Max |derived − independent| = {verification.max_abs_error:.2g} over "
                      f"{verification.n_points} random points (tolerance {verification.tolerance:g}); "
                      f"{sum(status.values())}/{len(status)} symbolic identities hold{by_construction}."
            + control_clause)


def symbolic_outcome(ctx: CheckContext, check: SymbolicCheck, run: SymbolicRun, summary: str,
                     extra: dict | None = None) -> CheckOutcome:
    """Decide ``run`` and its control and package them as a symbolic CheckOutcome (computes nothing new).

    ``summary`` is the claim's sentence (the numeric agreement and the control are appended); ``extra`` adds
    claim-specific ``measured`` values.
    """
    verification = run.verification
    verdict, status = decide(run.derivations, verification)
    definitions: dict[str, bool] = {}
    for derivation in run.derivations:
        definitions.update(derivation.definition_status())
    control = _control(check, run)
    return CheckOutcome(
        verdict=verdict,
        measured={"identities_hold": all(status.values()), "identities": status, "definitions": definitions,
                  **verification.measured(), **(extra or {})},
        threshold={"residuals": "exactly 0", "witnesses": "not 0", "max_abs_error": verification.tolerance,
                   "slacks": f">= -{verification.tolerance:g}"},
        summary=_summary(check, summary, status, definitions, verification, control),
        derivation=[step for derivation in run.derivations for step in derivation.latex_steps()],
        tables=_tables(status, definitions, verification),
        instance=_instance(ctx, check, status, verification) if verdict == "fail" else None,
        tolerances={**TOLERANCES, **check.tolerances},
        control=control,
    )


#: The old private name of :func:`decide`, still imported by ``reports.checks.ext_dag``.
_decide = decide

