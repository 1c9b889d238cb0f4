"""Run the claim registry and write the verification report (REPORT.md, report.html, figures/, results.json).

The report is built in a temporary sibling folder and moved into place only when complete, so an existing report
is never half-overwritten: without ``force`` an existing output folder is refused, and an interrupted run
(Ctrl-C) leaves the previous report as it was. Layout is :mod:`reports.render`'s; this module runs the checks and
decides each claim's verdict.

Whose claim it is matters: a claim of ours (``Claim.owner`` "ours", the ``ext-*`` claims) whose deciding checks
fail reads ``refuted`` (a finding with its instance), never ``fail``; only a claim of the paper can read ``fail``.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as _dt
import json
import multiprocessing
import os
import platform
import shutil
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Iterable

import matplotlib
import torch
from tqdm.auto import tqdm

from bma_verify.reports.catalog import package_version
from bma_verify.reports.core import (REFUTED, TIERS, CheckContext, CheckOutcome, Finding, finding_status, jsonable,
                                     settle)
from bma_verify.reports.executor import children_ignore_interrupts, prepare_worker, validate_executor
from bma_verify.reports.float_path import cpu_identity, in_force
from bma_verify.reports.io import replace_dir, write_text_atomic
from bma_verify.reports.protocol import protocol_record
from bma_verify.reports.registry import CLAIMS, Check, Claim, get_claim
from bma_verify.reports.regression import REFERENCE_DIR
from bma_verify.reports.render import render_html, render_markdown


def environment() -> dict:
    """Versions and hardware that produced a report."""
    env = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
           "cpu_count": os.cpu_count(), "cpu": cpu_identity()}
    for package in ("bma-verify", "numpy", "scipy", "sympy", "torch", "matplotlib", "hypothesis"):
        try:
            env[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            env[package] = None
    env["torch_threads"] = torch.get_num_threads()
    env["cuda"] = torch.cuda.is_available()
    env["gpu"] = torch.cuda.get_device_name(0) if env["cuda"] else None
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS")
    env |= in_force()
    return env


def claim_verdict(check_verdicts: list[str], owner: str = "paper") -> str:
    """The verdict of a claim from the settled verdicts of its deciding (as-stated and reproduction) checks.

    ``fail`` if any check fails (a failure stands whatever else happened), read ``refuted`` for a claim of ours
    (``owner`` "ours": our conjecture is refuted, the paper is not failed); otherwise ``error`` if any check raised
    (the claim was not verified); ``pass`` only if there are checks and all pass; else ``inconclusive``.
    """
    if "fail" in check_verdicts:
        return REFUTED if owner == "ours" else "fail"
    if "error" in check_verdicts:
        return "error"
    if check_verdicts and all(v == "pass" for v in check_verdicts):
        return "pass"
    return "inconclusive"


def _error_record(check: Check, seconds: float, error: str) -> dict:
    """The entry of a check that raised: an error is not a verdict about the claim."""
    return {"kind": check.kind, "function": check.function, "description": check.description,
            "reading": check.reading, "cites": check.cites, "measured": {}, "threshold": None,
            "verdict": "error", "check_verdict": None, "reason": f"the check raised: {error}",
            "seconds": round(seconds, 3), "summary": f"the check raised an error, so it verified nothing: {error}",
            "control": None, "positive_control": None, "converged": None, "seeds": None, "assumptions": [],
            "findings": [], "holds_instead": [], "derivation": [],
            "tables": [], "figures": [], "instance": None, "tolerances": {}, "error": error}


def outcome_entry(check: Check, outcome: CheckOutcome | None, seconds: float, error: str | None) -> dict:
    """One check's entry of results.json: the outcome with its settled verdict, reading and control."""
    if outcome is None:
        return _error_record(check, seconds, error)
    verdict, reason = settle(outcome)
    findings = [f.as_dict() for f in outcome.findings]
    if check.reading == "stronger" and not findings:
        findings = [Finding(check.description, finding_status(verdict), outcome.instance,
                            outcome.summary).as_dict()]
    return {
        "kind": check.kind, "function": check.function, "description": check.description,
        "reading": check.reading, "cites": check.cites,
        "measured": jsonable(outcome.measured), "threshold": jsonable(outcome.threshold),
        "verdict": verdict, "check_verdict": outcome.verdict, "reason": reason, "seconds": round(seconds, 3),
        "summary": outcome.summary,
        "control": None if outcome.control is None else outcome.control.as_dict(),
        "positive_control": None if outcome.positive_control is None else outcome.positive_control.as_dict(),
        "converged": outcome.converged, "seeds": jsonable(outcome.seeds), "assumptions": list(outcome.assumptions),
        "findings": findings, "holds_instead": [repair.as_dict() for repair in outcome.holds_instead],
        "derivation": [list(step) for step in outcome.derivation],
        "tables": [{"title": t.title, "columns": t.columns, "rows": jsonable(t.rows)} for t in outcome.tables],
        "figures": list(outcome.figures), "instance": jsonable(outcome.instance),
        "tolerances": jsonable(outcome.tolerances), "error": None,
    }


