"""The report machinery: verdict aggregation, atomic writes, --force, interruption, CLI, executor backends."""
import json
import os

import numpy as np
import pytest

import bma_verify.reports.builder as builder
from bma_verify.reports import cli
from bma_verify.reports.core import CheckContext, CheckOutcome, Control, Finding, settle, verdict_from_interval
from bma_verify.reports.executor import map_tasks, spawn_seeds
from bma_verify.reports.registry import CLAIM_IDS, CLAIMS, Check, Claim


def passing_check(ctx):
    path = ctx.figure_path("dummy.png")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot(ctx.rng("dummy").random(5))
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    value = float(ctx.rng("dummy").random())
    planted = 1.5  # a value above the threshold: the rule "value <= 1" must reject it
    return CheckOutcome("pass" if value <= 1.0 else "fail", {"value": value}, threshold=1.0, summary="fine",
                        figures=["dummy.png"], derivation=[("step", r"\frac{a}{b}")],
                        control=Control("a planted value above 1", {"value": planted}, rejected=not planted <= 1.0))


def failing_check(ctx):
    return CheckOutcome("fail", {"ratio": 1.5}, threshold=1.0, summary="ratio above one",
                        instance={"kernel": [[0.5, 0.5], [0.5, 0.5]]})


def uncontrolled_check(ctx):
    return CheckOutcome("pass", {"value": 0.5}, threshold=1.0, summary="passes, but nothing false was tried")


def undiscriminating_check(ctx):
    return CheckOutcome("pass", {"value": 0.5}, threshold=1.0, summary="passes, and so does its control",
                        control=Control("a planted value the rule should reject", {"value": 0.9}, rejected=False))


def unconverged_check(ctx):
    return CheckOutcome("pass", {"gap": 0.01}, summary="a trained run below the threshold, not converged",
                        control=Control("BMA on half the examples", {"gap": 0.2}, rejected=True), converged=False)


def refuted_stronger_check(ctx):
    return CheckOutcome("fail", {"ratio": 1.2}, summary="our sharper bound fails", instance={"kernel": [[1.0]]},
                        control=Control("a bound below the ratio", {"ratio": 1.2}, rejected=True))


def reproduction_fail_check(ctx):
    return CheckOutcome("fail", {"gap": 0.7}, summary="the trend goes the other way under R1",
                        control=Control("BMA itself", {"gap": 0.0}, rejected=True),
                        assumptions=["reading R1: clipped offsets", "batch 256"], converged=True)


def crashing_check(ctx):
    raise RuntimeError("boom")


def device_recording_check(ctx):
    """Appends the context's device to the file $BMA_TEST_DEVICES (test_report_device_reaches_every_worker...;
    a file, because the registry imports this module by name, which may not be the module pytest runs)."""
    with open(os.environ["BMA_TEST_DEVICES"], "a") as f:
        f.write(ctx.device + "\n")
    return passing_check(ctx)


def device_recording_check_2(ctx):  # a second function: --jobs runs each function once
    return device_recording_check(ctx)


def interrupting_check(ctx):
    raise KeyboardInterrupt


GOOD = Claim("good", "paper", "statement", (Check("exact", passing_check, "d"),))
BAD = Claim("bad", "paper", "statement", (Check("exact", passing_check, "d"),
                                          Check("monte-carlo", failing_check, "d")))
CRASH = Claim("crash", "paper", "statement", (Check("exact", crashing_check, "d"),))


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
    # SPEC §4.2 (beyond the paper): the DAG extensions of ours and the paper's footnote 1
    beyond_ids = {"ext-dag-posterior", "ext-dag-lemma4-sets", "ext-dag-lemma3-sets", "ext-dag-thm3-sets",
                  "ext-dag-construction", "ext-dag-families", "ext-dag-training",
                  "footnote1-selective-induction"}
    assert set(CLAIM_IDS) == spec_ids | beyond_ids and len(CLAIM_IDS) == len(spec_ids | beyond_ids)
    assert {c.id for c in CLAIMS if c.section == "beyond"} == beyond_ids
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
    # a crash is an error with its message, never a verdict and never a silent omission
    assert by_id["crash"]["verdict"] == "error" and "boom" in by_id["crash"]["checks"][0]["error"]
    for check in by_id["good"]["checks"]:
        assert set(check) >= {"kind", "measured", "threshold", "verdict", "seconds", "reading", "control"}
        assert check["control"] == {"description": "a planted value above 1", "measured": {"value": 1.5},
                                    "rejected": True}
    assert results["environment"]["torch_threads"] == 1 and results["config"]["threads"] == 1
    md, page = (out / "REPORT.md").read_text(), (out / "report.html").read_text()
    assert "figures/dummy.png" in md and "figures/dummy.png" in page and (out / "figures" / "dummy.png").exists()
    assert "FAIL" in md and "\\frac{a}{b}" in md and "http" not in page  # opens offline: no external resources
    # one self-contained page: the figure is embedded, the math rendered (no raw LaTeX left)
    import base64

    assert base64.b64encode(builder.display_png(out / "figures" / "dummy.png")).decode() in page
    assert "<mfrac>" in page and "\\frac" not in page
    assert "<nav>" in page and "id='good'" in page


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
    stop = Claim("good", "p", "s", (Check("exact", interrupting_check, "d"),))
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


