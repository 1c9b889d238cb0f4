"""Run the claim registry and write the verification report (REPORT.md, report.html, figures/, results.json).

The report is built in a temporary sibling folder and moved into place only when complete, so an existing report
is never half-overwritten: without ``force`` an existing output folder is refused, and an interrupted run
(Ctrl-C) leaves the previous report as it was.
"""
from __future__ import annotations

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

from reports.core import TIERS, CheckContext, CheckOutcome, jsonable
from reports.registry import CLAIMS, Claim, get_claim


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

        env["cuda"] = torch.cuda.is_available()
        env["gpu"] = torch.cuda.get_device_name(0) if env["cuda"] else None
    except ImportError:
        env["cuda"], env["gpu"] = False, None
    return env


def claim_verdict(check_verdicts: list[str]) -> str:
    """fail if any check fails; pass only if there are checks and all pass; else inconclusive."""
    if "fail" in check_verdicts:
        return "fail"
    if check_verdicts and all(v == "pass" for v in check_verdicts):
        return "pass"
    return "inconclusive"


def run_claims(claims: Iterable[Claim], ctx: CheckContext, *, progress: bool = False,
               kinds: Iterable[str] | None = None) -> list[dict]:
    """Run every check of ``claims`` (of the given ``kinds``, default all); one dict per claim in the
    results.json schema (SPEC §6).

    A check that raises is recorded as ``fail`` with the error, never dropped: a crash means the claim was not
    verified, and the report must say so.
    """
    import matplotlib

    matplotlib.use("Agg")
    claims = list(claims)
    kinds = None if kinds is None else set(kinds)
    # every registered check runs: one whose function cannot be imported is a failed check, not a missing row
    work = [(claim, check) for claim in claims for check in claim.checks if kinds is None or check.kind in kinds]
    bar = tqdm(total=len(work), disable=None if progress else True, unit="check")
    records = {claim.id: [] for claim in claims}
    for claim, check in work:
        bar.set_description(f"{claim.id} [{check.kind}]")
        start = time.perf_counter()
        try:
            outcome = check.resolve()(ctx)
            if not isinstance(outcome, CheckOutcome):
                raise TypeError(f"{check.function} returned {type(outcome).__name__}, not CheckOutcome")
            error = None
        except KeyboardInterrupt:
            bar.close()
            raise
        except Exception as exc:  # noqa: BLE001 - recorded in the report as a failed check
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            outcome = CheckOutcome("fail", {"error": error},
                                   summary=f"the check raised an error, so the claim was not verified: {error}")
        seconds = time.perf_counter() - start
        records[claim.id].append({
            "kind": check.kind, "function": check.function, "description": check.description,
            "measured": jsonable(outcome.measured), "threshold": jsonable(outcome.threshold),
            "verdict": outcome.verdict, "seconds": round(seconds, 3), "summary": outcome.summary,
            "derivation": [list(step) for step in outcome.derivation],
            "tables": [{"title": t.title, "columns": t.columns, "rows": jsonable(t.rows)} for t in outcome.tables],
            "figures": list(outcome.figures), "instance": jsonable(outcome.instance),
            "tolerances": jsonable(outcome.tolerances), "error": error,
        })
        bar.update()
    bar.close()
    return [{"id": c.id, "paper": c.paper, "statement": c.statement,
             "verdict": claim_verdict([r["verdict"] for r in records[c.id]]),
             "checks": records[c.id]} for c in claims]


