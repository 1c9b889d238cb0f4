"""Pre-registration by construction: a trained claim's protocol is one data object, and its hash draws the seeds.

A protocol holds everything a trained verdict is decided by: the runs (their configs, seed left out), the readings,
thresholds and noise bands, the count rule and the plateau test. Runs shared by several claims (fig2's run decides
exp-fig2-attention, exp-fig3-parameters and thm2-consistency) form one *run set*, whose protocol holds every such
claim's part. The SHA-256 of the protocol's canonical JSON is printed in the report and seeds the report's training
seeds (below ``DEV_SEED_MIN``, with the report seed): a change of any threshold, step count or rule draws new report
seeds, so no threshold can be fitted to seeds already seen. Development seeds (``>= DEV_SEED_MIN``) never depend on
it. Each change is listed, with the development evidence for it, under "Protocol revisions" in the notes of the run
set's first claim (``docs/notes/<claim>.md``); a test fails when a protocol's hash is missing there.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from importlib import import_module
from pathlib import Path

from bma_verify.model import continuation, convergence

#: Training seeds per trained reproduction (``model.seeds.report_training_seeds`` draws them): at least 3 in the quick
#: tier and at least 5 in the full tier.
SEEDS_PER_TIER = {"quick": 3, "full": 5}
#: Run set → the claim folders (``bma_verify.reports.claims.<name>``) whose claims decide on its runs, the first one
#: owning the notes page that lists the protocol's revisions.
RUN_SETS = {
    "fig2": ("exp_fig2_attention", "exp_fig3_parameters", "thm2_consistency"),
    "fig5": ("exp_fig5_generalization",),
    "fig6": ("exp_fig6_column_alignment",),
    "robustness": ("exp_robustness",),
    "prop2-ds": ("prop2_ds_quadratic",),
    "footnote1-selective-induction": ("footnote1_selective_induction",),
    "ext-dag-training": ("ext_dag_training",),
    "ext-selective-depth": ("ext_selective_depth",),
}
#: The plateau test every run is judged converged by (``model.convergence``).
PLATEAU = {"window_fraction": convergence.WINDOW_FRACTION, "noise_fraction": convergence.NOISE_FRACTION,
           "min_points": convergence.MIN_POINTS, "max_se": convergence.MAX_SE, "flat_atol": convergence.FLAT_ATOL}
#: The count rule over training seeds (``reports.checks.trained.seeds_needed``): ceil(fraction × n) must agree.
COUNT_FRACTION = 0.8
#: The run sets whose checks continue a converged miss to 2× its steps (``model.continuation``), per tier; elsewhere a
#: miss stays unconfirmed and counts for neither side. exp-robustness's three GPT continuations would add about 3
#: minutes to a 7-minute quick report, so its quick tier cannot confirm a miss and says so; fig6 and ext-dag-training
#: train nothing at the quick tier. prop2's FFN check (full tier) has no continuation yet (its continuation of the
#: bilinear and key-norm runs does); ext-selective-depth's misses (depth 2 solving the task) stand without one.
CONTINUED = {"quick": ("fig2", "fig5", "footnote1-selective-induction", "prop2-ds"),
             "full": ("fig2", "fig5", "fig6", "robustness", "footnote1-selective-induction", "ext-dag-training",
                      "prop2-ds")}


def plain(value):
    """``value`` as plain JSON data: dataclasses as dicts, tuples as lists, dict keys as strings; floats must be
    finite (a protocol holds no NaN)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a protocol holds finite numbers only, got {value!r}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"a protocol holds JSON data, dataclasses, tuples and dicts only; got {type(value).__name__}")


def run_plan(config) -> dict:
    """A run's config as protocol data: everything but its seed and device (the report draws the seed; the device
    changes no rule)."""
    data = plain(config)
    return {k: v for k, v in data.items() if k not in ("seed", "device")}