def test_every_registered_check_is_a_function_of_its_claim_module():
    # One claim, one place: each check's function lives in the claim's own module (or is cited from another claim)
    for claim in CLAIMS:
        for check in claim.checks:
            assert callable(check.run)
            home = check.run.__module__.rsplit(".", 1)[-1]
            assert check.cites or home == claim.id.replace("-", "_"), (claim.id, check.function)


def test_a_check_that_is_not_a_function_is_refused():
    with pytest.raises(ValueError, match="run must be a function"):
        Check("exact", "module:function", "d")


def _run(*checks, claim_id="c"):
    import tempfile
    from pathlib import Path

    return builder.run_claims([Claim(claim_id, "p", "s", tuple(checks))],
                              CheckContext(figures_dir=Path(tempfile.mkdtemp())))[0]


def test_a_pass_needs_a_rejected_control():
    # reference: SPEC §4.1 — no control, or a control that passes too, cannot read pass
    assert _run(Check("exact", passing_check, "d"))["verdict"] == "pass"
    no_control = _run(Check("exact", uncontrolled_check, "d"))
    assert no_control["verdict"] == "inconclusive" and no_control["checks"][0]["reason"] == "no negative control"
    accepted = _run(Check("exact", undiscriminating_check, "d"))
    assert accepted["verdict"] == "inconclusive"
    assert accepted["checks"][0]["reason"].startswith("not discriminating")
    assert accepted["checks"][0]["check_verdict"] == "pass"  # what the check said before it was settled


def test_an_unconverged_run_never_passes():
    claim = _run(Check("model", unconverged_check, "d", reading="reproduction"))
    assert claim["verdict"] == "inconclusive" and claim["checks"][0]["reason"] == "not converged"


def test_settle_keeps_fail_and_inconclusive():
    control = Control("x", {}, rejected=False)
    assert settle(CheckOutcome("fail", {}, control=control)) == ("fail", "")
    assert settle(CheckOutcome("inconclusive", {}, reason="straddles")) == ("inconclusive", "straddles")
    with pytest.raises(ValueError, match="status"):
        Finding("s", "true")


def test_a_stronger_reading_gives_a_finding_and_never_fails_the_claim():
    claim = _run(Check("exact", passing_check, "as stated"),
                 Check("exact", refuted_stronger_check, "our sharper bound", reading="stronger"))
    assert claim["verdict"] == "pass"
    assert claim["findings"] == [{"statement": "our sharper bound", "status": "refuted",
                                  "instance": {"kernel": [[1.0]]}, "evidence": "our sharper bound fails",
                                  "check": f"exact:{refuted_stronger_check.__module__}:refuted_stronger_check"}]
    md = builder.render_markdown({"tier": "quick", "seed": 0, "package_version": "x", "started": "t",
                                  "seconds": 0.0, "environment": builder.environment(), "claims": [claim]})
    assert "| PASS | finding: our sharper bound (refuted, 1 instance) |" in md


def test_a_failed_reproduction_names_its_reading_and_is_not_a_bare_fail():
    claim = _run(Check("model", reproduction_fail_check, "d", reading="reproduction"))
    assert claim["verdict"] == "fail" and claim["assumptions"] == ["reading R1: clipped offsets", "batch 256"]
    assert builder.verdict_label(claim) == "NOT REPRODUCED (reading R1: clipped offsets)"


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


