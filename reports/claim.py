"""What a claim is: its statement, its checks and how each reads the claim.

A claim lives in one module of :mod:`reports.claims`, or in a claim folder's ``claim.py`` (``CLAIM = Claim(...)``
beside its check functions); the registry imports them in the catalog's order. A check's ``run`` takes a :class:`reports.core.CheckContext` and returns a
:class:`reports.core.CheckOutcome`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bma_verify.reports.catalog import SECTIONS
from bma_verify.reports.core import KINDS, READINGS

#: Whose statement a claim is: the paper's, or ours (a conjecture of ours, the ``ext-*`` claims). A claim of ours
#: reports findings and never fails the paper (docs/claims.md, "Whose claim").
OWNERS = ("paper", "ours")
#: The id prefix of our claims: a claim whose id starts with it is ours unless it says otherwise.
OURS_PREFIX = "ext-"


@dataclass(frozen=True)
class Check:
    """One check of a claim.

    ``reading``: ``as-stated`` (the paper's wording, decides the claim), ``stronger`` (a sharper statement of
    ours: a finding, never a failure of the paper) or ``reproduction`` (an experiment whose verdict names the
    choices the paper leaves open). ``cites`` = ``"claim-id:kind"`` of another claim's check whose evidence this
    check is: it is not run twice, the report shows it once and points there. ``shares`` names a cached
    computation (a trained run, a sweep) that checks of *different* claims reuse: under ``--jobs N`` checks with
    the same ``shares`` run in one worker, so the computation is done once.
    """

    kind: str  # one of reports.core.KINDS
    run: Callable
    description: str
    reading: str = "as-stated"
    cites: str | None = None
    shares: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.reading not in READINGS:
            raise ValueError(f"reading must be one of {READINGS}, got {self.reading!r}")
        if not callable(self.run):
            raise ValueError(f"run must be a function of a CheckContext, got {self.run!r}")

    @property
    def function(self) -> str:
        """``"module:function"`` of ``run``: the check's name in results.json and in caches."""
        return f"{self.run.__module__}:{self.run.__qualname__}"


@dataclass(frozen=True)
class Claim:
    """One claim: ``section`` "paper" (the paper's claims) or "beyond" (our extensions, ``ext-*``, and the paper's
    footnote about another task, reported under "Beyond the paper").

    ``owner`` says whose statement it is: "paper" or "ours". Left out, it follows the id: ``ext-*`` claims are ours,
    every other claim (``footnote1-selective-induction`` included, the paper's footnote 1) is the paper's. A claim
    of ours that fails reads ``refuted``, a finding, never ``fail``: it cannot fail the paper.
    """

    id: str
    paper: str  # what the paper says, in our words (the paper's text is not public in full)
    statement: str  # the precise statement this package checks
    checks: tuple[Check, ...]
    section: str = "paper"
    owner: str | None = None  # "paper" | "ours"; None: "ours" for an ext-* id, else "paper"

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"section must be one of {SECTIONS}, got {self.section!r}")
        if self.owner is None:  # frozen: set the derived owner once, here
            object.__setattr__(self, "owner", "ours" if self.id.startswith(OURS_PREFIX) else "paper")
        if self.owner not in OWNERS:
            raise ValueError(f"owner must be one of {OWNERS}, got {self.owner!r}")
        if self.owner == "ours" and self.section != "beyond":
            raise ValueError(f"{self.id}: a claim of ours belongs to section 'beyond', not {self.section!r}")
