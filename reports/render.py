"""Render a report's results (the results.json dict) as REPORT.md and as one self-contained report.html.

Rendering reads only the results: the builder decides verdicts, this module lays them out. The summary labels
(:func:`verdict_label`, :func:`check_label`, :func:`finding_line`, :func:`summary_counts`) are shared with
``bma-verify check``'s printed table.

Prose math is written readably (:mod:`reports.render_math`: Unicode in REPORT.md, sub- and superscripts and
MathML that wraps in report.html); controls, power curves and seeds read as sentences and small tables
(:mod:`reports.render_evidence`).

Findings are never shown as failures: a claim of ours (``owner`` "ours") that fails has the verdict ``refuted``,
shown ``REFUTED (ours)`` and counted apart from the fails; a ``stronger`` check shows its finding (holds, refuted,
open) in place of its verdict, so a refuted sharper reading inside a passing claim reads "refuted", never a red
"fail".
"""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from PIL import Image

from bma_verify.reports.core import REFUTED, finding_status, verdict_counts
from bma_verify.reports.render_evidence import (control_sentence, positive_control_sentence, power_line, power_table,
                                                seeds_line, seeds_table)
from bma_verify.reports.render_math import latex_to_mathml, prose_html, prose_markdown

VERDICT_MARK = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE", "error": "ERROR",
                REFUTED: "REFUTED (ours)"}
#: The style of each word a verdict cell shows: a finding's status takes the colour of the verdict it comes from,
#: and ``refuted`` has its own (not the red of a fail).
_CSS_CLASS = {"holds": "pass", "open": "inconclusive"}
#: A reproduction's verdict is about the experiment under the readings it names, not about the paper's wording.
REPRODUCTION_MARK = {"pass": "REPRODUCED", "fail": "NOT REPRODUCED"}

BEYOND_TITLE = "Beyond the paper"
BEYOND_TEXT = ("Our extensions (`ext-*`), not the paper's claims: the k-parent DAG task of the paper's open question"
               " 1, and D'Angelo et al.'s results on their selective-induction task beside ours (`ext-selective-*`),"
               " with the same readings and controls as the rest. `footnote1-selective-induction` is the paper's own"
               " claim about another task (its footnote 1), and can FAIL. A conjecture of ours that does not hold "
               "reads REFUTED (ours), with its instance: a finding, never a FAIL of the paper.")

_MARKDOWN_INTRO = (
    "Each claim is stated as this package reads it; the paper's own wording is paraphrased, since its full text "
    "is not public. How to read a verdict: only checks that read the claim **as stated** (the paper's wording "
    "in its most faithful precise form) or as a **reproduction** (a trained experiment, under the choices it "
    "names) decide it. A **stronger** reading is a sharper statement of ours; it gives a *finding* (holds, "
    "refuted with its instance, or open) and never fails the paper; so does a claim of ours (`ext-*`), whose "
    "failure reads REFUTED (ours) and is not counted as a fail. Every check also runs a **negative "
    "control**, an input known to be false, in the same run; a check whose control is not rejected, or whose "
    "trained run has not converged, reads inconclusive, never pass. Losses and information are in nats.")
_HTML_INTRO = (
    "<p>Only checks that read a claim <b>as stated</b> or as a <b>reproduction</b> decide its verdict; a "
    "<b>stronger</b> reading of ours gives a finding and never fails the paper; so does a claim of ours "
    "(ext-*), whose failure reads REFUTED (ours) and is not counted as a fail. Every check runs a negative "
    "control in the same run; one whose control is not rejected, or whose trained run has not converged, "
    "cannot pass. Losses and information are in nats.</p>")

