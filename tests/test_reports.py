"""The report machinery: verdict aggregation, atomic writes, --force, interruption, CLI, executor backends."""
import json

import numpy as np
import pytest

import reports.builder as builder
from reports import cli
from reports.core import CheckContext, CheckOutcome, verdict_from_interval
from reports.executor import map_tasks, spawn_seeds
from reports.registry import CLAIM_IDS, CLAIMS, Check, Claim


def passing_check(ctx):
    path = ctx.figure_path("dummy.png")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot(ctx.rng("dummy").random(5))
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return CheckOutcome("pass", {"value": float(ctx.rng("dummy").random())}, threshold=1.0, summary="fine",
                        figures=["dummy.png"], derivation=[("step", r"\frac{a}{b}")])


def failing_check(ctx):
    return CheckOutcome("fail", {"ratio": 1.5}, threshold=1.0, summary="ratio above one",
                        instance={"kernel": [[0.5, 0.5], [0.5, 0.5]]})


def crashing_check(ctx):
    raise RuntimeError("boom")


def interrupting_check(ctx):
    raise KeyboardInterrupt


T = "tests.test_reports"
GOOD = Claim("good", "paper", "statement", (Check("exact", f"{T}:passing_check", "d"),))
BAD = Claim("bad", "paper", "statement", (Check("exact", f"{T}:passing_check", "d"),
                                          Check("monte-carlo", f"{T}:failing_check", "d")))
CRASH = Claim("crash", "paper", "statement", (Check("exact", f"{T}:crashing_check", "d"),))


@pytest.fixture
def registry(monkeypatch):
    claims = (GOOD, BAD, CRASH)
    monkeypatch.setattr(builder, "CLAIMS", claims)
    monkeypatch.setattr(builder, "get_claim", lambda cid: {c.id: c for c in claims}[cid])
    return claims


def test_registry_has_every_claim_of_the_spec_once():
    # Reference: the 13 claim ids of SPEC.md §4, typed here on purpose (the registry must not drift from the spec).
    spec_ids = {"bma-score-identity", "prop1-invariance", "thm1-construction", "lemma3-strict-dpi",
                "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient", "prop2-ds-quadratic",
                "exp-fig2-attention", "exp-fig3-parameters", "exp-fig5-generalization", "exp-fig6-column-alignment",
                "exp-robustness"}
    assert set(CLAIM_IDS) == spec_ids and len(CLAIM_IDS) == len(spec_ids)
    assert all(claim.checks for claim in CLAIMS)


def test_claim_verdict_aggregation():
    assert builder.claim_verdict(["pass", "pass"]) == "pass"
    assert builder.claim_verdict(["pass", "inconclusive"]) == "inconclusive"
    assert builder.claim_verdict(["inconclusive", "fail"]) == "fail"
    assert builder.claim_verdict([]) == "inconclusive"


def test_interval_verdicts():
    assert verdict_from_interval(0.1, 0.2, 0.5) == "pass"
    assert verdict_from_interval(0.4, 0.6, 0.5) == "inconclusive"
    assert verdict_from_interval(0.6, 0.7, 0.5) == "fail"
    assert verdict_from_interval(0.6, 0.7, 0.5, below=False) == "pass"


def test_report_files_schema_and_verdicts(registry, tmp_path):
    out = builder.build_report("quick", tmp_path / "rep", seed=3)
    results = json.loads((out / "results.json").read_text())
    for key in ("tier", "seed", "package_version", "started", "seconds", "environment", "claims"):
        assert key in results
    by_id = {c["id"]: c for c in results["claims"]}
    assert by_id["good"]["verdict"] == "pass"
    assert by_id["bad"]["verdict"] == "fail"
    assert by_id["bad"]["checks"][1]["instance"] == {"kernel": [[0.5, 0.5], [0.5, 0.5]]}
    # a crash is a failed check with its error, never a silent omission
    assert by_id["crash"]["verdict"] == "fail" and "boom" in by_id["crash"]["checks"][0]["error"]
    for check in by_id["good"]["checks"]:
        assert set(check) >= {"kind", "measured", "threshold", "verdict", "seconds"}
    md, page = (out / "REPORT.md").read_text(), (out / "report.html").read_text()
    assert "figures/dummy.png" in md and "figures/dummy.png" in page and (out / "figures" / "dummy.png").exists()
    assert "FAIL" in md and "\\frac{a}{b}" in md and "http" not in page  # opens offline: no external resources


