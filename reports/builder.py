"""Run the claim registry and write the verification report (REPORT.md, report.html, figures/, results.json).

The report is built in a temporary sibling folder and moved into place only when complete, so an existing report
is never half-overwritten: without ``force`` an existing output folder is refused, and an interrupted run
(Ctrl-C) leaves the previous report as it was.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import html
import json
import os
import platform
import shutil
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Iterable

from tqdm.auto import tqdm

from bma_verify.reports.core import (TIERS, CheckContext, CheckOutcome, Finding, finding_status, jsonable, settle,
                          verdict_counts)
from bma_verify.reports.executor import validate_executor
from bma_verify.reports.registry import CLAIMS, Check, Claim, get_claim


def environment() -> dict:
    """Versions and hardware that produced a report."""
    env = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
           "cpu_count": os.cpu_count()}
    for package in ("bma-verify", "numpy", "scipy", "sympy", "torch", "matplotlib", "hypothesis"):
        try:
            env[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            env[package] = None
    try:
        import torch

        env["torch_threads"] = torch.get_num_threads()
        env["cuda"] = torch.cuda.is_available()
        env["gpu"] = torch.cuda.get_device_name(0) if env["cuda"] else None
    except ImportError:
        env["cuda"], env["gpu"], env["torch_threads"] = False, None, None
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS")
    env["ATEN_CPU_CAPABILITY"] = os.environ.get("ATEN_CPU_CAPABILITY")
    return env


def claim_verdict(check_verdicts: list[str]) -> str:
    """The verdict of a claim from the settled verdicts of its deciding (as-stated and reproduction) checks.

    ``fail`` if any check fails (a failure stands whatever else happened); otherwise ``error`` if any check raised
    (the claim was not verified); ``pass`` only if there are checks and all pass; else ``inconclusive``.
    """
    if "fail" in check_verdicts:
        return "fail"
    if "error" in check_verdicts:
        return "error"
    if check_verdicts and all(v == "pass" for v in check_verdicts):
        return "pass"
    return "inconclusive"


def _record(check: Check, outcome: CheckOutcome | None, seconds: float, error: str | None) -> dict:
    """One check's entry of results.json: the outcome with its settled verdict, reading and control."""
    if outcome is None:  # the check raised: an error is not a verdict about the claim
        return {"kind": check.kind, "function": check.function, "description": check.description,
                "reading": check.reading, "cites": check.cites, "measured": {}, "threshold": None,
                "verdict": "error", "check_verdict": None, "reason": f"the check raised: {error}",
                "seconds": round(seconds, 3), "summary": f"the check raised an error, so it verified nothing: {error}",
                "control": None, "converged": None, "assumptions": [], "findings": [], "derivation": [],
                "tables": [], "figures": [], "instance": None, "tolerances": {}, "error": error}
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
        "converged": outcome.converged, "assumptions": list(outcome.assumptions), "findings": findings,
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
    from bma_verify.reports.regression import REFERENCE_DIR

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
        source = _cited(check) if check.cites else check
        if source.function in seen:
            continue
        seen.add(source.function)
        groups.setdefault(source.shares or f"claim:{claim.id}", []).append(source)
    cost = _expected_seconds()
    return sorted(groups.values(), key=lambda g: -sum(cost.get(c.function, 1.0) for c in g))


def _run_group(checks: list[Check], ctx_fields: dict, threads: int) -> dict:
    """Worker process of ``--jobs``: run ``checks`` in order with a context of their own (sweeps run serially
    here) and ``threads`` torch threads; returns ``{function: (outcome, seconds, error)}``."""
    import matplotlib
    import torch

    matplotlib.use("Agg")
    torch.set_num_threads(threads)
    ctx = CheckContext(**ctx_fields)
    for check in checks:
        _run_one(check, ctx)
    return ctx.cache[("builder", "outcomes")]


