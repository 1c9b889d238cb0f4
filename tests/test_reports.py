"""The claim registry and the verdict rules: aggregation, controls, readings, citations, executor backends."""
import json

import numpy as np
import pytest

import bma_verify.reports.builder as builder
from bma_verify.reports import catalog, cli, io, render
from bma_verify.reports.core import (NOT_TESTABLE, CheckContext, CheckOutcome, Control, Finding, PositiveControl, settle,
                                    verdict_from_interval)
from bma_verify.reports.executor import map_tasks, spawn_seeds
from bma_verify.reports.registry import CLAIM_IDS, CLAIMS, Check, Claim
from tests.report_stand_ins import (passing_check, refuted_stronger_check, reproduction_fail_check,
                                    unconverged_check, uncontrolled_check, undiscriminating_check)


def test_registry_has_every_claim_of_the_paper_and_beyond_once():
    # Reference: the paper's 13 claim ids (docs/claims.md), typed here on purpose (the registry must not drift)
    paper_ids = {"bma-score-identity", "prop1-invariance", "thm1-construction", "lemma3-strict-dpi",
                 "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient", "prop2-ds-quadratic",
                 "exp-fig2-attention", "exp-fig3-parameters", "exp-fig5-generalization", "exp-fig6-column-alignment",
                 "exp-robustness"}
    # beyond the paper: the DAG extensions of ours and the paper's footnote 1
    beyond_ids = {"ext-dag-posterior", "ext-dag-lemma4-sets", "ext-dag-lemma3-sets", "ext-dag-thm3-sets",
                  "ext-dag-construction", "ext-dag-families", "ext-dag-training",
                  "footnote1-selective-induction", "ext-selective-fig3", "ext-selective-claim1",
                  "ext-selective-depth"}
    # claim folders (reports/claims/<claim_id>/) are discovered: adding one edits no list here (one that
    # REPORT_ORDER does not name follows the named ones of its section)
    folder_ids = {entry.id for entry in catalog.CLAIM_INDEX if entry.id not in catalog.REPORT_ORDER}
    assert set(catalog.REPORT_ORDER) == paper_ids | beyond_ids
    assert set(CLAIM_IDS) == paper_ids | beyond_ids | folder_ids and len(CLAIM_IDS) == len(set(CLAIM_IDS))
    assert {c.id for c in CLAIMS if c.section == "beyond"} - folder_ids == beyond_ids
    assert all(claim.checks for claim in CLAIMS)


def test_every_registered_check_is_a_function_of_its_claim_module():
    # One claim, one place: each check's function lives in the claim's own module, or its folder's claim.py (or is
    # cited from another claim)
    for claim in CLAIMS:
        for check in claim.checks:
            assert callable(check.run)
            home = check.run.__module__.removesuffix(".claim").rsplit(".", 1)[-1]
            assert check.cites or home == claim.id.replace("-", "_"), (claim.id, check.function)


def test_a_check_that_is_not_a_function_is_refused():
    with pytest.raises(ValueError, match="run must be a function"):
        Check("exact", "module:function", "d")


def test_claim_verdict_aggregation():
    assert builder.claim_verdict(["pass", "pass"]) == "pass"
    assert builder.claim_verdict(["pass", "inconclusive"]) == "inconclusive"
    assert builder.claim_verdict(["inconclusive", "fail"]) == "fail"
    assert builder.claim_verdict([]) == "inconclusive"
    # a claim of ours that fails is a refuted conjecture, not a fail; its other verdicts read as the paper's
    assert builder.claim_verdict(["pass", "fail"], "ours") == "refuted"
    assert builder.claim_verdict(["pass", "inconclusive"], "ours") == "inconclusive"


def test_whose_claim_follows_the_id_unless_stated():
    # reference: docs/claims.md, "Whose claim": ext-* claims are ours; footnote 1 is the paper's, in "beyond" too
    owners = {c.id: c.owner for c in CLAIMS}
    assert all(owner == ("ours" if cid.startswith("ext-") else "paper") for cid, owner in owners.items())
    assert owners["footnote1-selective-induction"] == "paper"
    assert Claim("x", "p", "s", (), section="beyond", owner="ours").owner == "ours"
    with pytest.raises(ValueError, match="owner"):
        Claim("x", "p", "s", (), owner="referee")
    with pytest.raises(ValueError, match="section 'beyond'"):  # a conjecture of ours is never among the paper's
        Claim("ext-x", "p", "s", ())


