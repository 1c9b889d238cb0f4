"""Compare a rerun's measured values with the committed reference report (``reports/reference/``).

Tolerances are stated per value by the check that produced it (``CheckOutcome.tolerances``: exact values tight,
Monte Carlo values within their error, trained-model values within seed spread). A value without a stated
tolerance is compared at ``abs=1e-9`` (floats) or exactly (everything else).

A text value (a diagnostic reading's verdict, say) is compared exactly, unless the check declares that it moves with
the CPU path (``{"moves": "why, with the measured spread"}``): then it is not compared, and the numbers it rests on
still are.

The verdict's reason is compared with its decimals masked; its integers (seed counts) are compared exactly unless
the check declares, under the reserved key :data:`REASON_KEY`, that they move with the CPU path
(``{"reason": {"counts": "why, with the measured spread"}}``): then only its words are compared.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
DEFAULT_ABS = 1e-9
#: A decimal number inside a verdict's reason: masked before reasons are compared (the values themselves are
#: compared within their tolerances; integers such as seed counts are compared exactly unless declared to move).
_DECIMAL = re.compile(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?")
_INTEGER = re.compile(r"\d+")
#: The key of ``CheckOutcome.tolerances`` that speaks for the reason, not for a measured value.
REASON_KEY = "reason"


def reason_shape(reason: str | None, *, counts_move: bool = False) -> str:
    """A verdict's reason with its decimal numbers masked ("not converged: … 0.0123 nats" → "… # nats"), and its
    integers too when ``counts_move`` ("2 of 3 seeds meet the rule" → "# of # seeds meet the rule")."""
    shape = _DECIMAL.sub("#", reason or "")
    return _INTEGER.sub("#", shape) if counts_move else shape


def leaves(value, prefix=""):
    """(dotted name, value) for every non-dict value of a nested dict."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from leaves(sub, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def _tolerance_for(key: str, tolerances: dict) -> dict | None:
    """The tolerance of ``key`` or of its closest listed parent ("a.b.c" falls back to "a.b", then "a")."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in tolerances:
            return tolerances[name]
    return None


def _close(ref, new, tol: dict | None) -> bool:
    if tol is not None and "moves" in tol and isinstance(ref, str) and isinstance(new, str):
        return True  # declared to move with the CPU path (CheckOutcome checks that it names a text value)
    if isinstance(ref, list) and isinstance(new, list):
        return len(ref) == len(new) and all(_close(a, b, tol) for a, b in zip(ref, new))
    if isinstance(ref, dict) and isinstance(new, dict):  # records inside a list: numbers within tolerance too
        return ref.keys() == new.keys() and all(_close(ref[k], new[k], tol) for k in ref)
    if isinstance(ref, bool) or isinstance(new, bool) or not (
            isinstance(ref, (int, float)) and isinstance(new, (int, float))):
        return ref == new
    if tol is None:
        if isinstance(ref, int) and isinstance(new, int):
            return ref == new
        tol = {"abs": DEFAULT_ABS}
    if math.isnan(ref) or math.isnan(new):
        return math.isnan(ref) and math.isnan(new)
    allowed = tol.get("abs", 0.0) + tol.get("rel", 0.0) * abs(ref)
    return abs(new - ref) <= allowed


def _keyed(claim: dict):
    """(key, check) for each check of a results.json claim; key = (claim id, kind, reading, rank)."""
    seen: dict = {}
    for check in claim["checks"]:
        kind = (check["kind"], check["reading"])
        seen[kind] = seen.get(kind, -1) + 1
        yield (claim["id"], *kind, seen[kind]), check


def compare_results(reference: dict, current: dict, *, other_processor: list | None = None) -> list[str]:
    """Descriptions of every measured value that moved beyond its tolerance (empty when nothing moved).

    Checks are matched by (claim id, kind, reading, rank among the claim's checks of that kind and reading), not
    by the function that ran them, so moving code leaves the match intact; only checks present in ``current`` are
    compared, and a check of the reference missing from ``current`` is not reported (the caller chooses what to
    rerun).

    ``other_processor``: pass a list when ``current`` ran on another processor than the reference
    (:func:`reports.float_path.cpu_identity` differs). A trained run at a transition may then settle differently,
    so a model check's verdict that moves to or from INCONCLUSIVE, and its reason, go to that list instead of the
    result; a decided verdict that turns into the opposite one, and every value beyond its tolerance, still count.
    """
    moved = []
    ref_checks = {key: k for c in reference["claims"] for key, k in _keyed(c)}
    for claim in current["claims"]:
        for key, check in _keyed(claim):
            if key not in ref_checks:
                moved.append(f"{claim['id']} {check['function']}: not in the reference report")
                continue
            ref = ref_checks[key]
            tolerances = ref.get("tolerances") or {}
            counts_move = bool((tolerances.get(REASON_KEY) or {}).get("counts"))
            settles = other_processor is not None and check["kind"] == "model"
            if ref["verdict"] != check["verdict"]:
                undecided = "inconclusive" in (ref["verdict"], check["verdict"])
                (other_processor if settles and undecided else moved).append(
                    f"{claim['id']} {check['function']}: verdict {ref['verdict']} -> {check['verdict']}")
            elif (reason_shape(ref.get("reason"), counts_move=counts_move)
                  != reason_shape(check.get("reason"), counts_move=counts_move)):
                (other_processor if settles else moved).append(
                    f"{claim['id']} {check['function']}: reason {ref.get('reason')!r} -> {check.get('reason')!r}")
            ref_rejected = (ref.get("control") or {}).get("rejected")
            new_rejected = (check.get("control") or {}).get("rejected")
            if ref_rejected != new_rejected:
                moved.append(f"{claim['id']} {check['function']}: control rejected {ref_rejected} -> {new_rejected}")
            ref_values = dict(leaves(ref["measured"]))
            new_values = dict(leaves(check["measured"]))
            for name in sorted(set(ref_values) | set(new_values)):
                if name not in new_values or name not in ref_values:
                    moved.append(f"{claim['id']} {check['function']}: value {name!r} appeared or disappeared")
                    continue
                tol = _tolerance_for(name, tolerances)
                if not _close(ref_values[name], new_values[name], tol):
                    moved.append(f"{claim['id']} {check['function']}: {name} moved from {ref_values[name]!r} to "
                                 f"{new_values[name]!r} (tolerance {tol or {'abs': DEFAULT_ABS}})")
            if other_processor is None:
                moved += [f"{claim['id']} {check['function']}: {m}" for m in seed_values_moved(ref, check, tolerances)]
    return moved


def seed_values_moved(ref: dict, check: dict, tolerances: dict) -> list[str]:
    """Every training seed's value of each metric (``seeds.metrics.<name>.values``) that moved beyond the tolerance
    the check states for ``<name>``. A metric with no stated tolerance is not compared seed by seed (its first
    seed's value is, under ``measured``); nor is any on another processor, where a seed at a transition may settle
    elsewhere (``compare_results``)."""
    ref_metrics = (ref.get("seeds") or {}).get("metrics") or {}
    new_metrics = (check.get("seeds") or {}).get("metrics") or {}
    moved = []
    for name in sorted(set(ref_metrics) & set(new_metrics)):
        tol = _tolerance_for(name, tolerances)
        before, after = ref_metrics[name].get("values"), new_metrics[name].get("values")
        if tol is not None and not _close(before, after, tol):
            moved.append(f"seeds' {name} moved from {before!r} to {after!r} (tolerance {tol})")
    return moved
