"""The contract between a claim's checks and the report builder.

A check is a function ``check(ctx: CheckContext) -> CheckOutcome``. It calls functions of ``theory``,
``numerics`` or ``model`` and packages what they return; it computes nothing itself. The builder times it,
records its kind (``symbolic``, ``exact``, ``monte-carlo`` or ``model``) and writes the outcome into
``results.json``, ``REPORT.md`` and ``report.html``.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

VERDICTS = ("pass", "fail", "inconclusive")
KINDS = ("symbolic", "exact", "monte-carlo", "model")
TIERS = ("quick", "full")


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
    summary : str
        One sentence for the report: what was computed and how it compares.
    derivation : list of (caption, latex)
        Steps of a symbolic derivation, rendered in the report.
    tables, figures : tables of values; figure file names (PNG) relative to the report's ``figures/``.
    instance : dict or None
        The failing instance (JSON, re-checkable with ``bma-verify check --instance``) when the verdict is fail.
    tolerances : dict
        Per value of ``measured``, how far a rerun may move it before the regression test flags it:
        ``{"key": {"abs": 1e-12}}`` or ``{"key": {"rel": 0.1}}``; keys not listed are compared exactly
        (non-float) or at ``abs=1e-9`` (float). Monte Carlo and trained values name wider tolerances here.
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

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


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

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {self.tier!r}")

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
        from reports.executor import map_tasks

        return map_tasks(fn, tasks, jobs=self.jobs, backend=self.backend, scheduler=self.scheduler,
                         quiet=self.quiet, desc=desc)

    def figure_path(self, filename: str) -> Path:
        """Where to save a figure; the check puts ``filename`` into ``CheckOutcome.figures``."""
        if self.figures_dir is None:
            raise ValueError("figures_dir is not set: this context was made without a report folder")
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        return self.figures_dir / filename


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