def _run_parallel(work: list[tuple[Claim, Check]], ctx: CheckContext, bar) -> None:
    """Run the checks of ``work`` in ``ctx.jobs`` worker processes (spawned: a fork would inherit torch's thread
    pool) and store their outcomes where :func:`_run_one` finds them. The numbers are those of a serial run: every
    check draws from its own seeded generators, and each worker uses the parent's torch thread count."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import torch

    groups = check_groups(work)
    fields = dict(tier=ctx.tier, seed=ctx.seed, figures_dir=ctx.figures_dir, quiet=True, options=ctx.options,
                  device=ctx.device, jobs=1, backend="joblib")
    done = ctx.cache.setdefault(("builder", "outcomes"), {})
    n_uses = {}
    for _, check in work:
        source = _cited(check) if check.cites else check
        n_uses[source.function] = n_uses.get(source.function, 0) + 1
    pool = ProcessPoolExecutor(max_workers=min(ctx.jobs, len(groups)) or 1,
                               mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(_run_group, g, fields, torch.get_num_threads()): g for g in groups}
        for future in as_completed(futures):
            results = future.result()
            done.update(results)
            bar.update(sum(n_uses[f] for f in results))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def claim_record(claim: Claim, records: list[dict]) -> dict:
    """A claim's entry of results.json: verdict from its deciding checks, findings from all of them."""
    deciding = [r for r in records if r["reading"] != "stronger"]
    verdict = claim_verdict([r["verdict"] for r in deciding])
    reasons = sorted({r["reason"] for r in deciding if r["verdict"] in ("inconclusive", "error") and r["reason"]})
    assumptions = list(dict.fromkeys(a for r in deciding if r["reading"] == "reproduction" for a in r["assumptions"]))
    findings = [{**f, "check": f"{r['kind']}:{r['function']}"} for r in records for f in r["findings"]]
    return {"id": claim.id, "section": claim.section, "paper": claim.paper, "statement": claim.statement,
            "verdict": verdict,
            "reasons": reasons, "assumptions": assumptions,
            "reproduction": any(r["reading"] == "reproduction" for r in deciding), "findings": findings,
            "checks": records}


def run_claims(claims: Iterable[Claim], ctx: CheckContext, *, progress: bool = False,
               kinds: Iterable[str] | None = None) -> list[dict]:
    """Run every check of ``claims`` (of the given ``kinds``, default all); one dict per claim in the
    results.json schema (SPEC §6 and §4.1).

    A check that raises is recorded with the verdict ``error`` and its message, never dropped and never read as a
    verdict about the claim. A check that cites another claim's check shows that check's evidence without
    running it twice. With ``ctx.jobs`` > 1 (joblib backend) the checks run in that many worker processes, a
    claim's checks (and checks sharing a cached computation, ``Check.shares``) in one worker, with sweeps serial
    inside each; the numbers are those of a serial run. With the Dask backend checks run here and their sweeps go
    to the cluster.
    """
    import matplotlib

    matplotlib.use("Agg")
    claims = list(claims)
    kinds = None if kinds is None else set(kinds)
    # every registered check runs: one whose function cannot be imported is an error, not a missing row
    work = [(claim, check) for claim in claims for check in claim.checks if kinds is None or check.kind in kinds]
    bar = tqdm(total=len(work), disable=None if progress else True, unit="check")
    records = {claim.id: [] for claim in claims}
    parallel = ctx.jobs > 1 and ctx.backend == "joblib" and len(work) > 1
    try:
        if parallel:  # checks in worker processes; the loop below only assembles their records
            bar.set_description(f"{ctx.jobs} workers")
            _run_parallel(work, ctx, bar)
        for claim, check in work:
            if not parallel:
                bar.set_description(f"{claim.id} [{check.kind}]")
            source = _cited(check) if check.cites else check
            outcome, seconds, error = _run_one(source, ctx)
            record = _record(check, outcome, seconds, error)
            if check.cites:  # one piece of evidence is shown once: here only its verdict and a pointer
                record.update(function=source.function, measured={}, tolerances={}, tables=[], figures=[],
                              derivation=[], instance=None, seconds=0.0,
                              summary=f"The same evidence as {check.cites.replace(':', ' (')}), shown there; "
                                      f"verdict {record['verdict']}.")
            records[claim.id].append(record)
            if not parallel:
                bar.update()
    finally:
        bar.close()
    return [claim_record(c, records[c.id]) for c in claims]


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
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    selected = CLAIMS if claims is None else tuple(get_claim(c) for c in claims)
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it")
    # progress bars only on a terminal: a log file or CI gets none (the training loops inside checks too)
    ctx = CheckContext(tier=tier, seed=seed, quiet=quiet or not sys.stderr.isatty(), jobs=jobs, backend=backend,
                       scheduler=scheduler, device=device)
    validate_executor(jobs=jobs, backend=backend, scheduler=scheduler)
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
            "tier": tier, "seed": seed, "package_version": _package_version(),
            "units": "nats (natural logs) for every information quantity and loss",
            "started": started.isoformat(timespec="seconds"), "seconds": round(time.perf_counter() - t0, 3),
            "environment": env,
            "config": {"tier": tier, "seed": seed, "claims": [c.id for c in selected], "jobs": jobs,
                       "backend": backend, "threads": threads, "device": device, "command": " ".join(sys.argv)},
            "claims": claim_records,
        }
        write_text_atomic(tmp / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        write_text_atomic(tmp / "REPORT.md", render_markdown(results))
        write_text_atomic(tmp / "report.html", render_html(results, figures_dir=tmp / "figures"))
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch CPU threads, then restore the previous count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _package_version() -> str:
    try:
        return metadata.version("bma-verify")
    except metadata.PackageNotFoundError:
        return "unknown"


def _replace_dir(new: Path, target: Path) -> None:
    """Move ``new`` to ``target``; an existing ``target`` is swapped out first and deleted only afterwards."""
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)