def canonical_json(protocol: dict) -> str:
    """The protocol's canonical JSON: keys sorted, no spaces, floats by their shortest repr."""
    return json.dumps(plain(protocol), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def protocol_hash(protocol: dict) -> str:
    """SHA-256 (hex) of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(protocol).encode("ascii")).hexdigest()


def protocol(run_set: str, tier: str) -> dict:
    """The protocol of ``run_set`` at ``tier``: seeds per tier, count rule, plateau test, and each deciding claim's
    own part (its module's ``protocol(tier)``: runs, readings, thresholds)."""
    if run_set not in RUN_SETS:
        raise ValueError(f"run_set must be one of {', '.join(RUN_SETS)}, got {run_set!r}")
    if tier not in SEEDS_PER_TIER:
        raise ValueError(f"tier must be one of {', '.join(SEEDS_PER_TIER)}, got {tier!r}")
    claims = {}
    for name in RUN_SETS[run_set]:
        module = import_module(f"bma_verify.reports.claims.{name}.claim")
        claims[module.CLAIM.id] = plain(module.protocol(tier))
    return {"run_set": run_set, "tier": tier, "training_seeds": SEEDS_PER_TIER[tier],
            "count_rule": {"fraction": COUNT_FRACTION}, "plateau": PLATEAU, "claims": claims,
            "miss_rule": {"factor": continuation.FACTOR, "max_move": continuation.MAX_MOVE,
                          "continued": run_set in CONTINUED[tier]}}


def run_set_of(claim_id: str) -> str | None:
    """The run set whose runs decide ``claim_id`` (None for a claim that trains nothing)."""
    for run_set, names in RUN_SETS.items():
        if claim_id.replace("-", "_") in names:
            return run_set
    return None


def notes_claim(run_set: str) -> str:
    """The claim id whose notes page lists the run set's protocol revisions (its first claim)."""
    return RUN_SETS[run_set][0].replace("_", "-")


#: The notes folder of a checkout (not part of an installed package: there the revision count reads None).
NOTES_DIR = Path(__file__).resolve().parents[1] / "docs" / "notes"
#: The heading of a notes page's revision table; each row: | tier | `sha256` | date | change | why | evidence |.
REVISIONS_HEADING = "## Protocol revisions"


def revisions(run_set: str, notes_dir: Path = NOTES_DIR) -> list[dict] | None:
    """The revision rows of ``run_set`` ({tier, sha256, date, change, why, evidence}) from the notes page of its first
    claim; None where the page is missing (an installed package ships no notes)."""
    page = notes_dir / f"{notes_claim(run_set)}.md"
    if not page.is_file():
        return None
    text = page.read_text(encoding="utf-8")
    if REVISIONS_HEADING not in text:
        return []
    section = text.split(REVISIONS_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in SEEDS_PER_TIER:
            rows.append(dict(zip(("tier", "sha256", "date", "change", "why", "evidence"),
                                 [cells[0], cells[1].strip("`")] + cells[2:])))
    return rows


def protocol_record(claim_id: str, tier: str) -> dict | None:
    """What results.json records of a trained claim's protocol: its run set, SHA-256 and revision count at ``tier``
    (None for a claim that trains nothing). ``registered``: the hash is listed in the notes (None without notes)."""
    run_set = run_set_of(claim_id)
    if run_set is None:
        return None
    digest = protocol_hash(protocol(run_set, tier))
    rows = revisions(run_set)
    tier_rows = None if rows is None else [r for r in rows if r["tier"] == tier]
    return {"run_set": run_set, "sha256": digest, "decided_with": [n.replace("_", "-") for n in RUN_SETS[run_set]],
            "revisions": None if tier_rows is None else len(tier_rows),
            "registered": None if tier_rows is None else any(r["sha256"] == digest for r in tier_rows)}


if __name__ == "__main__":  # python -m bma_verify.reports.protocol: the current hash of every run set and tier
    for name in RUN_SETS:
        for tier_name in SEEDS_PER_TIER:
            print(f"{name:32} {tier_name:6} {protocol_hash(protocol(name, tier_name))}")