#: The page takes the window's width (no max-width); long lines, wide formulas and tables wrap instead of scrolling.
_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em 2.5%;line-height:1.45;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;
overflow-wrap:anywhere}
.pass{color:#176f2c;font-weight:bold}.fail{color:#b00020;font-weight:bold}.inconclusive{color:#a66b00;font-weight:bold}
.error{color:#6a1b9a;font-weight:bold}.refuted{color:#1f4e96;font-weight:bold}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}img{max-width:100%;height:auto}
math[display=block]{margin:.4em 0;max-width:100%;overflow-x:auto}nav ol{columns:16em}
.formula{display:flex;flex-wrap:wrap;align-items:baseline;gap:.2em .7em;margin:.4em 0 .4em 1.5em}
.formula math[display=block]{margin:0}
figure{margin:.6em 0}figcaption{font-size:.85em;color:#555}"""


# ----------------------------------------------------------------------------------------- values and labels

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


def _starts_beyond(claims: list[dict], claim: dict) -> bool:
    """Is ``claim`` the first of the "beyond" section (after at least one of the paper's claims or alone)?"""
    beyond = [c for c in claims if c.get("section") == "beyond"]
    return bool(beyond) and claim is beyond[0]


def verdict_label(claim: dict, reasons: bool = True) -> str:
    """The claim's verdict as the summary shows it.

    A failure that comes only from ``reproduction`` checks reads ``NOT REPRODUCED under …`` with the choices the
    paper leaves open: it is never a bare FAIL of the paper. A claim of ours that fails (verdict ``refuted``) reads
    ``REFUTED (ours)`` (``NOT REPRODUCED (ours)`` for a reproduction). An inconclusive verdict carries its reason, and
    a claim read several ways each reading's outcome, unless ``reasons`` is false (the README's table gives them
    apart, shortened).
    """
    deciding = [c for c in claim["checks"] if c["reading"] != "stronger"]
    failing = [c for c in deciding if c["verdict"] == "fail"]
    label = VERDICT_MARK[claim["verdict"]]
    if claim["verdict"] in ("fail", REFUTED) and all(c["reading"] == "reproduction" for c in failing):
        label = REPRODUCTION_MARK["fail"] + (" (ours)" if claim["verdict"] == REFUTED else "")
    elif claim["verdict"] == "pass" and deciding and all(c["reading"] == "reproduction" for c in deciding):
        label = REPRODUCTION_MARK["pass"]
    if not reasons:
        return label
    outcomes = reading_outcomes(claim)
    if outcomes and claim["verdict"] in ("pass", "fail", REFUTED, "inconclusive"):
        label += " (" + "; ".join(outcomes) + ")"
    if claim["verdict"] in ("inconclusive", "error") and claim.get("reasons"):
        label += " (" + "; ".join(claim["reasons"]) + ")"
    return label


def reading_outcomes(claim: dict) -> list[str]:
    """'reading R1: <outcome>' for each reading a claim is decided under (its assumptions 'reading R1: <what it
    assumes>: <outcome>'); the details are in the claim's section."""
    return [f"{a.split(':')[0]}: {a.rsplit(': ', 1)[-1]}" for a in claim.get("assumptions", [])
            if a.startswith("reading ")]


def check_label(check: dict, owner: str = "paper") -> str:
    """A check's verdict as the tables show it: a ``stronger`` check's finding (holds, refuted, open), a failing check
    of a claim of ours ``refuted``, else its verdict. results.json keeps the check's own verdict."""
    if check["verdict"] == "error":
        return "error"
    if check["reading"] == "stronger":
        return finding_status(check["verdict"])
    return REFUTED if owner == "ours" and check["verdict"] == "fail" else check["verdict"]


def _css_class(word: str) -> str:
    return _CSS_CLASS.get(word, word)


def finding_line(finding: dict) -> str:
    instance = ", 1 instance" if finding.get("instance") and finding["status"] == "refuted" else ""
    return f"finding: {finding['statement']} ({finding['status']}{instance})"


def control_counts(claim: dict) -> str:
    """'n/m rejected' over the checks that ran a control (a cited check counts where it ran)."""
    own = [c for c in claim["checks"] if not c.get("cites")]
    rejected = sum(bool(c["control"] and c["control"]["rejected"]) for c in own)
    return f"{rejected}/{len(own)} rejected"


def summary_counts(claims: list[dict]) -> str:
    """'9 pass, 1 fail, 2 inconclusive, 1 error, 1 refuted (ours)' over claims: errors are counted apart from
    verdicts, and a refuted conjecture of ours apart from the fails (only the paper's claims fail)."""
    verdicts = [c["verdict"] for c in claims]
    return f"{verdict_counts(verdicts)}, {verdicts.count(REFUTED)} {REFUTED} (ours)"


def _check_verdict_text(check: dict, owner: str) -> str:
    text = check_label(check, owner)
    if check.get("reason"):
        text += f" ({check['reason']})"
    return text


def _runs_and_control(check: dict) -> list[tuple[str, tuple | None]]:
    """(sentence, table or None) for the seeds (a trained check), the negative control and its power curve."""
    parts = []
    if check.get("seeds"):
        table = seeds_table(check["seeds"])
        parts.append((f"Seeds: {seeds_line(check['seeds'])}.", table if table[1] else None))
    if check.get("positive_control"):
        parts.append((f"Positive control: {positive_control_sentence(check['positive_control'])}", None))
    parts.append((f"Negative control: {control_sentence(check['control'])}", None))
    power = (check["control"] or {}).get("power")
    if power:
        parts.append((f"Power of the rule, as the control moves towards the truth: {power_line(power)}.",
                      power_table(power)))
    return parts


# ------------------------------------------------------------------------------------------------- REPORT.md

def _markdown_header(results: dict) -> list[str]:
    env = results["environment"]
    return [
        "# bma-verify verification report", "",
        f"Tier **{results['tier']}**, seed {results['seed']}, package {results['package_version']}, "
        f"started {results['started']}, {results['seconds']:.1f} s.", "",
        f"Environment: Python {env['python']}, NumPy {env['numpy']}, SciPy {env['scipy']}, SymPy {env['sympy']}, "
        f"PyTorch {env['torch']} ({env.get('torch_threads')} torch threads), {env['machine']} × {env['cpu_count']} "
        f"CPUs, GPU: {env['gpu'] or 'none'}.", "",
        _MARKDOWN_INTRO, "",
        f"Claims: {summary_counts(results['claims'])}.", "",
        "## Summary", "", "| claim | verdict | findings | controls | checks |", "|---|---|---|---|---|",
    ]


def _markdown_summary_rows(claims: list[dict]) -> list[str]:
    md = prose_markdown
    lines = []
    for claim in claims:
        checks = ", ".join(f"{c['kind']} ({c['reading']}): {check_label(c, _owner(claim))}"
                           for c in claim["checks"]) or "none"
        findings = "<br>".join(md(finding_line(f)) for f in claim["findings"]) or "—"
        if _starts_beyond(claims, claim):
            lines.append(f"| **{BEYOND_TITLE}** | | | | |")
        lines.append(f"| [`{claim['id']}`](#{claim['id']}) | {md(verdict_label(claim))} | {findings} | "
                     f"{control_counts(claim)} | {checks} |")
    return lines


def _markdown_evidence(check: dict) -> list[str]:
    """A check's seeds, control (with its power curve), assumptions, threshold, derivation, measured values,
    tables, figures and instance."""
    md = prose_markdown
    lines = []
    for sentence, table in _runs_and_control(check):
        lines += ["", md(sentence)] + (_markdown_table(*table) if table else [])
    if check["assumptions"]:
        lines += ["", md("Assumptions (choices the paper leaves open): " + "; ".join(check["assumptions"]))]
    if check["threshold"] is not None:
        lines += ["", md(f"Threshold: {_fmt(check['threshold'])}")]
    if check["derivation"]:
        lines += ["", "Derivation:"]
        for caption, latex in check["derivation"]:
            lines += ["", f"- {md(caption)}", "", "  $$", f"  {latex}", "  $$"]
    measured = _flatten(check["measured"])
    if measured:
        lines += ["", "| measured | value |", "|---|---|"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in measured]
    for table in check["tables"]:
        lines += ["", f"**{md(table['title'])}**"] + _markdown_table(table["columns"], table["rows"])
    for fig in check["figures"]:
        lines += ["", f"![{fig}](figures/{fig})"]
    if check["instance"] is not None:
        lines += ["", "Instance (re-check with `bma-verify check --instance FILE`):", "", "```json",
                  json.dumps(check["instance"], indent=1), "```"]
    return lines


def _markdown_table(columns: list, rows: list) -> list[str]:
    md = prose_markdown
    return (["", "| " + " | ".join(md(str(c)) for c in columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(md(_fmt(v)) for v in row) + " |" for row in rows])


def _owner(claim: dict) -> str:
    return claim.get("owner", "paper")  # a results.json written before claims had owners holds only the paper's


def protocol_line(record: dict) -> str:
    """'Pre-registered protocol: run set fig2 (one decision, made with …), SHA-256 …, revision 1; …'."""
    others = ", ".join(record["decided_with"])
    revision = ("revisions not available (no docs/notes in this install)" if record["revisions"] is None
                else f"revision {record['revisions']}" + ("" if record["registered"] else
                                                           ", NOT listed in the notes' protocol revisions"))
    return (f"Pre-registered protocol: run set {record['run_set']} (one decision, made with {others}), SHA-256 "
            f"{record['sha256']}, {revision}; the report's training seeds are drawn from this hash.")


def _is_finding(check: dict) -> bool:
    """Does the check show a finding (a stronger reading that ran) rather than a verdict?"""
    return check["reading"] == "stronger" and check["verdict"] != "error"


#: The heading of the subsection that ends a claim's section where one of its statements fails (SPEC §4.1).
HOLDS_INSTEAD_TITLE = "What holds instead"


def holds_instead(claim: dict) -> list[dict]:
    """The repaired statements recorded by the claim's checks (``holds_instead``), in check order; a citing check's
    are shown where it ran, and a results.json written before the key existed has none."""
    return [repair for check in claim["checks"] if not check.get("cites")
            for repair in check.get("holds_instead") or []]


def _markdown_holds_instead(repairs: list[dict]) -> list[str]:
    md = prose_markdown
    lines = ["", f"### {HOLDS_INSTEAD_TITLE}"]
    for repair in repairs:
        lines += ["", f"**Instead of:** {md(repair['replaces'])}", "",
                  f"**Holds ({repair['status']}):** {md(repair['statement'])}"]
        if repair["evidence"]:
            lines += ["", "Evidence:", ""] + [f"- {md(sentence)}" for sentence in repair["evidence"]]
        if repair["boundary"]:
            lines += ["", f"Boundary: {md(repair['boundary'])}"]
        lines += [line for fig in repair["figures"] for line in ("", f"![{fig}](figures/{fig})")]
    return lines


def _markdown_claim(claim: dict) -> list[str]:
    md = prose_markdown
    lines = ["", f"## {claim['id']}", "", f"**Verdict: {md(verdict_label(claim))}**", "",
             f"*Paper:* {md(claim['paper'])}", "", f"*Statement checked:* {md(claim['statement'])}"]
    if claim.get("protocol"):
        lines += ["", md(protocol_line(claim["protocol"]))]
    if claim["findings"]:
        lines += ["", "Findings (statements of ours, not the paper's):", ""]
        lines += [f"- **{f['status']}**: {md(f['statement'])}" + (f" — {md(f['evidence'])}" if f["evidence"] else "")
                  for f in claim["findings"]]
    for check in claim["checks"]:
        word = "Finding" if _is_finding(check) else "Verdict"
        lines += ["", f"### {check['kind']} ({check['reading']}) — {md(check['description'])}", "",
                  f"{word} **{md(_check_verdict_text(check, _owner(claim)))}** in {check['seconds']:.2f} s. "
                  f"{md(check['summary'])}"]
        if not check.get("cites"):  # a citing check's evidence is shown where it ran
            lines += _markdown_evidence(check)
    repairs = holds_instead(claim)
    return lines + (_markdown_holds_instead(repairs) if repairs else [])


def render_markdown(results: dict) -> str:
    """REPORT.md: the header, the summary table, then one section per claim with its checks' evidence."""
    lines = _markdown_header(results) + _markdown_summary_rows(results["claims"])
    for claim in results["claims"]:
        if _starts_beyond(results["claims"], claim):
            lines += ["", f"# {BEYOND_TITLE}", "", BEYOND_TEXT]
        lines += _markdown_claim(claim)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- report.html

def display_png(path) -> bytes:
    """The copy of a figure embedded in report.html: the PNG reduced to 256 colours (median cut, no dithering).

    Heat maps and curves drawn from a colour map lose nothing visible, and the figures shrink about threefold, which
    keeps the self-contained report under 2 MiB; the full-colour PNG and the SVG stay in figures/.
    """
    with Image.open(path) as image:
        reduced = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    reduced.save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def _embedded_image(figures_dir, name: str) -> str:
    """An <img> whose PNG (:func:`display_png`) is embedded as a data URI, so report.html stands alone as one
    file."""
    e = html.escape
    path = None if figures_dir is None else Path(figures_dir) / name
    size = ""
    if path is not None and path.exists():
        data = base64.b64encode(display_png(path)).decode("ascii")
        source = f"data:image/png;base64,{data}"
        with Image.open(path) as image:  # an explicit size: the layout is final before the image decodes, so a
            size = f" width='{image.width}' height='{image.height}'"  # page opened at an #anchor stays put
    else:  # rendering from results alone (no figure files at hand): point at the report's figures/ folder
        source = f"figures/{e(name)}"
    vector = Path(name).with_suffix(".svg").name
    return (f"<figure id='{_anchor('figure', Path(name).stem)}'><img src='{source}' alt='{e(name)}'{size} "
            f"loading='eager' decoding='sync'><figcaption>"
            f"figures/{e(name)} (vector copy: figures/{e(vector)})</figcaption></figure>")


def _anchor(*parts) -> str:
    return html.escape("-".join(str(p) for p in parts).replace(" ", "-").replace(":", "-"))


def _html_header(results: dict) -> list[str]:
    e = html.escape
    env = results["environment"]
    return ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'><title>bma-verify report</title>",
            f"<style>{_CSS}</style></head><body>", "<h1>bma-verify verification report</h1>",
            f"<p>Tier <b>{e(results['tier'])}</b>, seed {results['seed']}, package {e(results['package_version'])}, "
            f"started {e(results['started'])}, {results['seconds']:.1f} s. Python {e(env['python'])}, NumPy "
            f"{e(str(env['numpy']))}, PyTorch {e(str(env['torch']))} ({e(str(env.get('torch_threads')))} threads), "
            f"GPU: {e(str(env['gpu'] or 'none'))}.</p>",
            _HTML_INTRO,
            f"<p>Claims: {e(summary_counts(results['claims']))}.</p>",
            "<nav><h2>Contents</h2><ol><li><a href='#summary'>Summary</a></li>" + "".join(
                f"<li><a href='#{_anchor(c['id'])}'>{e(c['id'])}</a></li>" for c in results["claims"]) + "</ol></nav>",
            "<h2 id='summary'>Summary</h2><table><tr><th>claim</th><th>verdict</th><th>findings</th>"
            "<th>controls</th><th>checks</th></tr>"]


def _html_summary_rows(claims: list[dict]) -> list[str]:
    e, h = html.escape, prose_html
    parts = []
    for claim in claims:
        checks = "<br>".join(
            f"<a href='#{_anchor(claim['id'], i, c['kind'])}'>{e(c['kind'])}</a> ({e(c['reading'])}): "
            f"<span class='{_css_class(check_label(c, _owner(claim)))}'>{e(check_label(c, _owner(claim)))}</span>"
            for i, c in enumerate(claim["checks"])) or "none"
        findings = "<br>".join(h(finding_line(f)) for f in claim["findings"]) or "—"
        if _starts_beyond(claims, claim):
            parts.append(f"<tr><th colspan='5'><a href='#beyond'>{e(BEYOND_TITLE)}</a></th></tr>")
        parts.append(f"<tr><td><a href='#{_anchor(claim['id'])}'>{e(claim['id'])}</a></td>"
                     f"<td class='{claim['verdict']}'>{h(verdict_label(claim))}</td><td>{findings}</td>"
                     f"<td>{e(control_counts(claim))}</td><td>{checks}</td></tr>")
    return parts


def _html_evidence(check: dict, figures_dir) -> list[str]:
    """The HTML twin of :func:`_markdown_evidence` (formulas as MathML, figures embedded)."""
    e, h = html.escape, prose_html
    parts = []
    for sentence, table in _runs_and_control(check):
        parts.append(f"<p>{h(sentence)}</p>" + (_html_table(*table) if table else ""))
    if check["assumptions"]:
        parts.append(f"<p>Assumptions (choices the paper leaves open): {h('; '.join(check['assumptions']))}</p>")
    if check["threshold"] is not None:
        parts.append(f"<p>Threshold: {h(_fmt(check['threshold']))}</p>")
    for caption, latex in check["derivation"]:
        parts.append(f"<p>{h(caption)}</p>{latex_to_mathml(latex)}")
    measured = _flatten(check["measured"])
    if measured:
        parts.append("<table><tr><th>measured</th><th>value</th></tr>" + "".join(
            f"<tr><td>{e(k)}</td><td>{e(_fmt(v))}</td></tr>" for k, v in measured) + "</table>")
    for table in check["tables"]:
        parts.append(f"<p><b>{h(table['title'])}</b></p>" + _html_table(table["columns"], table["rows"]))
    for fig in check["figures"]:
        parts.append(_embedded_image(figures_dir, fig))
    if check["instance"] is not None:
        parts.append(f"<p>Instance (re-check with <code>bma-verify check --instance FILE</code>):</p>"
                     f"<pre>{e(json.dumps(check['instance'], indent=1))}</pre>")
    return parts


def _html_table(columns: list, rows: list) -> str:
    h = prose_html
    return ("<table><tr>" + "".join(f"<th>{h(str(c))}</th>" for c in columns) + "</tr>" +
            "".join("<tr>" + "".join(f"<td>{h(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows) + "</table>")


def _html_holds_instead(repairs: list[dict], claim_id: str, figures_dir) -> list[str]:
    h = prose_html
    parts = [f"<h3 id='{_anchor(claim_id, 'holds-instead')}'>{html.escape(HOLDS_INSTEAD_TITLE)}</h3>"]
    for repair in repairs:
        parts += [f"<p><b>Instead of:</b> {h(repair['replaces'])}</p>",
                  f"<p><b>Holds ({html.escape(repair['status'])}):</b> {h(repair['statement'])}</p>"]
        if repair["evidence"]:
            parts.append("<p>Evidence:</p><ul>" + "".join(f"<li>{h(sentence)}</li>" for sentence in repair["evidence"])
                         + "</ul>")
        if repair["boundary"]:
            parts.append(f"<p>Boundary: {h(repair['boundary'])}</p>")
        parts += [_embedded_image(figures_dir, fig) for fig in repair["figures"]]
    return parts


def _html_claim(claim: dict, figures_dir) -> list[str]:
    e, h = html.escape, prose_html
    parts = [f"<h2 id='{_anchor(claim['id'])}'>{e(claim['id'])} — <span class='{claim['verdict']}'>"
             f"{h(verdict_label(claim))}</span></h2>", f"<p><i>Paper:</i> {h(claim['paper'])}</p>",
             f"<p><i>Statement checked:</i> {h(claim['statement'])}</p>"]
    if claim.get("protocol"):
        parts.append(f"<p>{h(protocol_line(claim['protocol']))}</p>")
    if claim["findings"]:
        parts.append("<p>Findings (statements of ours, not the paper's):</p><ul>" + "".join(
            f"<li><b>{e(f['status'])}</b>: {h(f['statement'])}" + (f" — {h(f['evidence'])}" if f["evidence"]
                                                                     else "") + "</li>"
            for f in claim["findings"]) + "</ul>")
    for i, check in enumerate(claim["checks"]):
        parts += [f"<h3 id='{_anchor(claim['id'], i, check['kind'])}'>{e(check['kind'])} ({e(check['reading'])})"
                  f" — {h(check['description'])}</h3>",
                  f"<p>{'Finding ' if _is_finding(check) else ''}"
                  f"<span class='{_css_class(check_label(check, _owner(claim)))}'>"
                  f"{h(_check_verdict_text(check, _owner(claim)))}</span> in "
                  f"{check['seconds']:.2f} s. {h(check['summary'])}</p>"]
        if not check.get("cites"):  # a citing check's evidence is shown where it ran
            parts += _html_evidence(check, figures_dir)
    repairs = holds_instead(claim)
    return parts + (_html_holds_instead(repairs, claim["id"], figures_dir) if repairs else [])


def render_html(results: dict, figures_dir=None) -> str:
    """One self-contained page: inline CSS, figures embedded (from ``figures_dir``), math rendered as MathML,
    a table of contents and an anchor per claim and per check."""
    parts = _html_header(results) + _html_summary_rows(results["claims"]) + ["</table>"]
    for claim in results["claims"]:
        if _starts_beyond(results["claims"], claim):
            parts += [f"<h1 id='beyond'>{html.escape(BEYOND_TITLE)}</h1>",
                      "<p>" + prose_html(BEYOND_TEXT).replace("`", "") + "</p>"]
        parts += _html_claim(claim, figures_dir)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