def test_report_device_reaches_every_worker_and_is_recorded(tmp_path, monkeypatch):
    # reference: the device of the context each check receives, serially and through --jobs' worker groups (run
    # here in threads of this process, so that the CUDA stand-in holds in them too: torch.cuda.is_available is
    # reported True and the stand-in checks train nothing). Without CUDA the device is refused before any check
    # runs, by the function and by the command.
    import concurrent.futures

    import torch

    class InProcess(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers, mp_context=None):
            super().__init__(max_workers)

    seen = tmp_path / "devices.txt"
    monkeypatch.setenv("BMA_TEST_DEVICES", str(seen))
    claims = (Claim("dev1", "paper", "s", (Check("exact", device_recording_check, "d"),)),
              Claim("dev2", "paper", "s", (Check("exact", device_recording_check_2, "d"),)))
    monkeypatch.setattr(builder, "CLAIMS", claims)
    monkeypatch.setattr(builder, "get_claim", {c.id: c for c in claims}.__getitem__)
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)
        m.setattr(torch.cuda, "get_device_name", lambda index: "stand-in")  # results.json's environment
        m.setattr(concurrent.futures, "ProcessPoolExecutor", InProcess)
        out = builder.build_report("quick", tmp_path / "serial", device="cuda")
        assert json.loads((out / "results.json").read_text())["config"]["device"] == "cuda"
        builder.build_report("quick", tmp_path / "jobs", jobs=2, device="cuda")
        builder.build_report("quick", tmp_path / "default", jobs=2)
    assert seen.read_text().split() == ["cuda"] * 4 + ["cpu"] * 2
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            builder.build_report("quick", tmp_path / "refused", device="cuda")
        assert cli.main(["report", "--out", str(tmp_path / "refused"), "--device", "cuda", "--quiet"]) == 2
        assert not (tmp_path / "refused").exists()


def test_bad_arguments_are_refused_before_any_check_runs(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(builder, "run_claims", lambda *a, **k: ran.append(1))
    with pytest.raises(ValueError, match="seed"):
        builder.build_report("quick", tmp_path / "x", seed=-1)
    with pytest.raises(ValueError, match="threads"):
        builder.build_report("quick", tmp_path / "x", threads=0)
    # an unreachable Dask scheduler stops the command instead of becoming a verdict
    with pytest.raises(ValueError, match="cannot be reached"):
        builder.build_report("quick", tmp_path / "x", backend="dask", scheduler="tcp://127.0.0.1:9", )
    assert cli.main(["check", "--seed", "-1", "--quiet"]) == 2
    assert "seed must be a non-negative integer" in capsys.readouterr().err
    assert not ran and not (tmp_path / "x").exists()


def test_cli_exit_status_counts_errors_apart():
    ok = {"verdict": "pass", "checks": [{"verdict": "pass"}]}
    err = {"verdict": "error", "checks": [{"verdict": "error"}]}
    bad = {"verdict": "fail", "checks": [{"verdict": "fail"}]}
    assert cli.exit_status([ok]) == 0 and cli.exit_status([ok, err]) == 3 and cli.exit_status([err, bad]) == 1


@pytest.mark.slow
def test_report_html_renders_in_a_headless_browser(registry, tmp_path):
    # Reference: what a real browser lays out (reports.browser_check); skipped where no chromium is installed.
    from bma_verify.reports import browser_check

    if browser_check.find_browser() is None:
        pytest.skip("no headless browser here (apt-get install chromium)")
    out = builder.build_report("quick", tmp_path / "rep", claims=["good"])
    seen = browser_check.inspect(out / "report.html")
    assert seen["images"] == 1 and seen["formulas"] == 1 and not browser_check.problems(seen), seen
    # negative control: raw LaTeX and an image that cannot load must both be reported
    page = (out / "report.html").read_text()
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace("<math", "<p>\\frac{a}{b}</p><math").replace("data:image/png;base64,",
                                                                            "data:image/png;base64,AAAA"))
    found = browser_check.problems(browser_check.inspect(bad))
    assert any("raw LaTeX" in f for f in found) and any("did not load" in f for f in found), found


# --- --jobs: checks in worker processes give the serial report's numbers ---------------------------------------

def test_a_report_with_two_workers_equals_the_serial_one(registry, tmp_path):
    # reference: the same report built serially (jobs=1); figures are written by the workers into the same folder
    serial = builder.build_report("quick", tmp_path / "serial", seed=3)
    parallel = builder.build_report("quick", tmp_path / "parallel", seed=3, jobs=2)
    rs, rp = (json.loads((p / "results.json").read_text()) for p in (serial, parallel))
    strip = ("seconds",)
    for cs, cp in zip(rs["claims"], rp["claims"], strict=True):
        assert cs["verdict"] == cp["verdict"], cs["id"]
        for a, b in zip(cs["checks"], cp["checks"], strict=True):
            assert {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}
    assert rp["config"]["jobs"] == 2 and [c["verdict"] for c in rp["claims"]] == ["pass", "fail", "error"]
    assert (serial / "figures/dummy.png").read_bytes() == (parallel / "figures/dummy.png").read_bytes()


