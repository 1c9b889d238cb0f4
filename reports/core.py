"""The contract between a claim's checks and the report builder.

A check is a function ``check(ctx: CheckContext) -> CheckOutcome``. It calls functions of ``theory``,
``numerics`` or ``model`` and packages what they return; it computes nothing itself. The builder times it,
records its kind (``symbolic``, ``exact``, ``monte-carlo`` or ``model``) and its reading (``as-stated``,
``stronger`` or ``reproduction``, see docs/claims.md), and writes the outcome into ``results.json``, ``REPORT.md`` and
``report.html``.

How a verdict is earned (:func:`settle`): every check also runs its own decision rule, in the same call, on a
**negative control**, an input known to be false (BMA reading half the examples, a violated bound, a perturbed
expression, a planted wrong formula), and reports whether the rule rejected it (:class:`Control`). A ``pass``
whose control was not rejected, or that has no control, reads ``inconclusive (not discriminating)``; a ``pass``
on a trained run that the check counts as not converged reads ``inconclusive (not converged)``.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

from bma_verify.reports.catalog import DEVICES, TIERS
from bma_verify.reports.executor import map_tasks
from bma_verify.reports.regression import REASON_KEY, leaves

VERDICTS = ("pass", "fail", "inconclusive")
#: A check that raised gets ``error`` in the report: an error is not a verdict about the claim.
RECORD_VERDICTS = VERDICTS + ("error",)
#: A claim's verdict is one of RECORD_VERDICTS, except that a claim of ours (``Claim.owner`` "ours") that fails reads
#: ``refuted``: a finding about our conjecture, never a failure of the paper (not counted as a fail, never exit 1).
REFUTED = "refuted"
KINDS = ("symbolic", "exact", "monte-carlo", "model")
#: How a check reads its claim (docs/claims.md, "How a verdict is earned"). Only ``as-stated`` and ``reproduction`` checks decide a claim's
#: verdict; a ``stronger`` check (a sharper statement of ours) yields findings and never fails the paper's claim.
READINGS = ("as-stated", "stronger", "reproduction")
FINDING_STATUSES = ("holds", "refuted", "open")
#: Reasons an earned-looking pass is withheld (``CheckOutcome.reason`` after :func:`settle`).
NOT_DISCRIMINATING = "not discriminating"
NO_CONTROL = "no negative control"
NOT_CONVERGED = "not converged"
NOT_TESTABLE = "not testable under this reading"
#: A pass withheld because its negative control sits at (or on the true side of) the bar its rule compares it with.
AT_ITS_BAR = "control at its bar"


def _is_real(number: Any) -> bool:
    """A Python or NumPy int or float, not a bool."""
    return isinstance(number, (int, float, np.integer, np.floating)) and not isinstance(number, (bool, np.bool_))


@dataclass(frozen=True)
class ControlMargin:
    """How far a negative control sits from the bar its check's rule compares it with (issue 39).

    A control judged against a bar equal to itself is not a control: the rule would flip on rounding. The margin
    states the control's decisive number and the threshold it is judged against, so a reader (and :func:`settle`)
    can see it sits strictly on the false side.

    Attributes
    ----------
    quantity : str
        The control's decisive number, named as in its ``measured`` (e.g. "parent_loss_gap").
    value : float
        That number on the control.
    bar : float
        The threshold the rule compares it with (the rule's far edge where it has a noise band).
    passes_below : bool
        True when the rule passes ``value <= bar`` (a ceiling: errors, gaps); False when it passes ``value >= bar``
        (a floor: rates, lower interval ends).
    units : str
        Optional, e.g. "nats", "standard errors".

    ``distance`` (derived) is how far the control sits on the false side, in the value's units: ``value - bar`` for a
    ceiling, ``bar - value`` for a floor; a control strictly on the false side has ``distance > 0``.

    Examples
    --------
    >>> ControlMargin("parent_loss_gap", 0.062, 0.031).distance > 0
    True
    """

    quantity: str
    value: float
    bar: float
    passes_below: bool = True
    units: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.quantity, str) or not self.quantity:
            raise ValueError(f"quantity must be a non-empty name, got {self.quantity!r}")
        for name in ("value", "bar"):
            number = getattr(self, name)
            if not _is_real(number) or not math.isfinite(number):
                raise ValueError(f"{name} must be a finite number, got {number!r}")
            object.__setattr__(self, name, float(number))
        if not isinstance(self.passes_below, (bool, np.bool_)):
            raise ValueError(f"passes_below must be a bool, got {self.passes_below!r}")
        object.__setattr__(self, "passes_below", bool(self.passes_below))
        if not isinstance(self.units, str):
            raise ValueError(f"units must be a string, got {self.units!r}")

    @classmethod
    def beyond_band(cls, quantity: str, value: float, threshold: float, band: float, *, upper: bool = True,
                    units: str = "") -> "ControlMargin":
        """The margin of a side judged with a noise band (``reports.checks.trained.threshold_side``): it fails only
        beyond ``threshold + band`` (``upper``: the value must stay below the threshold) or ``threshold − band``, so
        that edge is the bar."""
        if not _is_real(band) or not band >= 0:
            raise ValueError(f"band must be a non-negative number, got {band!r}")
        return cls(quantity, value, threshold + band if upper else threshold - band, passes_below=upper, units=units)

    @property
    def distance(self) -> float:
        """How far the control sits on the false side of the bar (> 0 strictly for a control that discriminates)."""
        return self.value - self.bar if self.passes_below else self.bar - self.value

    def as_dict(self) -> dict:
        return {"quantity": self.quantity, "value": self.value, "bar": self.bar, "passes_below": self.passes_below,
                "units": self.units, "distance": self.distance}


@dataclass
class Control:
    """A negative control: the check's own decision rule applied to an input known to be false.

    Attributes
    ----------
    description : str
        What was planted and why it is false (e.g. "BMA reading only the last 5 of 10 examples").
    measured : Any
        JSON-serialisable values the rule saw on the control (the same quantities as the real check).
    rejected : bool
        True when the rule rejected the control (it would have read ``fail`` / not ``pass`` on it). A check whose
        control is not rejected cannot tell the claim from its negation, so it cannot pass.
    power : list of dict or None
        For a near-miss control, the rule's outcome as the control moves towards the truth: points
        ``{"x", "label", "rejected", "value"}`` (e.g. BMA reading m = 1 … L examples). It shows how far from the
        truth an input may be and still pass.
    margin : ControlMargin or None
        Where the rule compares one number of the control with a threshold: that number, the threshold and how far
        the control sits on the false side. None where the rule is not one number against one bar (a symbolic
        residual, two intervals of one curve, verdicts combined over instances); tests/test_control_margins.py lists
        those checks with the reason.
    """

    description: str
    measured: Any
    rejected: bool
    power: list | None = None
    margin: ControlMargin | None = None

    def __post_init__(self) -> None:
        self.rejected = bool(self.rejected)
        if self.margin is not None and not isinstance(self.margin, ControlMargin):
            raise ValueError(f"margin must be a ControlMargin or None, got {self.margin!r}")

    @property
    def at_its_bar(self) -> bool:
        """True when the control has a margin and does not sit strictly on the false side of its bar."""
        return self.margin is not None and not self.margin.distance > 0

    def as_dict(self) -> dict:
        return {"description": self.description, "measured": jsonable(self.measured), "rejected": self.rejected,
                "power": jsonable(self.power), "margin": None if self.margin is None else self.margin.as_dict()}


@dataclass
class PositiveControl:
    """A positive control: the check's own decision rule applied to the ideal input (the exact value, the true
    formula, BMA, the Theorem 1 construction, or the ideal reader under the check's reading).

    Attributes
    ----------
    description : str
        What the ideal is (e.g. "BMA reading every one of the L' examples").
    measured : Any
        JSON-serialisable values the rule saw on the ideal.
    passed : bool
        True when the rule passed the ideal. A reading whose ideal fails its own rule is not testable under that
        reading: its verdict would measure the reading, not the model, so the check never decides.
    """

    description: str
    measured: Any
    passed: bool

    def __post_init__(self) -> None:
        self.passed = bool(self.passed)

    def as_dict(self) -> dict:
        return {"description": self.description, "measured": jsonable(self.measured), "passed": self.passed}


@dataclass
class Finding:
    """A statement of ours (a ``stronger`` reading) and what became of it.

    ``status``: ``holds`` (on the instances named in ``evidence``), ``refuted`` (with the smallest ``instance``
    found, replayable by ``bma-verify check --instance``) or ``open``.
    """

    statement: str
    status: str
    instance: dict | None = None
    evidence: str = ""

    def __post_init__(self) -> None:
        if self.status not in FINDING_STATUSES:
            raise ValueError(f"status must be one of {FINDING_STATUSES}, got {self.status!r}")

    def as_dict(self) -> dict:
        return {"statement": self.statement, "status": self.status, "instance": jsonable(self.instance),
                "evidence": self.evidence}


#: How a repaired statement ("what holds instead") stands: proved (each step of the argument checked) or observed.
REPAIR_STATUSES = ("proved", "observed")


@dataclass
class HoldsInstead:
    """What holds instead of a statement that fails (SPEC §4.1): the nearest repaired statement and its evidence.

    ``replaces``: the failing statement (the paper's, or a finding of ours that is refuted); ``statement``: the
    repair; ``status``: ``proved`` (the argument's steps checked) or ``observed`` (on the instances named only);
    ``evidence``: one sentence per kind of evidence (proof steps, sweep, search), written from measured values;
    ``boundary``: how far from its hypothesis it still holds (a sentence; empty when not measured); ``figures``:
    PNG names of the boundary's figures.
    """

    replaces: str
    statement: str
    status: str
    evidence: list[str] = field(default_factory=list)
    boundary: str = ""
    figures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in REPAIR_STATUSES:
            raise ValueError(f"status must be one of {REPAIR_STATUSES}, got {self.status!r}")

    def as_dict(self) -> dict:
        return {"replaces": self.replaces, "statement": self.statement, "status": self.status,
                "evidence": list(self.evidence), "boundary": self.boundary, "figures": list(self.figures)}


@dataclass
class Table:
    """A table of measured values: ``rows`` are lists aligned with ``columns``."""

    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class CheckOutcome:
    """What one check found.

    Attributes
    ----------
    verdict : "pass" | "fail" | "inconclusive"
    measured : dict
        JSON-serialisable numbers (floats, ints, lists, nested dicts); what the regression test compares.
    threshold : Any
        The bound or tolerance the measured values were judged against (JSON-serialisable).
    summary, derivation, tables, figures : one sentence for the report; (caption, latex) steps; tables; PNG names.
    instance : dict or None
        The failing instance (JSON, re-checkable with ``bma-verify check --instance``) when the verdict is fail.
    tolerances : dict
        Per value of ``measured``, how far a rerun may move it before the regression test flags it:
        ``{"key": {"abs": 1e-12}}`` or ``{"key": {"rel": 0.1}}`` (a key covers its children); others: exact or
        ``abs=1e-9``. Wider ones carry their measured spread in a comment; key ``"reason"``: reports.regression.
    control : Control or None
        The negative control run in the same call (see the module docstring). Required for a ``pass``.
    positive_control : PositiveControl or None
        The ideal input through the same rule, run in the same call; when it did not pass, the check is not testable
        under its reading and reads ``inconclusive`` whatever it measured.
    findings : list of Finding
        Statements of ours (``stronger``) and their status; none listed: one from the verdict (pass → holds, …).
    reason : str
        Why the verdict is ``inconclusive`` (e.g. "not converged", "interval straddles the bound").
    converged : dict or None
        A trained run's plateau test (``model.convergence.plateau_test``); over seeds, ``plateaued`` when enough
        converged to decide, each seed's test under ``seeds``.
    seeds : dict or None
        A trained reproduction's seeds, statuses, counts, count rule, per-metric median and range (seeds_record).
    assumptions : list of str
        The choices the paper leaves open that the verdict rests on (e.g. "reading R1: offsets beyond L clipped").
    holds_instead : list of HoldsInstead
        Where a statement fails (the paper's, or a finding of ours), what holds instead; the report ends the claim's
        section with them.
    """

    verdict: str
    measured: dict
    threshold: Any = None
    summary: str = ""
    derivation: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    instance: dict | None = None
    tolerances: dict = field(default_factory=dict)
    control: Control | None = None
    positive_control: PositiveControl | None = None
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""
    converged: dict | None = None
    assumptions: list[str] = field(default_factory=list)
    seeds: dict | None = None
    holds_instead: list[HoldsInstead] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        reason_tolerance = self.tolerances.get(REASON_KEY)
        if reason_tolerance is not None and not (
                isinstance(reason_tolerance, dict) and set(reason_tolerance) == {"counts"}
                and isinstance(reason_tolerance["counts"], str) and REASON_KEY not in self.measured):
            raise ValueError("tolerances['reason'] must be {'counts': <why the counts move>}, with no measured "
                             f"value named 'reason'; got {reason_tolerance!r}")
        moves = {name: tol for name, tol in self.tolerances.items() if isinstance(tol, dict) and "moves" in tol}
        texts = {name for name, value in leaves(self.measured) if isinstance(value, str)} if moves else set()
        for name, tol in moves.items():
            if not (set(tol) == {"moves"} and isinstance(tol["moves"], str) and name in texts):
                raise ValueError(f"tolerances[{name!r}] = {{'moves': <why>}} must name a measured text value; got "
                                 f"{tol!r}")


def settle(outcome: CheckOutcome) -> tuple[str, str]:
    """The verdict a check has earned, and the reason when it is withheld: ``(verdict, reason)``.

    A check whose positive control (the ideal through the same rule) did not pass reads ``inconclusive (not
    testable under this reading)``, whatever it measured: its rule cannot tell the model from the reading.
    A ``pass`` stands only if the check's negative control was rejected and its trained run (if any) converged;
    otherwise it reads ``inconclusive`` with the reason (``not converged`` comes first: an unconverged run says
    nothing whatever its control did). A rejected control whose margin puts it at its bar (or on the true side)
    does not count as rejected either: ``inconclusive (control at its bar)``. ``fail`` and ``inconclusive`` are kept
    as the check gave them.
    """
    if outcome.positive_control is not None and not outcome.positive_control.passed:
        return "inconclusive", (f"{NOT_TESTABLE}: the ideal ({outcome.positive_control.description}) does not pass "
                                "the rule")
    if outcome.verdict != "pass":
        return outcome.verdict, outcome.reason
    if outcome.converged is not None and not plateaued(outcome.converged):
        return "inconclusive", NOT_CONVERGED
    if outcome.control is None:
        return "inconclusive", NO_CONTROL
    if not outcome.control.rejected:
        return "inconclusive", f"{NOT_DISCRIMINATING}: the control ({outcome.control.description}) was not rejected"
    if outcome.control.at_its_bar:
        margin = outcome.control.margin
        return "inconclusive", (f"{NOT_DISCRIMINATING}, {AT_ITS_BAR}: the control's {margin.quantity} = "
                                f"{margin.value:.10g} against the rule's bar {margin.bar:.10g}")
    return "pass", ""


def plateaued(converged: dict | bool) -> bool:
    """Whether a trained run's plateau test (``converged["plateaued"]``) passed; a bare bool, as checks not yet
    recording their test give it, is taken as the flag itself."""
    return bool(converged["plateaued"]) if isinstance(converged, dict) else bool(converged)


def finding_status(verdict: str) -> str:
    """The status of a ``stronger`` statement from its check's settled verdict."""
    return {"pass": "holds", "fail": "refuted"}.get(verdict, "open")


def verdict_counts(verdicts) -> str:
    """'3 pass, 1 fail, 2 inconclusive, 1 error' (errors are counted apart from verdicts)."""
    verdicts = list(verdicts)
    return ", ".join(f"{verdicts.count(v)} {v}" for v in RECORD_VERDICTS)


@dataclass
class CheckContext:
    """What a check may use: the tier, a seed, a folder for figures and a cache shared within one report.

    ``rng(name)`` gives every check its own generator derived from the report seed and a name, so adding a
    check never shifts the random numbers of another. ``cache`` lets several checks share one expensive
    object (a trained model) inside one report run. ``map(fn, tasks)`` runs a sweep through the report's
    executor (serial, joblib processes or Dask), with results independent of the backend.
    """

    tier: str = "quick"
    seed: int = 0
    figures_dir: Path | None = None
    quiet: bool = True
    cache: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # user input, e.g. {"kernel": ndarray} from --kernel FILE
    jobs: int = 1
    backend: str = "joblib"
    scheduler: str | None = None
    device: str = "cpu"  # where the paper-experiment presets train (fig2, fig3, fig5, fig6, robustness)

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {self.tier!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.device == "cuda":
            if not torch.cuda.is_available():
                raise ValueError("device 'cuda' was asked for but no CUDA device is present; use --device cpu")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        self.seed = int(self.seed)

    @property
    def full(self) -> bool:
        return self.tier == "full"

    def seed_for(self, name: str) -> int:
        """A 63-bit integer seed derived from the report seed and ``name`` (for torch.Generator)."""
        ss = np.random.SeedSequence([self.seed, zlib.crc32(name.encode())])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def rng(self, name: str) -> np.random.Generator:
        """A NumPy generator derived from the report seed and ``name``."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, zlib.crc32(name.encode())]))

    def map(self, fn, tasks, desc: str | None = None) -> list:
        """Run ``fn`` over ``tasks`` with the report's executor (see :mod:`reports.executor`), results in order."""
        return map_tasks(fn, tasks, jobs=self.jobs, backend=self.backend, scheduler=self.scheduler,
                         quiet=self.quiet, desc=desc)

    def figure_path(self, filename: str) -> Path:
        """Where to save a figure; the check puts ``filename`` into ``CheckOutcome.figures``."""
        if self.figures_dir is None:
            raise ValueError("figures_dir is not set: this context was made without a report folder")
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        return self.figures_dir / filename


#: Resolution of every report figure (PNG); each also gets a vector copy (SVG) for papers.
FIGURE_DPI = 150


def new_figure(*args, **kwargs):
    """``matplotlib.pyplot.subplots`` on the Agg backend (no display needed)."""
    matplotlib.use("Agg")
    return plt.subplots(*args, **kwargs)


def save_figure(fig, path) -> None:
    """Save ``fig`` as PNG at :data:`FIGURE_DPI` and as SVG beside it, both byte-reproducible, then close it."""
    path = Path(path)
    with plt.rc_context({"svg.hashsalt": "bma-verify"}):  # fixed ids: the same figure gives the same SVG bytes
        fig.savefig(path.with_suffix(".png"), dpi=FIGURE_DPI, metadata={"Software": None})
        fig.savefig(path.with_suffix(".svg"), metadata={"Date": None, "Creator": None})
    plt.close(fig)


def verdict_from_interval(low: float, high: float, bound: float, *, below: bool = True) -> str:
    """Verdict of a Monte Carlo claim 'value <= bound' (``below``) or 'value >= bound' from an interval.

    pass when the whole interval is on the claimed side, fail when it is wholly on the other, else
    inconclusive.
    """
    if below:
        return "pass" if high <= bound else ("fail" if low > bound else "inconclusive")
    return "pass" if low >= bound else ("fail" if high < bound else "inconclusive")


def jsonable(value: Any) -> Any:
    """Convert NumPy scalars and arrays (recursively) to plain JSON types; non-finite floats to strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    return value