def build_report(tier: str, out_dir, *, seed: int = 0, claims: Iterable[str] | None = None, force: bool = False,
                 quiet: bool = True, jobs: int = 1, backend: str = "joblib", scheduler: str | None = None) -> Path:
    """Build the verification report for ``tier`` into ``out_dir``; returns the folder.

    Raises
    ------
    ValueError
        for an unknown tier or claim id.
    FileExistsError
        if ``out_dir`` exists and ``force`` is False.
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    selected = CLAIMS if claims is None else tuple(get_claim(c) for c in claims)
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        started = _dt.datetime.now(_dt.timezone.utc)
        t0 = time.perf_counter()
        ctx = CheckContext(tier=tier, seed=seed, figures_dir=tmp / "figures", quiet=quiet, jobs=jobs,
                           backend=backend, scheduler=scheduler)
        claim_records = run_claims(selected, ctx, progress=not quiet)
        results = {
            "tier": tier, "seed": seed, "package_version": _package_version(),
            "started": started.isoformat(timespec="seconds"), "seconds": round(time.perf_counter() - t0, 3),
            "environment": environment(),
            "config": {"tier": tier, "seed": seed, "claims": [c.id for c in selected], "jobs": jobs,
                       "backend": backend, "command": " ".join(sys.argv)},
            "claims": claim_records,
        }
        write_text_atomic(tmp / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        write_text_atomic(tmp / "REPORT.md", render_markdown(results))
        write_text_atomic(tmp / "report.html", render_html(results))
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


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


VERDICT_MARK = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}


def render_markdown(results: dict) -> str:
    env = results["environment"]
    lines = [
        "# bma-verify verification report", "",
        f"Tier **{results['tier']}**, seed {results['seed']}, package {results['package_version']}, "
        f"started {results['started']}, {results['seconds']:.1f} s.", "",
        f"Environment: Python {env['python']}, NumPy {env['numpy']}, SciPy {env['scipy']}, SymPy {env['sympy']}, "
        f"PyTorch {env['torch']}, {env['machine']} × {env['cpu_count']} CPUs, "
        f"GPU: {env['gpu'] or 'none'}.", "",
        "Each claim is stated as this package reads it (SPEC.md §4); the paper's own wording is paraphrased, "
        "since its full text is not public.", "",
        "## Summary", "", "| claim | verdict | checks |", "|---|---|---|",
    ]
    for claim in results["claims"]:
        checks = ", ".join(f"{c['kind']}: {c['verdict']}" for c in claim["checks"]) or "no checks yet"
        lines.append(f"| [`{claim['id']}`](#{claim['id']}) | {VERDICT_MARK[claim['verdict']]} | {checks} |")
    for claim in results["claims"]:
        lines += ["", f"## {claim['id']}", "", f"**Verdict: {VERDICT_MARK[claim['verdict']]}**", "",
                  f"*Paper:* {claim['paper']}", "", f"*Statement checked:* {claim['statement']}"]
        for check in claim["checks"]:
            lines += ["", f"### {check['kind']} — {check['description']}", "",
                      f"Verdict **{check['verdict']}** in {check['seconds']:.2f} s. {check['summary']}"]
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
                lines += ["", "Failing instance (re-check with `bma-verify check --instance FILE`):", "", "```json",
                          json.dumps(check["instance"], indent=1), "```"]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;line-height:1.45;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
.pass{color:#176f2c;font-weight:bold}.fail{color:#b00020;font-weight:bold}.inconclusive{color:#a66b00;font-weight:bold}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}img{max-width:100%}"""


def render_html(results: dict) -> str:
    """A self-contained page: inline CSS, figures referenced relatively (figures/), math as LaTeX source."""
    e = html.escape
    env = results["environment"]
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>bma-verify report</title>",
             f"<style>{_CSS}</style></head><body>", "<h1>bma-verify verification report</h1>",
             f"<p>Tier <b>{e(results['tier'])}</b>, seed {results['seed']}, package {e(results['package_version'])}, "
             f"started {e(results['started'])}, {results['seconds']:.1f} s. Python {e(env['python'])}, NumPy "
             f"{e(str(env['numpy']))}, PyTorch {e(str(env['torch']))}, GPU: {e(str(env['gpu'] or 'none'))}.</p>",
             "<h2>Summary</h2><table><tr><th>claim</th><th>verdict</th><th>checks</th></tr>"]
    for claim in results["claims"]:
        checks = ", ".join(f"{c['kind']}: {c['verdict']}" for c in claim["checks"]) or "no checks yet"
        parts.append(f"<tr><td><a href='#{e(claim['id'])}'>{e(claim['id'])}</a></td>"
                     f"<td class='{claim['verdict']}'>{claim['verdict']}</td><td>{e(checks)}</td></tr>")
    parts.append("</table>")
    for claim in results["claims"]:
        parts += [f"<h2 id='{e(claim['id'])}'>{e(claim['id'])} — <span class='{claim['verdict']}'>"
                  f"{claim['verdict']}</span></h2>", f"<p><i>Paper:</i> {e(claim['paper'])}</p>",
                  f"<p><i>Statement checked:</i> {e(claim['statement'])}</p>"]
        for check in claim["checks"]:
            parts += [f"<h3>{e(check['kind'])} — {e(check['description'])}</h3>",
                      f"<p><span class='{check['verdict']}'>{check['verdict']}</span> in {check['seconds']:.2f} s. "
                      f"{e(check['summary'])}</p>"]
            if check["threshold"] is not None:
                parts.append(f"<p>Threshold: {e(_fmt(check['threshold']))}</p>")
            for caption, latex in check["derivation"]:
                parts.append(f"<p>{e(caption)}</p><pre>{e(latex)}</pre>")
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
                parts.append(f"<p><img src='figures/{e(fig)}' alt='{e(fig)}'></p>")
            if check["instance"] is not None:
                parts.append(f"<p>Failing instance:</p><pre>{e(json.dumps(check['instance'], indent=1))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