def write_text_atomic(path: Path, text: str, *, overwrite: bool = True) -> None:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; refusing to overwrite it")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------- rendering

def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(_fmt(v) for v in value[:8]) + f", … ({len(value)} values)]"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    return str(value)


def _flatten(measured: dict, prefix: str = "") -> list[tuple[str, object]]:
    rows = []
    for key, value in measured.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, value))
    return rows


VERDICT_MARK = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE", "error": "ERROR"}
#: A reproduction's verdict is about the experiment under the readings it names, not about the paper's wording.
REPRODUCTION_MARK = {"pass": "REPRODUCED", "fail": "NOT REPRODUCED"}


BEYOND_TITLE = "Beyond the paper"
BEYOND_TEXT = ("Our extensions (`ext-*`), not the paper's claims: the k-parent DAG task of the paper's open question 1, "
               "with the same readings and controls as the rest. `footnote1-selective-induction` is the paper's own "
               "claim about another task (its footnote 1). A FAIL here answers a question of ours, not the paper's.")


def _starts_beyond(claims: list[dict], claim: dict) -> bool:
    """Is ``claim`` the first of the "beyond" section (after at least one of the paper's claims or alone)?"""
    beyond = [c for c in claims if c.get("section") == "beyond"]
    return bool(beyond) and claim is beyond[0]


def verdict_label(claim: dict) -> str:
    """The claim's verdict as the summary shows it.

    A failure that comes only from ``reproduction`` checks reads ``NOT REPRODUCED under …`` with the choices the
    paper leaves open: it is never a bare FAIL of the paper. An inconclusive verdict carries its reason.
    """
    deciding = [c for c in claim["checks"] if c["reading"] != "stronger"]
    failing = [c for c in deciding if c["verdict"] == "fail"]
    label = VERDICT_MARK[claim["verdict"]]
    if claim["verdict"] == "fail" and all(c["reading"] == "reproduction" for c in failing):
        label = REPRODUCTION_MARK["fail"]
    elif claim["verdict"] == "pass" and deciding and all(c["reading"] == "reproduction" for c in deciding):
        label = REPRODUCTION_MARK["pass"]
    readings = [a for a in claim.get("assumptions", []) if a.startswith("reading ")]
    if readings and claim["verdict"] in ("pass", "fail", "inconclusive"):
        # "reading R1: <what it assumes>: <outcome>" -> "reading R1: <outcome>"; the details are in the section
        label += " (" + "; ".join(f"{r.split(':')[0]}: {r.rsplit(': ', 1)[-1]}" for r in readings) + ")"
    if claim["verdict"] in ("inconclusive", "error") and claim.get("reasons"):
        label += " (" + "; ".join(claim["reasons"]) + ")"
    return label


def finding_line(finding: dict) -> str:
    instance = ", 1 instance" if finding.get("instance") and finding["status"] == "refuted" else ""
    return f"finding: {finding['statement']} ({finding['status']}{instance})"


def control_counts(claim: dict) -> str:
    """'n/m rejected' over the checks that ran a control (a cited check counts where it ran)."""
    own = [c for c in claim["checks"] if not c.get("cites")]
    rejected = sum(bool(c["control"] and c["control"]["rejected"]) for c in own)
    return f"{rejected}/{len(own)} rejected"


