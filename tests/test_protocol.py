"""Pre-registration by construction (reports.protocol): every trained claim's protocol is one data object whose
SHA-256 draws the report's training seeds, and every protocol in force is listed in its notes' revision table.

References: hashlib on a hand-written canonical form; the notes pages read as text; seeds recomputed from the hash.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest

import bma_verify.reports.checks.trained as trained
from bma_verify.model.seeds import report_training_seeds
from bma_verify.reports.core import CheckContext
from bma_verify.reports.protocol import (RUN_SETS, SEEDS_PER_TIER, canonical_json, notes_claim, protocol,
                                         protocol_hash, protocol_record, revisions, run_plan, run_set_of)


@pytest.mark.parametrize("run_set", sorted(RUN_SETS))
def test_every_protocol_in_force_is_listed_in_its_notes_revision_table(run_set):
    # a protocol that changed without a new revision row (date, change, why, evidence) fails here
    rows = revisions(run_set)
    assert rows, f"docs/notes/{notes_claim(run_set)}.md has no protocol revisions"
    for tier in SEEDS_PER_TIER:
        digest = protocol_hash(protocol(run_set, tier))
        listed = [r for r in rows if r["tier"] == tier]
        assert any(r["sha256"] == digest for r in listed), (
            f"{run_set} ({tier}): protocol {digest} is not listed under 'Protocol revisions' in "
            f"docs/notes/{notes_claim(run_set)}.md; add a revision row (date, change, why, development evidence)")
        assert all(r["date"] and r["change"] and r["why"] and r["evidence"] for r in listed)


def test_the_hash_is_sha256_of_a_canonical_json_independent_of_key_order():
    a = {"b": (1, 2.5), "a": {"y": None, "x": "s"}}
    b = {"a": {"x": "s", "y": None}, "b": [1, 2.5]}
    expected = hashlib.sha256(b'{"a":{"x":"s","y":null},"b":[1,2.5]}').hexdigest()
    assert canonical_json(a) == canonical_json(b) and protocol_hash(a) == protocol_hash(b) == expected
    assert protocol_hash({"t": 0.028}) != protocol_hash({"t": 0.029})
    with pytest.raises(ValueError, match="finite"):
        canonical_json({"t": float("nan")})
    with pytest.raises(ValueError, match="JSON data"):
        canonical_json({"t": object()})


def test_a_run_plan_leaves_out_only_the_seed_and_the_device():
    @dataclass
    class Config:
        steps: int = 10
        seed: int = 3
        device: str = "cpu"
        sizes: tuple = (1, 2)

    assert run_plan(Config()) == {"steps": 10, "sizes": [1, 2]}
    assert run_plan(Config(seed=4, device="cuda")) == run_plan(Config())


def test_training_seeds_are_drawn_from_the_report_seed_and_the_protocol_hash():
    for tier in SEEDS_PER_TIER:
        for run_set in RUN_SETS:
            ctx = CheckContext(tier=tier, seed=7)
            digest = protocol_hash(protocol(run_set, tier))
            assert trained.training_seeds(ctx, run_set) == report_training_seeds(7, digest, SEEDS_PER_TIER[tier])
    # the quick and full protocols differ, so are their seeds
    assert protocol_hash(protocol("fig2", "quick")) != protocol_hash(protocol("fig2", "full"))


def test_a_changed_threshold_is_reported_as_not_registered(monkeypatch):
    record = protocol_record("thm2-consistency", "quick")
    assert record["run_set"] == "fig2" and record["registered"] and record["revisions"] >= 1
    assert record["decided_with"] == ["exp-fig2-attention", "exp-fig3-parameters", "thm2-consistency"]
    monkeypatch.setitem(trained.THRESHOLDS["quick"], "accuracy_shortfall", 0.06)
    changed = protocol_record("thm2-consistency", "quick")
    assert changed["sha256"] != record["sha256"] and changed["registered"] is False
    assert json.loads(json.dumps(changed)) == changed


def test_claims_that_train_nothing_have_no_protocol_and_pages_may_be_missing(tmp_path):
    assert run_set_of("lemma3-strict-dpi") is None and protocol_record("lemma3-strict-dpi", "quick") is None
    assert run_set_of("exp-fig3-parameters") == "fig2" and run_set_of("exp-robustness") == "robustness"
    assert revisions("fig2", notes_dir=tmp_path) is None  # an installed package ships no notes
    with pytest.raises(ValueError, match="run_set must be one of"):
        protocol("fig3", "quick")
    with pytest.raises(ValueError, match="tier must be one of"):
        protocol("fig2", "medium")