def test_interval_verdicts():
    assert verdict_from_interval(0.1, 0.2, 0.5) == "pass"
    assert verdict_from_interval(0.4, 0.6, 0.5) == "inconclusive"
    assert verdict_from_interval(0.6, 0.7, 0.5) == "fail"
    assert verdict_from_interval(0.6, 0.7, 0.5, below=False) == "pass"


def test_context_rngs_are_per_name_and_reproducible():
    a, b = CheckContext(seed=5), CheckContext(seed=5)
    assert a.rng("x").random() == b.rng("x").random()
    assert a.rng("x").random() != a.rng("y").random()
    assert CheckContext(seed=6).rng("x").random() != a.rng("x").random()


def _run(*checks, claim_id="c", tmp_path):
    return builder.run_claims([Claim(claim_id, "p", "s", tuple(checks))], CheckContext(figures_dir=tmp_path))[0]


def test_a_pass_needs_a_rejected_control(tmp_path):
    # reference: docs/claims.md, "How a verdict is earned" — no control, or a control that passes too, cannot pass
    assert _run(Check("exact", passing_check, "d"), tmp_path=tmp_path)["verdict"] == "pass"
    no_control = _run(Check("exact", uncontrolled_check, "d"), tmp_path=tmp_path)
    assert no_control["verdict"] == "inconclusive" and no_control["checks"][0]["reason"] == "no negative control"
    accepted = _run(Check("exact", undiscriminating_check, "d"), tmp_path=tmp_path)
    assert accepted["verdict"] == "inconclusive"
    assert accepted["checks"][0]["reason"].startswith("not discriminating")
    assert accepted["checks"][0]["check_verdict"] == "pass"  # what the check said before it was settled


def test_an_unconverged_run_never_passes(tmp_path):
    claim = _run(Check("model", unconverged_check, "d", reading="reproduction"), tmp_path=tmp_path)
    assert claim["verdict"] == "inconclusive" and claim["checks"][0]["reason"] == "not converged"


def test_a_check_whose_ideal_fails_its_own_rule_is_not_testable_whatever_it_measured():
    # the positive control (the ideal through the same rule) decides whether the rule can decide at all
    control = Control("near miss", {}, rejected=True)
    ideal_fails = PositiveControl("BMA reading min(L, L') examples", {"rho": -1.0}, passed=False)
    for verdict in ("pass", "fail"):
        settled, reason = settle(CheckOutcome(verdict, {}, control=control, positive_control=ideal_fails))
        assert settled == "inconclusive" and reason.startswith(NOT_TESTABLE) and "min(L, L')" in reason
    ideal_passes = PositiveControl("BMA", {}, passed=True)
    assert settle(CheckOutcome("pass", {}, control=control, positive_control=ideal_passes)) == ("pass", "")
    record = builder.outcome_entry(Check("exact", lambda ctx: None, "x"),
                             CheckOutcome("pass", {}, control=control, positive_control=ideal_passes), 0.0, None)
    assert record["positive_control"] == {"description": "BMA", "measured": {}, "passed": True}


def test_settle_keeps_fail_and_inconclusive():
    control = Control("x", {}, rejected=False)
    assert settle(CheckOutcome("fail", {}, control=control)) == ("fail", "")
    assert settle(CheckOutcome("inconclusive", {}, reason="straddles")) == ("inconclusive", "straddles")
    with pytest.raises(ValueError, match="status"):
        Finding("s", "true")


def test_a_stronger_reading_gives_a_finding_and_never_fails_the_claim(tmp_path):
    claim = _run(Check("exact", passing_check, "as stated"),
                 Check("exact", refuted_stronger_check, "our sharper bound", reading="stronger"), tmp_path=tmp_path)
    assert claim["verdict"] == "pass"
    assert claim["findings"] == [{"statement": "our sharper bound", "status": "refuted",
                                  "instance": {"kernel": [[1.0]]}, "evidence": "our sharper bound fails",
                                  "check": f"exact:{refuted_stronger_check.__module__}:refuted_stronger_check"}]
    md = render.render_markdown({"tier": "quick", "seed": 0, "package_version": "x", "started": "t",
                                 "seconds": 0.0, "environment": builder.environment(), "claims": [claim]})
    assert "| PASS | finding: our sharper bound (refuted, 1 instance) |" in md


def test_a_failed_reproduction_names_its_reading_and_is_not_a_bare_fail(tmp_path):
    claim = _run(Check("model", reproduction_fail_check, "d", reading="reproduction"), tmp_path=tmp_path)
    assert claim["verdict"] == "fail" and claim["assumptions"] == ["reading R1: clipped offsets", "batch 256"]
    assert render.verdict_label(claim) == "NOT REPRODUCED (reading R1: clipped offsets)"