def summary_counts(claims: list[dict]) -> str:
    """'9 pass, 1 fail, 2 inconclusive, 1 error' over claims: errors are counted apart from verdicts."""
    return verdict_counts(c["verdict"] for c in claims)


def _check_verdict_text(check: dict) -> str:
    text = check["verdict"]
    if check.get("reason"):
        text += f" ({check['reason']})"
    return text


def _control_text(control: dict | None) -> str:
    if control is None:
        return "none (so this check cannot pass)"
    return (f"{control['description']}: measured {_fmt(control['measured'])}; "
            f"{'rejected' if control['rejected'] else 'NOT rejected (the check does not discriminate)'}")


def render_markdown(results: dict) -> str:
    env = results["environment"]
    lines = [
        "# bma-verify verification report", "",
        f"Tier **{results['tier']}**, seed {results['seed']}, package {results['package_version']}, "
        f"started {results['started']}, {results['seconds']:.1f} s.", "",
        f"Environment: Python {env['python']}, NumPy {env['numpy']}, SciPy {env['scipy']}, SymPy {env['sympy']}, "
        f"PyTorch {env['torch']} ({env.get('torch_threads')} torch threads), {env['machine']} × {env['cpu_count']} "
        f"CPUs, GPU: {env['gpu'] or 'none'}.", "",
        "Each claim is stated as this package reads it; the paper's own wording is paraphrased, since its full text "
        "is not public. How to read a verdict: only checks that read the claim **as stated** (the paper's wording "
        "in its most faithful precise form) or as a **reproduction** (a trained experiment, under the choices it "
        "names) decide it. A **stronger** reading is a sharper statement of ours; it gives a *finding* (holds, "
        "refuted with its instance, or open) and never fails the paper. Every check also runs a **negative "
        "control**, an input known to be false, in the same run; a check whose control is not rejected, or whose "
        "trained run has not converged, reads inconclusive, never pass. Losses and information are in nats.", "",
        f"Claims: {summary_counts(results['claims'])}.", "",
        "## Summary", "", "| claim | verdict | findings | controls | checks |", "|---|---|---|---|---|",
    ]
    for claim in results["claims"]:
        checks = ", ".join(f"{c['kind']} ({c['reading']}): {c['verdict']}" for c in claim["checks"]) or "none"
        findings = "<br>".join(finding_line(f) for f in claim["findings"]) or "—"
        if _starts_beyond(results["claims"], claim):
            lines.append(f"| **{BEYOND_TITLE}** | | | | |")
        lines.append(f"| [`{claim['id']}`](#{claim['id']}) | {verdict_label(claim)} | {findings} | "
                     f"{control_counts(claim)} | {checks} |")
    for claim in results["claims"]:
        if _starts_beyond(results["claims"], claim):
            lines += ["", f"# {BEYOND_TITLE}", "", BEYOND_TEXT]
        lines += ["", f"## {claim['id']}", "", f"**Verdict: {verdict_label(claim)}**", "",
                  f"*Paper:* {claim['paper']}", "", f"*Statement checked:* {claim['statement']}"]
        if claim["findings"]:
            lines += ["", "Findings (statements of ours, not the paper's):", ""]
            lines += [f"- **{f['status']}**: {f['statement']}" + (f" — {f['evidence']}" if f["evidence"] else "")
                      for f in claim["findings"]]
        for check in claim["checks"]:
            lines += ["", f"### {check['kind']} ({check['reading']}) — {check['description']}", "",
                      f"Verdict **{_check_verdict_text(check)}** in {check['seconds']:.2f} s. {check['summary']}"]
            if check.get("cites"):
                continue
            lines += ["", f"Negative control: {_control_text(check['control'])}"]
            if check["assumptions"]:
                lines += ["", "Assumptions (choices the paper leaves open): " + "; ".join(check["assumptions"])]
            if check["threshold"] is not None:
                lines += ["", f"Threshold: {_fmt(check['threshold'])}"]
            if check["derivation"]:
                lines += ["", "Derivation:"]
                for caption, latex in check["derivation"]:
                    lines += ["", f"- {caption}", "", "  $$", f"  {latex}", "  $$"]
            measured = _flatten(check["measured"])
            if measured:
                lines += ["", "| measured | value |", "|---|---|"]
                lines += [f"| {k} | {_fmt(v)} |" for k, v in measured]
            for table in check["tables"]:
                lines += ["", f"**{table['title']}**", "", "| " + " | ".join(table["columns"]) + " |",
                          "|" + "---|" * len(table["columns"])]
                lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in table["rows"]]
            for fig in check["figures"]:
                lines += ["", f"![{fig}](figures/{fig})"]
            if check["instance"] is not None:
                lines += ["", "Instance (re-check with `bma-verify check --instance FILE`):", "", "```json",
                          json.dumps(check["instance"], indent=1), "```"]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:64em;margin:2em auto;line-height:1.45;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