def test_real_checks_in_two_workers_equal_a_serial_run(tmp_path):
    # reference: the serial run of the same checks in this process (symbolic and exact kinds of three claims)
    from bma_verify.reports.builder import run_claims

    chosen = [c for c in CLAIMS if c.id in ("prop1-invariance", "lemma4-loglik-gap", "ext-dag-posterior")]
    kinds = ("symbolic", "exact")
    serial = run_claims(chosen, CheckContext(tier="quick", seed=0, figures_dir=tmp_path / "s"), kinds=kinds)
    parallel = run_claims(chosen, CheckContext(tier="quick", seed=0, figures_dir=tmp_path / "p", jobs=2),
                          kinds=kinds)
    assert sum(len(c["checks"]) for c in serial) >= 5
    for cs, cp in zip(serial, parallel, strict=True):
        for a, b in zip(cs["checks"], cp["checks"], strict=True):
            assert (a["verdict"], a["measured"], a["control"]) == (b["verdict"], b["measured"], b["control"])


def test_check_groups_keep_a_claim_together_and_join_declared_shares():
    work = [(claim, check) for claim in CLAIMS for check in claim.checks]
    groups = builder.check_groups(work)
    functions = [c.function for g in groups for c in g]
    assert len(functions) == len(set(functions))  # each check runs once (cited ones are not run again)
    assert set(functions) == {c.function for _, c in work if not c.cites}
    where = {c.function: i for i, g in enumerate(groups) for c in g}
    for claim, check in work:
        if check.shares:
            assert {where[c.function] for _, c in work if c.shares == check.shares} == {where[check.function]}
    fig2 = {where[c.function] for _, c in work if c.function.endswith(("exp_fig2_attention", "exp_fig3_parameters"))}
    assert len(fig2) == 1


class _RecordingCache(dict):
    """ctx.cache that remembers every key a check reads or writes (the builder's own entries aside)."""

    def __init__(self):
        super().__init__()
        self.touched = set()

    def _note(self, key):
        if not (isinstance(key, tuple) and key and key[0] == "builder"):
            self.touched.add(key)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        self._note(key)
        super().__setitem__(key, value)

    def setdefault(self, key, default=None):
        self._note(key)
        return super().setdefault(key, default)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)


@pytest.mark.slow
def test_every_cache_shared_across_claims_is_declared(tmp_path):
    # each non-model check of the quick tier runs alone with a recording cache; a cache key used by checks of two
    # claims must come with one Check.shares, or --jobs would compute it twice (or in the wrong worker)
    import inspect
    import re

    users: dict = {}
    for claim in CLAIMS:
        for check in claim.checks:
            if check.cites:
                continue
            if check.kind == "model":  # trained runs: read which preset's runs the function asks for
                names = set(re.findall(r'_runs\(ctx, "(\w+)"', inspect.getsource(check.run)))
                keys = {("model-run", "fig2" if n == "fig3" else n) for n in names}
            else:
                ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
                ctx.cache = _RecordingCache()
                check.run(ctx)
                keys = ctx.cache.touched
            for key in keys:
                users.setdefault(key, []).append((claim.id, check))
    for key, who in users.items():
        if len({claim_id for claim_id, _ in who}) > 1:
            shares = {check.shares for _, check in who}
            assert len(shares) == 1 and None not in shares, (key, [(c, k.function, k.shares) for c, k in who])


def test_embedded_figures_keep_their_size_and_colours_closely(tmp_path):
    # reference: the full-colour PNG matplotlib wrote (a viridis heat map with text); the embedded copy has the
    # same pixels' dimensions, at most 256 colours, each pixel within a small distance of the original, and fewer bytes
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots(figsize=(4, 3))
    image = ax.imshow(np.random.default_rng(0).random((10, 12)), cmap="viridis")
    fig.colorbar(image, ax=ax, label="mass")
    ax.set_title("a heat map")
    path = tmp_path / "h.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    small = builder.display_png(path)
    original = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    copy = Image.open(io.BytesIO(small))
    assert copy.mode == "P" and len(copy.getcolors(256)) <= 256
    copy = np.asarray(copy.convert("RGB"), dtype=float)
    assert copy.shape == original.shape and len(small) < path.stat().st_size
    error = np.abs(copy - original).max(axis=-1)  # per pixel, 0-255 scale
    # measured on the reference figures: mean 0.03-0.4, at most 0.4% of pixels off by more than 20
    assert error.mean() < 1.0 and (error > 32).mean() < 0.01


def test_reference_html_stands_alone_under_2_mib():
    from bma_verify.reports.regression import REFERENCE_DIR

    page = REFERENCE_DIR / "report.html"
    assert page.stat().st_size < 2 * 1024 * 1024
    assert "src='figures/" not in page.read_text()  # every figure embedded