def test_report_is_reproducible_including_figure_bytes(registry, tmp_path):
    a = builder.build_report("quick", tmp_path / "a", seed=1)
    b = builder.build_report("quick", tmp_path / "b", seed=1)
    ra, rb = (json.loads((p / "results.json").read_text()) for p in (a, b))
    assert [c["checks"][0]["measured"] for c in ra["claims"]] == [c["checks"][0]["measured"] for c in rb["claims"]]
    assert (a / "figures/dummy.png").read_bytes() == (b / "figures/dummy.png").read_bytes()


def test_existing_report_is_not_overwritten_without_force(registry, tmp_path):
    out = tmp_path / "rep"
    builder.build_report("quick", out, claims=["good"])
    marker = out / "results.json"
    before = marker.read_text()
    with pytest.raises(FileExistsError, match="--force"):
        builder.build_report("quick", out, claims=["good"])
    assert marker.read_text() == before
    builder.build_report("quick", out, claims=["good", "bad"], force=True)
    assert len(json.loads(marker.read_text())["claims"]) == 2


def test_interrupted_run_leaves_previous_report_intact(registry, monkeypatch, tmp_path):
    out = tmp_path / "rep"
    builder.build_report("quick", out, claims=["good"])
    before = (out / "REPORT.md").read_text()
    stop = Claim("good", "p", "s", (Check("exact", f"{T}:interrupting_check", "d"),))
    monkeypatch.setattr(builder, "get_claim", lambda cid: stop)
    with pytest.raises(KeyboardInterrupt):
        builder.build_report("quick", out, claims=["good"], force=True)
    assert (out / "REPORT.md").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no temporary folder left behind


def test_bad_tier_and_claim_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="tier"):
        builder.build_report("huge", tmp_path / "x")
    with pytest.raises(ValueError, match="claim"):
        builder.build_report("quick", tmp_path / "x", claims=["no-such-claim"])
    with pytest.raises(ValueError, match="tier"):
        CheckContext(tier="slow")


def test_context_rngs_are_per_name_and_reproducible():
    a, b = CheckContext(seed=5), CheckContext(seed=5)
    assert a.rng("x").random() == b.rng("x").random()
    assert a.rng("x").random() != a.rng("y").random()
    assert CheckContext(seed=6).rng("x").random() != a.rng("x").random()


def test_cli_check_list_and_unknown_claim(capsys):
    assert cli.main(["check", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(cid in listed for cid in CLAIM_IDS)
    assert cli.main(["check", "no-such-claim"]) == 2
    assert "claim must be one of" in capsys.readouterr().err


def test_cli_report_refuses_existing_folder(tmp_path, capsys):
    out = tmp_path / "rep"
    out.mkdir()
    assert cli.main(["report", "--out", str(out), "--quiet", "--claims", "exp-robustness"]) == 2
    assert "--force" in capsys.readouterr().err


def test_load_kernel_formats_and_errors(tmp_path):
    kernel = np.array([[0.7, 0.3], [0.25, 0.75]])
    np.save(tmp_path / "k.npy", kernel)
    np.savetxt(tmp_path / "k.csv", kernel, delimiter=",")
    (tmp_path / "k.json").write_text(json.dumps({"kernel": kernel.tolist()}))
    for name in ("k.npy", "k.csv", "k.json"):
        np.testing.assert_allclose(cli.load_kernel(tmp_path / name), kernel)
    (tmp_path / "bad.csv").write_text("0.5,0.6\n0.5,0.5\n")
    with pytest.raises(ValueError, match="row-stochastic"):
        cli.load_kernel(tmp_path / "bad.csv")
    (tmp_path / "k.txt").write_text("0.5 0.5\n0.5 0.5\n")
    with pytest.raises(ValueError, match="npy, .csv or .json"):
        cli.load_kernel(tmp_path / "k.txt")
    with pytest.raises(ValueError, match="does not exist"):
        cli.load_kernel(tmp_path / "missing.npy")


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


def test_every_registered_check_resolves_to_a_function():
    # No claim may silently lose a check: each "module:function" of the registry must import.
    missing = [check.function for claim in CLAIMS for check in claim.checks if not callable(check.resolve())]
    assert not missing


def test_a_check_that_cannot_be_imported_is_a_failed_check(registry, tmp_path, monkeypatch):
    ghost = Claim("good", "p", "s", (Check("exact", f"{T}:no_such_function", "d"),))
    monkeypatch.setattr(builder, "get_claim", lambda cid: ghost)
    out = builder.build_report("quick", tmp_path / "rep", claims=["good"])
    claim = json.loads((out / "results.json").read_text())["claims"][0]
    assert claim["verdict"] == "fail" and "no_such_function" in claim["checks"][0]["error"]