.pass{color:#176f2c;font-weight:bold}.fail{color:#b00020;font-weight:bold}.inconclusive{color:#a66b00;font-weight:bold}
.error{color:#6a1b9a;font-weight:bold}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}img{max-width:100%}
math[display=block]{margin:.4em 0;overflow-x:auto;max-width:100%}nav ol{columns:2}
figure{margin:.6em 0}figcaption{font-size:.85em;color:#555}"""


def latex_to_mathml(latex: str) -> str:
    """MathML for a LaTeX formula (converted at build time: browsers render it natively, offline).

    A formula the converter cannot read is shown as escaped source in ``<pre class='raw-latex'>`` rather than
    dropped, so a reader always sees it.
    """
    try:
        from latex2mathml.converter import convert

        mathml = convert(latex, display="block")
    except Exception:  # noqa: BLE001 - a formula the converter does not know stays readable as source
        return f"<pre class='raw-latex'>{html.escape(latex)}</pre>"
    return mathml.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "")


def display_png(path) -> bytes:
    """The copy of a figure embedded in report.html: the PNG reduced to 256 colours (median cut, no dithering).

    Heat maps and curves drawn from a colour map lose nothing visible, and the figures shrink about threefold, which
    keeps the self-contained report under 2 MiB; the full-colour PNG and the SVG stay in figures/.
    """
    import io

    from PIL import Image

    with Image.open(path) as image:
        reduced = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    reduced.save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def _embedded_image(figures_dir, name: str) -> str:
    """An <img> whose PNG (:func:`display_png`) is embedded as a data URI, so report.html stands alone as one
    file."""
    import base64

    e = html.escape
    path = None if figures_dir is None else Path(figures_dir) / name
    if path is not None and path.exists():
        data = base64.b64encode(display_png(path)).decode("ascii")
        source = f"data:image/png;base64,{data}"
    else:  # rendering from results alone (no figure files at hand): point at the report's figures/ folder
        source = f"figures/{e(name)}"
    vector = Path(name).with_suffix(".svg").name
    return (f"<figure><img src='{source}' alt='{e(name)}'><figcaption>figures/{e(name)} (vector copy: "
            f"figures/{e(vector)})</figcaption></figure>")


def _anchor(*parts) -> str:
    return html.escape("-".join(str(p) for p in parts).replace(" ", "-").replace(":", "-"))


def render_html(results: dict, figures_dir=None) -> str:
    """One self-contained page: inline CSS, figures embedded (from ``figures_dir``), math rendered as MathML,
    a table of contents and an anchor per claim and per check."""
    e = html.escape
    env = results["environment"]
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>bma-verify report</title>",
             f"<style>{_CSS}</style></head><body>", "<h1>bma-verify verification report</h1>",
             f"<p>Tier <b>{e(results['tier'])}</b>, seed {results['seed']}, package {e(results['package_version'])}, "
             f"started {e(results['started'])}, {results['seconds']:.1f} s. Python {e(env['python'])}, NumPy "
             f"{e(str(env['numpy']))}, PyTorch {e(str(env['torch']))} ({e(str(env.get('torch_threads')))} threads), "
             f"GPU: {e(str(env['gpu'] or 'none'))}.</p>",
             "<p>Only checks that read a claim <b>as stated</b> or as a <b>reproduction</b> decide its verdict; a "
             "<b>stronger</b> reading of ours gives a finding and never fails the paper. Every check runs a negative "
             "control in the same run; one whose control is not rejected, or whose trained run has not converged, "
             "cannot pass. Losses and information are in nats.</p>",
             f"<p>Claims: {e(summary_counts(results['claims']))}.</p>",
             "<nav><h2>Contents</h2><ol><li><a href='#summary'>Summary</a></li>" + "".join(
                 f"<li><a href='#{_anchor(c['id'])}'>{e(c['id'])}</a></li>" for c in results["claims"]) + "</ol></nav>",
             "<h2 id='summary'>Summary</h2><table><tr><th>claim</th><th>verdict</th><th>findings</th>"
             "<th>controls</th><th>checks</th></tr>"]
    for claim in results["claims"]:
        checks = "<br>".join(
            f"<a href='#{_anchor(claim['id'], i, c['kind'])}'>{e(c['kind'])}</a> ({e(c['reading'])}): "
            f"<span class='{c['verdict']}'>{e(c['verdict'])}</span>" for i, c in enumerate(claim["checks"])) or "none"
        findings = "<br>".join(e(finding_line(f)) for f in claim["findings"]) or "—"
        if _starts_beyond(results["claims"], claim):
            parts.append(f"<tr><th colspan='5'><a href='#beyond'>{e(BEYOND_TITLE)}</a></th></tr>")
        parts.append(f"<tr><td><a href='#{_anchor(claim['id'])}'>{e(claim['id'])}</a></td>"
                     f"<td class='{claim['verdict']}'>{e(verdict_label(claim))}</td><td>{findings}</td>"
                     f"<td>{e(control_counts(claim))}</td><td>{checks}</td></tr>")
    parts.append("</table>")
    for claim in results["claims"]:
        if _starts_beyond(results["claims"], claim):
            parts += [f"<h1 id='beyond'>{e(BEYOND_TITLE)}</h1>",
                      "<p>" + e(BEYOND_TEXT).replace("`", "") + "</p>"]
        parts += [f"<h2 id='{_anchor(claim['id'])}'>{e(claim['id'])} — <span class='{claim['verdict']}'>"
                  f"{e(verdict_label(claim))}</span></h2>", f"<p><i>Paper:</i> {e(claim['paper'])}</p>",
                  f"<p><i>Statement checked:</i> {e(claim['statement'])}</p>"]
        if claim["findings"]:
            parts.append("<p>Findings (statements of ours, not the paper's):</p><ul>" + "".join(
                f"<li><b>{e(f['status'])}</b>: {e(f['statement'])}" + (f" — {e(f['evidence'])}" if f["evidence"]
                                                                         else "") + "</li>"
                for f in claim["findings"]) + "</ul>")
        for i, check in enumerate(claim["checks"]):
            parts += [f"<h3 id='{_anchor(claim['id'], i, check['kind'])}'>{e(check['kind'])} ({e(check['reading'])})"
                      f" — {e(check['description'])}</h3>",
                      f"<p><span class='{check['verdict']}'>{e(_check_verdict_text(check))}</span> in "
                      f"{check['seconds']:.2f} s. {e(check['summary'])}</p>"]
            if check.get("cites"):
                continue
            parts.append(f"<p>Negative control: {e(_control_text(check['control']))}</p>")
            if check["assumptions"]:
                parts.append(f"<p>Assumptions (choices the paper leaves open): {e('; '.join(check['assumptions']))}</p>")
            if check["threshold"] is not None:
                parts.append(f"<p>Threshold: {e(_fmt(check['threshold']))}</p>")
            for caption, latex in check["derivation"]:
                parts.append(f"<p>{e(caption)}</p>{latex_to_mathml(latex)}")
            measured = _flatten(check["measured"])
            if measured:
                parts.append("<table><tr><th>measured</th><th>value</th></tr>" + "".join(
                    f"<tr><td>{e(k)}</td><td>{e(_fmt(v))}</td></tr>" for k, v in measured) + "</table>")
            for table in check["tables"]:
                parts.append(f"<p><b>{e(table['title'])}</b></p><table><tr>" +
                             "".join(f"<th>{e(c)}</th>" for c in table["columns"]) + "</tr>" +
                             "".join("<tr>" + "".join(f"<td>{e(_fmt(v))}</td>" for v in row) + "</tr>"
                                     for row in table["rows"]) + "</table>")
            for fig in check["figures"]:
                parts.append(_embedded_image(figures_dir, fig))
            if check["instance"] is not None:
                parts.append(f"<p>Instance (re-check with <code>bma-verify check --instance FILE</code>):</p>"
                             f"<pre>{e(json.dumps(check['instance'], indent=1))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