def _cited(check: Check) -> Check:
    """The check of another claim whose evidence ``check`` cites (``cites = "claim-id:kind"``)."""
    claim_id, _, kind = check.cites.partition(":")
    for other in get_claim(claim_id).checks:
        if other.kind == kind and other.cites is None:
            return other
    raise ValueError(f"{check.function}: cites {check.cites!r}, which names no check")


def _source(check: Check) -> Check:
    """The check that actually runs for ``check``: itself, or the one it cites."""
    return _cited(check) if check.cites else check


def _run_one(check: Check, ctx: CheckContext) -> tuple[CheckOutcome | None, float, str | None]:
    """Run a check once per report (a cited check is not run again): (outcome, seconds, error)."""
    done = ctx.cache.setdefault(("builder", "outcomes"), {})
    if check.function in done:  # its time is reported where it ran (a citing record shows 0 s)
        return done[check.function]
    start = time.perf_counter()
    try:
        outcome = check.run(ctx)
        if not isinstance(outcome, CheckOutcome):
            raise TypeError(f"{check.function} returned {type(outcome).__name__}, not CheckOutcome")
        error = None
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded in the report as an error, never a verdict
        outcome, error = None, "".join(traceback.format_exception_only(type(exc), exc)).strip()
    done[check.function] = (outcome, time.perf_counter() - start, error)
    return outcome, done[check.function][1], error


