"""The two objects every module of ``theory`` returns: a :class:`Derivation` and a :class:`Verification`.

A derivation is a list of steps built with SymPy from definitions (likelihoods, softmax, derivatives,
expectations), the named results it arrives at, and the *residuals*: expressions that the derivation shows to
simplify to zero (derived minus claimed). A verification is the SymPy ``verify_numerically`` pattern: the
derived expressions are lambdified and compared, at random points drawn from a passed Generator, with an
independent numeric computation (``numerics`` or a direct NumPy evaluation).

A *perturbation* (:data:`Perturbation`) is the negative control of a symbolic check: it maps a derivation's
results to deliberately wrong replacements (a dropped term, a flipped sign, a transposed kernel), and
:meth:`Derivation.perturbed` re-runs the derivation's own simplification of every identity that depends on them,
so the same verifier (residuals and numeric comparison) can be shown to reject it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import sympy as sp

# Float64 evaluations of a correct expression agree with an independent float64 computation to rounding: the
# largest error of any symbolic check is 3.2e-14 (quick tier at seeds 0, 1, 2 and full tier at seed 0, under
# OMP_NUM_THREADS=1|2 x ATEN_CPU_CAPABILITY=default|avx2, which leave every value bit-identical at one seed), while
# every comparison that a negative control (a perturbed expression) fails misses by at least 7e-3. 1e-9 sits
# between the two: x3e4 above the largest rounding error, x7e6 below the smallest miss.
DEFAULT_TOLERANCE = 1e-9

#: A negative control: maps a derivation's results to the results it replaces with wrong ones (returning ``{}``
#: leaves the derivation unperturbed).
Perturbation = Callable[[Mapping[str, sp.Basic]], Mapping[str, sp.Basic]]


@dataclass(frozen=True)
class Derivation:
    """What a symbolic derivation produced.

    Attributes
    ----------
    claim : str
        The claim id (docs/claims.md) this derivation serves.
    steps : tuple of (caption, expression)
        The derivation in order; an expression is a SymPy object (or a relation) rendered with ``sympy.latex``.
    results : mapping name -> SymPy expression
        The derived expressions that verifiers lambdify.
    residuals : mapping name -> SymPy expression
        ``simplify(derived - claimed)`` for each identity the claim states; the claim's symbolic part holds
        when every residual is exactly ``0``.
    witnesses : mapping name -> SymPy expression
        Expressions the claim says are NOT zero (e.g. the W + b1ᵀ difference), kept to exhibit them.
    nonnegatives : mapping name -> SymPy expression
        Slacks of inequalities the claim states, which SymPy's assumptions prove nonnegative
        (``expr.is_nonnegative`` is True).
    definitions : mapping name -> SymPy expression
        Residuals that are zero by construction (an expression minus itself once a definition is unfolded, or a
        solution substituted back into its own equation). They are shown, but they are not evidence: they do not
        count among the identities that hold and do not enter :attr:`identities_hold`.
    """

    claim: str
    steps: tuple[tuple[str, sp.Basic], ...]
    results: Mapping[str, sp.Basic]
    residuals: Mapping[str, sp.Basic] = field(default_factory=dict)
    witnesses: Mapping[str, sp.Basic] = field(default_factory=dict)
    nonnegatives: Mapping[str, sp.Basic] = field(default_factory=dict)
    definitions: Mapping[str, sp.Basic] = field(default_factory=dict)

    @property
    def identities_hold(self) -> bool:
        """True when every residual is exactly zero, every witness is not, and every slack is provably >= 0."""
        zero = all(is_exactly_zero(r) for r in self.residuals.values())
        nonzero = all(not is_exactly_zero(w) for w in self.witnesses.values())
        nonnegative = all(sp.sympify(e).is_nonnegative is True for e in self.nonnegatives.values())
        return zero and nonzero and nonnegative

    def status(self) -> dict[str, bool]:
        """Per residual / witness / slack, whether it came out as the claim needs (for the report's table)."""
        out = {f"residual {k} = 0": is_exactly_zero(v) for k, v in self.residuals.items()}
        out.update({f"witness {k} != 0": not is_exactly_zero(v) for k, v in self.witnesses.items()})
        out.update({f"slack {k} >= 0": sp.sympify(v).is_nonnegative is True for k, v in self.nonnegatives.items()})
        return out

    def definition_status(self) -> dict[str, bool]:
        """Per residual that is zero by construction, whether it is (shown in the report, not counted)."""
        return {f"definition {k} = 0": is_exactly_zero(v) for k, v in self.definitions.items()}

    def latex_steps(self) -> list[tuple[str, str]]:
        """The steps as ``(caption, latex)`` pairs for the report."""
        return [(caption, expr if isinstance(expr, str) else sp.latex(expr)) for caption, expr in self.steps]

    def with_results(self, overrides: Mapping[str, sp.Basic] | None) -> dict[str, sp.Basic]:
        """The results with some replaced by ``overrides`` (the output of a :data:`Perturbation`)."""
        results = dict(self.results)
        for name, expr in (overrides or {}).items():
            if name not in results:
                raise ValueError(f"a perturbation's overrides must name results of {self.claim} "
                                 f"({sorted(results)}); got {name!r}")
            results[name] = sp.sympify(expr)
        return results

    def perturbed(self, perturbation: Perturbation,
                  recheck: Callable[[Mapping[str, sp.Basic]], "Derivation"] | None = None) -> "Derivation":
        """This derivation with ``perturbation`` applied to its results, and its identities re-derived.

        Parameters
        ----------
        perturbation : Perturbation
            Maps the results to the ones it replaces.
        recheck : callable results -> Derivation, optional
            The derivation's own code that computes, from the (perturbed) results, every result downstream of
            them and every residual, witness or slack that depends on them. Its results, residuals, witnesses,
            slacks and definitions replace those of the same name (except a result the perturbation itself
            replaced, which keeps its perturbed value); the others are kept (they do not depend on the perturbed
            results).

        Returns
        -------
        Derivation
            The perturbed derivation; with ``perturbation`` returning ``{}`` it has the same results and
            identities as this one.
        """
        overrides = perturbation(self.results)
        results = self.with_results(overrides)
        part = recheck(results) if recheck is not None else Derivation(self.claim, (), {})
        results = {**results, **part.results, **{name: results[name] for name in overrides}}
        return Derivation(self.claim, self.steps, results, {**self.residuals, **part.residuals},
                          {**self.witnesses, **part.witnesses}, {**self.nonnegatives, **part.nonnegatives},
                          {**self.definitions, **part.definitions})


@dataclass(frozen=True)
class Verification:
    """The outcome of comparing derived expressions with an independent numeric computation.

    Attributes
    ----------
    claim : str
        The claim id.
    errors : dict name -> float
        Largest absolute difference over the random points, per compared quantity.
    slacks : dict name -> float
        Smallest slack ``rhs - lhs`` of each inequality the claim states (must be >= -tolerance).
    tolerance : float
        Largest error (and most negative slack) accepted.
    n_points : int
        How many random points were evaluated.
    definitions : tuple of str
        Names in ``errors`` that compare a definition typed in here with the same definition typed in
        ``numerics`` (e.g. 1 − d·min π): a consistency check of two implementations, not evidence for the claim.
        They must agree like the rest, but the report lists them apart.
    """

    claim: str
    errors: dict[str, float]
    slacks: dict[str, float]
    tolerance: float
    n_points: int
    definitions: tuple[str, ...] = ()

    @property
    def max_abs_error(self) -> float:
        return max(self.errors.values(), default=0.0)

    @property
    def errors_over_tolerance(self) -> dict[str, float]:
        """The compared quantities whose error exceeds the tolerance (or is not finite)."""
        return {k: v for k, v in self.errors.items() if not v <= self.tolerance}

    @property
    def negative_slacks(self) -> dict[str, float]:
        """The inequalities whose slack is below −tolerance (or not finite)."""
        return {k: v for k, v in self.slacks.items() if not v >= -self.tolerance}

    @property
    def passed(self) -> bool:
        finite = all(np.isfinite(v) for v in (*self.errors.values(), *self.slacks.values()))
        return finite and not self.errors_over_tolerance and not self.negative_slacks

    def measured(self) -> dict:
        """JSON-ready numbers for ``CheckOutcome.measured`` (definition comparisons under ``definition_errors``)."""
        return {
            "max_abs_error": float(self.max_abs_error),
            "errors": {k: float(v) for k, v in self.errors.items() if k not in self.definitions},
            "definition_errors": {k: float(v) for k, v in self.errors.items() if k in self.definitions},
            "min_slacks": {k: float(v) for k, v in self.slacks.items()},
            "n_points": int(self.n_points),
        }


def is_exactly_zero(expr) -> bool:
    """Whether a SymPy expression or matrix is structurally zero (after the derivation's simplification)."""
    if isinstance(expr, sp.MatrixBase):
        return all(sp.sympify(e) == 0 for e in expr)
    return sp.sympify(expr) == 0


class ErrorTracker:
    """Accumulates max |derived - independent| and min slack per name over the random points of a verifier."""

    def __init__(self) -> None:
        self.errors: dict[str, float] = {}
        self.slacks: dict[str, float] = {}
        self.definitions: set[str] = set()

    def compare(self, name: str, derived, independent, *, definition: bool = False) -> None:
        """Record max |derived − independent|; ``definition``: both sides type in the same definition."""
        if definition:
            self.definitions.add(name)
        derived = np.asarray(derived, dtype=float)
        independent = np.asarray(independent, dtype=float)
        if derived.shape != independent.shape:
            raise ValueError(f"{name}: derived shape {derived.shape} != independent shape {independent.shape}")
        # NaN (a wrong expression evaluated outside its domain) must count as a failure, not be skipped.
        err = float(np.max(np.abs(derived - independent))) if derived.size else 0.0
        err = np.inf if not np.isfinite(err) else err
        self.errors[name] = max(self.errors.get(name, 0.0), err)

    def bound(self, name: str, lhs, rhs) -> None:
        """Record the slack of the inequality ``lhs <= rhs``."""
        slack = float(np.min(np.asarray(rhs, dtype=float) - np.asarray(lhs, dtype=float)))
        slack = -np.inf if not np.isfinite(slack) else slack
        self.slacks[name] = min(self.slacks.get(name, np.inf), slack)

    def result(self, claim: str, n_points: int, tolerance: float = DEFAULT_TOLERANCE) -> Verification:
        return Verification(claim, dict(self.errors), dict(self.slacks), tolerance, n_points,
                            tuple(sorted(self.definitions)))


def complex_step_gradient(loss: Callable[[np.ndarray], complex], x: np.ndarray) -> np.ndarray:
    """∂loss/∂x_j at real x by the complex step (exact to rounding for an analytic loss): Im loss(x + i·t·e_j) / t.

    The numeric side of the gradient derivations (Theorem 3 for trees and for parent sets).
    """
    t = 1e-30
    out = np.empty(x.shape[0])
    for j in range(x.shape[0]):
        z = x.astype(complex)
        z[j] += 1j * t
        out[j] = loss(z).imag / t
    return out


def probability_vector(name: str, d: int) -> sp.Matrix:
    """A symbolic probability vector of length ``d``: positive free entries, the last is 1 minus the rest."""
    free = sp.symbols(f"{name}_0:{d - 1}", positive=True)
    return sp.Matrix([*free, 1 - sp.Add(*free)])


def stochastic_matrix(name: str, d: int) -> sp.Matrix:
    """A symbolic row-stochastic d x d matrix ``K[i, j] = K(j | i)``; each row's last entry is 1 minus the rest."""
    rows = []
    for i in range(d):
        free = [sp.Symbol(f"{name}_{i}{j}", positive=True) for j in range(d - 1)]
        rows.append([*free, 1 - sp.Add(*free)])
    return sp.Matrix(rows)


def labelled(lhs_latex: str, expr: sp.Basic, relation: str = "=") -> str:
    """``lhs = expr`` (or another relation) as LaTeX, for right sides ``sympy.Eq`` would evaluate (matrices)."""
    return f"{lhs_latex} {relation} {sp.latex(expr)}"