def test_a_citing_check_shows_the_cited_evidence_once(monkeypatch, tmp_path):
    calls = []

    def counted_check(ctx):
        calls.append(1)
        return passing_check(ctx)

    source = Claim("src", "p", "s", (Check("exact", counted_check, "d"),))
    citing = Claim("cit", "p", "s", (Check("exact", counted_check, "d", cites="src:exact"),))
    monkeypatch.setattr(builder, "get_claim", {"src": source, "cit": citing}.__getitem__)
    records = builder.run_claims([source, citing], CheckContext(figures_dir=tmp_path))
    assert len(calls) == 1  # run once
    cited = records[1]["checks"][0]
    assert cited["measured"] == {} and cited["verdict"] == "pass" and "src (exact)" in cited["summary"]


def test_cli_check_list_and_unknown_claim(capsys):
    assert cli.main(["check", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(cid in listed for cid in CLAIM_IDS)
    assert cli.main(["check", "no-such-claim"]) == 2
    assert "claim must be one of" in capsys.readouterr().err


def test_cli_exit_status_counts_errors_apart():
    ok = {"verdict": "pass", "checks": [{"verdict": "pass"}]}
    err = {"verdict": "error", "checks": [{"verdict": "error"}]}
    bad = {"verdict": "fail", "checks": [{"verdict": "fail"}]}
    assert cli.exit_status([ok]) == 0 and cli.exit_status([ok, err]) == 3 and cli.exit_status([err, bad]) == 1


def test_cli_exit_status_is_1_only_for_a_claim_of_the_paper():
    ok = {"verdict": "pass", "checks": [{"verdict": "pass"}]}
    refuted = {"verdict": "refuted", "owner": "ours", "checks": [{"verdict": "fail"}]}
    ours_fail = {"verdict": "fail", "owner": "ours", "checks": [{"verdict": "fail"}]}  # as an older results.json
    paper_fail = {"verdict": "fail", "owner": "paper", "checks": [{"verdict": "fail"}]}
    assert cli.exit_status([ok, refuted]) == 0 and cli.exit_status([ok, ours_fail]) == 0
    assert cli.exit_status([refuted, paper_fail]) == 1


def test_load_kernel_formats_and_errors(tmp_path):
    kernel = np.array([[0.7, 0.3], [0.25, 0.75]])
    np.save(tmp_path / "k.npy", kernel)
    np.savetxt(tmp_path / "k.csv", kernel, delimiter=",")
    (tmp_path / "k.json").write_text(json.dumps({"kernel": kernel.tolist()}))
    for name in ("k.npy", "k.csv", "k.json"):
        np.testing.assert_allclose(io.load_kernel(tmp_path / name), kernel)
    (tmp_path / "bad.csv").write_text("0.5,0.6\n0.5,0.5\n")
    with pytest.raises(ValueError, match="row-stochastic"):
        io.load_kernel(tmp_path / "bad.csv")
    (tmp_path / "k.txt").write_text("0.5 0.5\n0.5 0.5\n")
    with pytest.raises(ValueError, match="npy, .csv or .json"):
        io.load_kernel(tmp_path / "k.txt")
    with pytest.raises(ValueError, match="does not exist"):
        io.load_kernel(tmp_path / "missing.npy")


def test_text_is_written_atomically_and_never_over_a_file_when_told_not_to(tmp_path):
    path = tmp_path / "x.json"
    io.write_text_atomic(path, "one")
    io.write_text_atomic(path, "two")
    assert path.read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        io.write_text_atomic(path, "three", overwrite=False)
    assert path.read_text() == "two"


def _draw(seed_sequence):
    """A task of the kind sweeps run: its result depends only on its own seed."""
    return float(np.random.default_rng(seed_sequence).random(3).sum())


def test_executor_results_do_not_depend_on_backend_or_workers():
    tasks = spawn_seeds(42, 12)
    serial = map_tasks(_draw, tasks)
    assert map_tasks(_draw, tasks, jobs=2) == serial
    # a LocalCluster (Dask's own) with two worker processes
    assert map_tasks(_draw, tasks, jobs=2, backend="dask") == serial


def test_executor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="backend"):
        map_tasks(_draw, [], backend="spark")
    with pytest.raises(ValueError, match="jobs"):
        map_tasks(_draw, [], jobs=0)
    with pytest.raises(ValueError, match="scheduler"):
        map_tasks(_draw, [], scheduler="tcp://x:1")