def _expected_seconds() -> dict[str, float]:
    """Seconds each check took in the committed reference report (quick tier): the order in which ``--jobs``
    hands out work, longest first (a check it lacks counts as 1 s)."""
    try:
        reference = json.loads((REFERENCE_DIR / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    return {c["function"]: float(c.get("seconds") or 0.0) for claim in reference["claims"] for c in claim["checks"]}


def check_groups(work: list[tuple[Claim, Check]]) -> list[list[Check]]:
    """The checks that run in one worker under ``--jobs``: one group per claim, except that checks declaring the
    same ``shares`` (a cached run or sweep reused across claims) are moved into one group. Cited checks are left
    out (their evidence is the cited check's); each function appears once. Longest expected group first."""
    groups: dict[str, list[Check]] = {}
    seen = set()
    for claim, check in work:
        source = _source(check)
        if source.function in seen:
            continue
        seen.add(source.function)
        groups.setdefault(source.shares or f"claim:{claim.id}", []).append(source)
    cost = _expected_seconds()
    return sorted(groups.values(), key=lambda g: -sum(cost.get(c.function, 1.0) for c in g))


def _run_group(checks: list[Check], ctx_fields: dict, threads: int) -> dict:
    """Worker process of ``--jobs``: run ``checks`` in order with a context of their own (sweeps run serially
    here) and ``threads`` torch threads; returns ``{function: (outcome, seconds, error)}``."""
    matplotlib.use("Agg")
    torch.set_num_threads(threads)
    ctx = CheckContext(**ctx_fields)
    for check in checks:
        _run_one(check, ctx)
    return ctx.cache[("builder", "outcomes")]


def _run_parallel(work: list[tuple[Claim, Check]], ctx: CheckContext, bar, on_results=lambda: None) -> None:
    """Run the checks of ``work`` in ``ctx.jobs`` worker processes (spawned: a fork would inherit torch's thread
    pool) and store their outcomes where :func:`_run_one` finds them, calling ``on_results()`` as each worker's
    group comes back. The numbers are those of a serial run: every check draws from its own seeded generators, and
    each worker uses the parent's torch thread count."""
    groups = check_groups(work)
    fields = dict(tier=ctx.tier, seed=ctx.seed, figures_dir=ctx.figures_dir, quiet=True, options=ctx.options,
                  device=ctx.device, jobs=1, backend="joblib")
    done = ctx.cache.setdefault(("builder", "outcomes"), {})
    n_uses = {}
    for _, check in work:
        source = _source(check)
        n_uses[source.function] = n_uses.get(source.function, 0) + 1
    # looked up on the module at call time, so a test can run the workers in threads of this process
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=min(ctx.jobs, len(groups)) or 1,
                                                  mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=prepare_worker)
    try:
        with children_ignore_interrupts():  # Ctrl-C reaches the whole group; this process stops the workers
            futures = {pool.submit(_run_group, g, fields, torch.get_num_threads()): g for g in groups}
        for future in concurrent.futures.as_completed(futures):
            results = future.result()
            done.update(results)
            bar.update(sum(n_uses[f] for f in results))
            on_results()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def claim_record(claim: Claim, records: list[dict], tier: str = "quick") -> dict:
    """A claim's entry of results.json: verdict from its deciding checks (``refuted`` in place of ``fail`` for a
    claim of ours, see ``owner``), findings from all of them, and a trained claim's pre-registered protocol at
    ``tier`` (``reports.protocol.protocol_record``)."""
    deciding = [r for r in records if r["reading"] != "stronger"]
    verdict = claim_verdict([r["verdict"] for r in deciding], claim.owner)
    reasons = sorted({r["reason"] for r in deciding if r["verdict"] in ("inconclusive", "error") and r["reason"]})
    assumptions = list(dict.fromkeys(a for r in deciding if r["reading"] == "reproduction" for a in r["assumptions"]))
    findings = [{**f, "check": f"{r['kind']}:{r['function']}"} for r in records for f in r["findings"]]
    return {"id": claim.id, "section": claim.section, "owner": claim.owner, "paper": claim.paper,
            "statement": claim.statement, "verdict": verdict, "reasons": reasons, "assumptions": assumptions,
            "reproduction": any(r["reading"] == "reproduction" for r in deciding), "findings": findings,
            "protocol": protocol_record(claim.id, tier), "checks": records}


def check_entry(check: Check, ctx: CheckContext) -> dict:
    """The results.json entry of ``check``, running it (or the check it cites) unless it has run already."""
    source = _source(check)
    outcome, seconds, error = _run_one(source, ctx)
    record = outcome_entry(check, outcome, seconds, error)
    if check.cites:  # one piece of evidence is shown once: here only its verdict and a pointer
        record.update(function=source.function, measured={}, tolerances={}, tables=[], figures=[],
                      derivation=[], instance=None, seconds=0.0,
                      summary=f"The same evidence as {check.cites.replace(':', ' (')}), shown there; "
                              f"verdict {record['verdict']}.")
    return record


def run_claims(claims: Iterable[Claim], ctx: CheckContext, *, progress: bool = False,
               kinds: Iterable[str] | None = None) -> list[dict]:
    """Run every check of ``claims`` (of the given ``kinds``, default all); one dict per claim in the
    results.json schema (see :func:`claim_record` and :func:`outcome_entry`).

    A check that raises is recorded with the verdict ``error`` and its message, never dropped and never read as a
    verdict about the claim. A check that cites another claim's check shows that check's evidence without
    running it twice. With ``ctx.jobs`` > 1 (joblib backend) the checks run in that many worker processes, a
    claim's checks (and checks sharing a cached computation, ``Check.shares``) in one worker, with sweeps serial
    inside each; the numbers are those of a serial run. With the Dask backend checks run here and their sweeps go
    to the cluster. ``progress``: a bar on a terminal, else one line per finished claim on stderr
    (:class:`ClaimProgressLines`).
    """
    matplotlib.use("Agg")
    claims = list(claims)
    kinds = None if kinds is None else set(kinds)
    # every registered check runs: one whose function cannot be imported is an error, not a missing row
    work = [(claim, check) for claim in claims for check in claim.checks if kinds is None or check.kind in kinds]
    bar = tqdm(total=len(work), disable=None if progress else True, unit="check")
    lines = ClaimProgressLines(len(claims), enabled=progress and not sys.stderr.isatty())
    done = ctx.cache.setdefault(("builder", "outcomes"), {})
    checks = {claim.id: [check for c, check in work if c is claim] for claim in claims}
    records: dict[str, dict] = {}

    def record_finished_claims() -> None:  # a claim is finished once every check it shows has run, here or there
        for claim in claims:
            if claim.id not in records and all(_source(c).function in done for c in checks[claim.id]):
                records[claim.id] = claim_record(claim, [check_entry(c, ctx) for c in checks[claim.id]], ctx.tier)
                lines.finished(records[claim.id])

    parallel = ctx.jobs > 1 and ctx.backend == "joblib" and len(work) > 1
    try:
        if parallel:  # checks in worker processes; the loop below finds them done
            bar.set_description(f"{ctx.jobs} workers")
            _run_parallel(work, ctx, bar, on_results=record_finished_claims)
        for claim, check in work:
            if not parallel:
                bar.set_description(f"{claim.id} [{check.kind}]")
                _run_one(_source(check), ctx)  # a check cited by an earlier one has run already
                bar.update()
            record_finished_claims()
        record_finished_claims()  # a claim none of whose checks is of the given kinds
    finally:
        bar.close()
    return [records[c.id] for c in claims]


class ClaimProgressLines:
    """Progress where no bar shows (stderr is a log file, a pipe or CI's log): one line on stderr per finished
    claim, ``[3/24 claims, 41 s] lemma3-strict-dpi: pass``, so that a run of tens of minutes is seen to move."""

    def __init__(self, total: int, *, enabled: bool):
        self.total, self.enabled = total, enabled
        self.count, self.start = 0, time.perf_counter()

    def finished(self, record: dict) -> None:
        self.count += 1
        if self.enabled:
            print(f"[{self.count}/{self.total} claims, {time.perf_counter() - self.start:.0f} s] {record['id']}: "
                  f"{record['verdict']}", file=sys.stderr, flush=True)


def _report_context(tier: str, out: Path, *, seed, claims, force, quiet, jobs, backend, scheduler, threads,
                    device) -> tuple[tuple[Claim, ...], CheckContext]:
    """Check every argument of :func:`build_report` before any check runs: the selected claims and the context."""
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    selected = CLAIMS if claims is None else tuple(get_claim(c) for c in claims)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it")
    # progress bars only on a terminal: a log file or CI gets none (the training loops inside checks too)
    ctx = CheckContext(tier=tier, seed=seed, quiet=quiet or not sys.stderr.isatty(), jobs=jobs, backend=backend,
                       scheduler=scheduler, device=device)
    validate_executor(jobs=jobs, backend=backend, scheduler=scheduler)
    return selected, ctx


def _write_report(folder: Path, results: dict) -> None:
    """results.json, REPORT.md and report.html (figures embedded from ``folder/figures``) in ``folder``."""
    write_text_atomic(folder / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_text_atomic(folder / "REPORT.md", render_markdown(results))
    write_text_atomic(folder / "report.html", render_html(results, figures_dir=folder / "figures"))


def build_report(tier: str, out_dir, *, seed: int = 0, claims: Iterable[str] | None = None, force: bool = False,
                 quiet: bool = True, jobs: int = 1, backend: str = "joblib", scheduler: str | None = None,
                 threads: int = 1, device: str = "cpu") -> Path:
    """Build the verification report for ``tier`` into ``out_dir``; returns the folder.

    ``threads`` torch CPU threads are used for the whole report (and recorded in results.json): training is
    chaotic in floating-point noise, so the same seed gives the same numbers only with the same thread count, and
    the command and this function default to the same value (1). ``device`` ("cpu" or "cuda", recorded too) is
    where the paper-experiment presets train (exp-fig2 ... exp-robustness, as ``bma-verify check --device``); every
    other check runs on the CPU.

    Every argument is checked before any check runs.

    Raises
    ------
    ValueError
        for an unknown tier or claim id, a negative seed, bad executor settings or an unreachable Dask scheduler.
    FileExistsError
        if ``out_dir`` exists and ``force`` is False.
    """
    out = Path(out_dir)
    selected, ctx = _report_context(tier, out, seed=seed, claims=claims, force=force, quiet=quiet, jobs=jobs,
                                    backend=backend, scheduler=scheduler, threads=threads, device=device)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        started = _dt.datetime.now(_dt.timezone.utc)
        t0 = time.perf_counter()
        ctx.figures_dir = tmp / "figures"
        with torch_threads(threads):
            claim_records = run_claims(selected, ctx, progress=not quiet)
            env = environment()
        results = {
            "tier": tier, "seed": seed, "package_version": package_version(),
            "units": "nats (natural logs) for every information quantity and loss",
            "started": started.isoformat(timespec="seconds"), "seconds": round(time.perf_counter() - t0, 3),
            "environment": env,
            "config": {"tier": tier, "seed": seed, "claims": [c.id for c in selected], "jobs": jobs,
                       "backend": backend, "threads": threads, "device": device, "command": " ".join(sys.argv)},
            "claims": claim_records,
        }
        _write_report(tmp, results)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch CPU threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
