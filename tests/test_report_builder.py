"""Building a report: files and schema, reproducibility, --force, interruption, devices, --jobs workers."""
import concurrent.futures
import inspect
import json
import re

import pytest
import torch

import bma_verify.reports.builder as builder
from bma_verify.reports import cli
from bma_verify.reports.builder import run_claims
from bma_verify.reports.core import CheckContext
from bma_verify.reports.registry import CLAIMS, Check, Claim
from tests.report_stand_ins import (beyond_registry, device_recording_check, device_recording_check_2,  # noqa: F401
                                    interrupting_check, registry)  # (registry and beyond_registry are fixtures)


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
                                    "rejected": True, "power": None, "margin": None}
    assert results["environment"]["torch_threads"] == 1 and results["config"]["threads"] == 1
    assert "figures/dummy.png" in (out / "REPORT.md").read_text() and (out / "figures" / "dummy.png").exists()


def test_a_refuted_conjecture_of_ours_is_a_finding_and_the_papers_claims_still_fail(beyond_registry, tmp_path):
    # reference: docs/claims.md, "Whose claim" — the stand-in ext-* claim fails its check: it reads refuted with its
    # instance, while the paper's claim in "Beyond the paper" (as footnote 1 is) still reads fail
    out = builder.build_report("quick", tmp_path / "rep")
    by_id = {c["id"]: c for c in json.loads((out / "results.json").read_text())["claims"]}
    ours, paper = by_id["ext-stand-in"], by_id["footnote-stand-in"]
    assert (ours["owner"], ours["section"], ours["verdict"]) == ("ours", "beyond", "refuted")
    assert ours["checks"][1]["verdict"] == "fail"  # a check keeps what its rule said
    assert ours["checks"][1]["instance"] == {"kernel": [[0.5, 0.5], [0.5, 0.5]]}
    assert (paper["owner"], paper["section"], paper["verdict"]) == ("paper", "beyond", "fail")
    assert by_id["good"]["owner"] == "paper" and by_id["good"]["verdict"] == "pass"


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


def test_cli_report_refuses_existing_folder(tmp_path, capsys):
    out = tmp_path / "rep"
    out.mkdir()
    assert cli.main(["report", "--out", str(out), "--quiet", "--claims", "exp-robustness"]) == 2
    assert "--force" in capsys.readouterr().err


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


class _InProcess(concurrent.futures.ThreadPoolExecutor):
    """--jobs' process pool, run in threads of this process (so that a monkeypatched CUDA holds in them)."""

    def __init__(self, max_workers, mp_context=None, initializer=None):
        super().__init__(max_workers)  # no initializer: it prepares a worker process (signals), not a thread


def test_report_device_reaches_every_worker_and_is_recorded(tmp_path, monkeypatch):
    # reference: the device of the context each check receives, serially and through --jobs' worker groups (the
    # CUDA stand-in reports torch.cuda.is_available True and the stand-in checks train nothing). Without CUDA the
    # device is refused before any check runs, by the function and by the command.
    seen = tmp_path / "devices.txt"
    monkeypatch.setenv("BMA_TEST_DEVICES", str(seen))
    claims = (Claim("dev1", "paper", "s", (Check("exact", device_recording_check, "d"),)),
              Claim("dev2", "paper", "s", (Check("exact", device_recording_check_2, "d"),)))
    monkeypatch.setattr(builder, "CLAIMS", claims)
    monkeypatch.setattr(builder, "get_claim", {c.id: c for c in claims}.__getitem__)
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)
        m.setattr(torch.cuda, "get_device_name", lambda index: "stand-in")  # results.json's environment
        m.setattr(concurrent.futures, "ProcessPoolExecutor", _InProcess)
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


def _cache_keys(check: Check, tmp_path) -> set:
    """The cache keys ``check`` uses: trained runs read from its source (which preset's runs it asks for), every
    other check run alone with a recording cache."""
    if check.kind == "model":
        names = set(re.findall(r'_runs\(ctx, "(\w+)"', inspect.getsource(check.run)))
        return {("model-run", n) for n in names}
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    ctx.cache = _RecordingCache()
    check.run(ctx)
    return ctx.cache.touched


@pytest.mark.slow
def test_every_cache_shared_across_claims_is_declared(tmp_path):
    # a cache key used by checks of two claims must come with one Check.shares, or --jobs would compute it twice
    # (or in the wrong worker)
    users: dict = {}
    for claim in CLAIMS:
        for check in claim.checks:
            if not check.cites:
                for key in _cache_keys(check, tmp_path):
                    users.setdefault(key, []).append((claim.id, check))
    for key, who in users.items():
        if len({claim_id for claim_id, _ in who}) > 1:
            shares = {check.shares for _, check in who}
            assert len(shares) == 1 and None not in shares, (key, [(c, k.function, k.shares) for c, k in who])
