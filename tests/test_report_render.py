"""Rendering a report: REPORT.md and the self-contained report.html (figures embedded, math as MathML)."""
import base64
import html
import io
import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
from latex2mathml.converter import convert
from PIL import Image

import bma_verify.reports.builder as builder
from bma_verify.reports import browser_check, render, render_math
from bma_verify.reports import render_evidence as evidence
from bma_verify.reports.regression import REFERENCE_DIR
from bma_verify.reports.core import CheckContext
from bma_verify.reports.registry import Check, Claim
from tests.report_stand_ins import beyond_registry, registry  # noqa: F401 (fixtures)
from tests.report_stand_ins import failing_check, passing_check, refuted_stronger_check, repairing_check


def test_rendering_the_reference_results_gives_the_committed_pages():
    # reference: REPORT.md and report.html as the report command wrote them from this results.json
    results = json.loads((REFERENCE_DIR / "results.json").read_text())
    assert render.render_markdown(results) == (REFERENCE_DIR / "REPORT.md").read_text()
    page = render.render_html(results, figures_dir=REFERENCE_DIR / "figures")
    assert page == (REFERENCE_DIR / "report.html").read_text()


def test_report_pages_embed_figures_and_render_math(registry, tmp_path):
    out = builder.build_report("quick", tmp_path / "rep", seed=3)
    md, page = (out / "REPORT.md").read_text(), (out / "report.html").read_text()
    assert "figures/dummy.png" in md and "figures/dummy.png" in page
    assert "FAIL" in md and "\\frac{a}{b}" in md and "http" not in page  # opens offline: no external resources
    # one self-contained page: the figure is embedded, the math rendered (no raw LaTeX left)
    assert base64.b64encode(render.display_png(out / "figures" / "dummy.png")).decode() in page
    assert "<mfrac>" in page and "\\frac" not in page
    assert "<nav>" in page and "id='good'" in page


def _summary_row(md: str, claim_id: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| [`{claim_id}`]"))


def test_a_refuted_conjecture_of_ours_reads_refuted_and_is_not_counted_as_a_fail(beyond_registry, tmp_path):
    # reference: docs/claims.md, "Whose claim" — the failing ext-* stand-in is a finding; the failing claim of the
    # paper under "Beyond the paper" (as footnote 1 is) is the one fail
    out = builder.build_report("quick", tmp_path / "rep")
    md, page = (out / "REPORT.md").read_text(), (out / "report.html").read_text()
    counts = "Claims: 1 pass, 1 fail, 0 inconclusive, 0 error, 1 refuted (ours)."
    assert counts in md and counts in page
    ours = _summary_row(md, "ext-stand-in")
    assert "| REFUTED (ours) |" in ours and "monte-carlo (as-stated): refuted" in ours and "FAIL" not in ours
    assert "| FAIL |" in _summary_row(md, "footnote-stand-in")
    assert "<td class='refuted'>REFUTED (ours)</td>" in page and "<td class='fail'>FAIL</td>" in page
    assert "<span class='refuted'>refuted</span>" in page


def test_a_refuted_stronger_reading_inside_a_passing_claim_reads_as_a_finding(tmp_path):
    # reference: a PASS row whose stronger check failed shows "refuted" (a finding), never a red "fail"
    claim = builder.run_claims([Claim("c", "p", "s", (
        Check("exact", passing_check, "as stated"),
        Check("exact", refuted_stronger_check, "our sharper bound", reading="stronger")))],
        CheckContext(figures_dir=tmp_path))[0]
    results = {"tier": "quick", "seed": 0, "package_version": "x", "started": "t", "seconds": 0.0,
               "environment": builder.environment(), "claims": [claim]}
    md, page = render.render_markdown(results), render.render_html(results)
    row = _summary_row(md, "c")
    assert "| PASS |" in row and "exact (stronger): refuted" in row and ": fail" not in row
    assert "Finding **refuted** in" in md and "Verdict **pass** in" in md
    assert "<span class='fail'>" not in page and "Finding <span class='refuted'>refuted</span>" in page
    assert "<td class='pass'>PASS</td>" in page


def test_a_formula_the_converter_cannot_read_stays_readable_as_source():
    assert render.latex_to_mathml(r"\frac{a}{b}").startswith("<math")
    assert render.latex_to_mathml(r"\frac{a}{") == "<pre class='raw-latex'>\\frac{a}{</pre>"


@pytest.mark.slow
def test_report_html_renders_in_a_headless_browser(registry, tmp_path):
    # Reference: what a real browser lays out (reports.browser_check); skipped where no chromium is installed.
    if browser_check.find_browser() is None:
        pytest.skip("no headless browser here (apt-get install chromium)")
    out = builder.build_report("quick", tmp_path / "rep", claims=["good"])
    seen = browser_check.inspect(out / "report.html")
    assert seen["images"] == 1 and seen["formulas"] == 1 and not browser_check.problems(seen), seen
    assert seen["window_width"] == browser_check.WINDOW[0]
    page = (out / "report.html").read_text()
    at_anchor = browser_check.inspect(out / "report.html", anchor=browser_check.figure_anchor(page))
    assert at_anchor["anchor"] and not browser_check.problems(at_anchor), at_anchor
    # negative control: raw LaTeX, an image that cannot load and a page capped at 64em must all be reported
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace("<math", "<p>\\frac{a}{b}</p><math").replace("data:image/png;base64,",
                                                                            "data:image/png;base64,AAAA")
                   .replace("body{", "body{max-width:64em;", 1))
    found = browser_check.problems(browser_check.inspect(bad))
    assert any("raw LaTeX" in f for f in found) and any("did not load" in f for f in found), found
    assert any("of a 1400 px window" in f for f in found), found


def test_embedded_figures_keep_their_size_and_colours_closely(tmp_path):
    # reference: the full-colour PNG matplotlib wrote (a viridis heat map with text); the embedded copy has the
    # same pixels' dimensions, at most 256 colours, each pixel within a small distance of the original, and fewer bytes
    fig, ax = plt.subplots(figsize=(4, 3))
    image = ax.imshow(np.random.default_rng(0).random((10, 12)), cmap="viridis")
    fig.colorbar(image, ax=ax, label="mass")
    ax.set_title("a heat map")
    path = tmp_path / "h.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    small = render.display_png(path)
    original = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    copy = Image.open(io.BytesIO(small))
    assert copy.mode == "P" and len(copy.getcolors(256)) <= 256
    copy = np.asarray(copy.convert("RGB"), dtype=float)
    assert copy.shape == original.shape and len(small) < path.stat().st_size
    error = np.abs(copy - original).max(axis=-1)  # per pixel, 0-255 scale
    # measured on the reference figures: mean 0.03-0.4, at most 0.4% of pixels off by more than 20
    assert error.mean() < 1.0 and (error > 32).mean() < 0.01


def test_reference_html_stands_alone_under_2_mib():
    page = REFERENCE_DIR / "report.html"
    assert page.stat().st_size < 2 * 1024 * 1024
    assert "src='figures/" not in page.read_text()  # every figure embedded


# ------------------------------------------------------------------ controls, power curves and seeds as sentences

CONTROL = {"description": "BMA reading only the last 5 of 10 examples", "rejected": True,
           "measured": {"examples": 5, "gap_to_bma": 0.0328582, "parent_accuracy": [0.435, 0.52, 0.61, 0.668],
                        "rule": {"gap_to_bma": "fail", "accuracy_shortfall": "fail", "increasing": "pass"},
                        "identities_failed": [], "extra": {"deep": 1.5, "deeper": True}}}
POWER = [{"x": m, "label": f"BMA reading {m} of 5", "rejected": m <= 3, "value": 0.1 / m} for m in range(1, 6)]
SEEDS = {"n": 3, "training_seeds": [0, 1, 2], "count_rule": "pass when at least 2 of 3 seeds meet the rule",
         "counts": {"meet": 2, "miss": 1, "undecided": 0, "not_converged": 0},
         "metrics": {"gap_to_bma": {"median": 0.0123, "min": 0.0101, "max": 0.015, "values": [0.0101, 0.0123, 0.015]}}}


def test_a_control_reads_as_one_sentence_with_a_few_key_values():
    # reference: written out by hand from CONTROL (4 of its 6 named values in order; the empty list names nothing)
    sentence = evidence.control_sentence(CONTROL)
    assert sentence == ("BMA reading only the last 5 of 10 examples: the rule saw examples 5, gap to bma 0.0329, "
                        "parent accuracy: 4 values, 0.435 … 0.668, rule: fail for gap to bma, accuracy shortfall; "
                        "pass for increasing (and 2 more values in results.json); rejected.")
    assert evidence.control_sentence({**CONTROL, "rejected": False}).endswith(
        "NOT rejected (the check does not discriminate).")
    assert evidence.control_sentence({"description": "d", "measured": {}, "rejected": True}) == "d: rejected."
    assert evidence.control_sentence(None) == "none (so this check cannot pass)."


def test_a_power_curve_says_where_the_rule_stops_rejecting():
    # reference: POWER rejects m = 1, 2, 3 and not 4, 5 (built that way above)
    assert evidence.power_line(POWER) == "rejects BMA reading 1 of 5 … BMA reading 3 of 5; stops rejecting at " \
                                         "BMA reading 4 of 5"
    assert evidence.power_line([{**p, "rejected": True} for p in POWER]).startswith("rejects every point")
    assert evidence.power_line([{**p, "rejected": False} for p in POWER]).startswith("rejects none")
    mixed = [{**p, "rejected": p["x"] in (1, 4)} for p in POWER]
    assert evidence.power_line(mixed) == ("rejects BMA reading 1 of 5, BMA reading 4 of 5; does not reject "
                                          "BMA reading 2 of 5, BMA reading 3 of 5, BMA reading 5 of 5")
    columns, rows = evidence.power_table(POWER)
    assert columns == ["point", "1", "2", "3", "4", "5"]
    assert rows == [["rejected", "yes", "yes", "yes", "no", "no"], ["value", "0.1", "0.05", "0.0333", "0.025", "0.02"]]


def _results_with(check_fields: dict, claim_fields: dict | None = None) -> dict:
    check = {"kind": "model", "reading": "reproduction", "description": "trained run", "verdict": "pass",
             "reason": "", "seconds": 1.0, "summary": "s", "control": {**CONTROL, "power": POWER},
             "assumptions": [], "threshold": None, "derivation": [], "measured": {"gap": 0.01}, "tables": [],
             "figures": [], "instance": None, "findings": [], "seeds": SEEDS, **check_fields}
    claim = {"id": "c", "paper": "p", "statement": "s", "verdict": "pass", "reasons": [], "assumptions": [],
             "findings": [], "checks": [check], **(claim_fields or {})}
    return {"tier": "quick", "seed": 0, "package_version": "x", "started": "t", "seconds": 0.0,
            "environment": builder.environment(), "claims": [claim]}


def test_pages_show_seeds_and_the_power_curve_compactly_and_no_dict_dumps():
    # reference: SEEDS and POWER written out by hand
    results = _results_with({})
    md, page = render.render_markdown(results), render.render_html(results)
    line = ("Seeds: 3 seeds (training seeds 0, 1, 2): 2 meet, 1 miss, 0 undecided, 0 not converged — pass when at "
            "least 2 of 3 seeds meet the rule.")
    assert line in md and html.escape(line, quote=False) in page
    assert "| metric | median | range over seeds |" in md and "| gap_to_bma | 0.0123 | 0.0101 to 0.015 |" in md
    assert "<td>gap_to_bma</td><td>0.0123</td><td>0.0101 to 0.015</td>" in page
    power = "stops rejecting at BMA reading 4 of 5."
    assert power in md and power in page and "| rejected | yes | yes | yes | no | no |" in md
    for text in (md, page):  # the control is a sentence: no "measured {…}" dump
        assert "measured {" not in text and "{examples" not in text and "rejected." in text
    # a check that does not train (seeds None) and a control without a power curve show neither
    plain = render.render_markdown(_results_with({"seeds": None, "control": CONTROL}))
    assert "Seeds:" not in plain and "Power of the rule" not in plain and "Negative control: BMA reading" in plain


# ------------------------------------------------------------------------------------------------ prose math

def test_prose_math_reads_as_unicode_in_markdown_and_as_scripts_in_html():
    # reference: the example and hand-written renderings
    text = "I(x_h; x_{h'}) ≤ α I(x_h; x_pa(h)), e^{−β}, x_{S∩T}; D'Angelo's max_abs_error and `x_{h'}`"
    assert render_math.prose_markdown(text) == (
        "I(x_h; x_h′) ≤ α I(x_h; x_pa(h)), e^(−β), x_(S∩T); D'Angelo's max_abs_error and `x_{h'}`")
    assert render_math.prose_html(text) == (
        "I(x<sub>h</sub>; x<sub>h′</sub>) ≤ α I(x<sub>h</sub>; x<sub>pa</sub>(h)), e<sup>−β</sup>, "
        "x<sub>S∩T</sub>; D'Angelo's max_abs_error and `x_{h'}`")
    assert render_math.prose_html("softmax_{h'<h} and e_{x^k_{h'}}") == (
        "softmax<sub>h′&lt;h</sub> and e<sub>x<sup>k</sup><sub>h′</sub></sub>")
    results = _results_with({}, {"statement": "for h' < h, I(x_h; x_{h'}) ≤ α I(x_h; x_pa)"})
    assert "I(x_h; x_h′)" in render.render_markdown(results)
    page = render.render_html(results)
    assert "I(x<sub>h</sub>; x<sub>h′</sub>)" in page and browser_check.static_problems(page) == []


# ------------------------------------------------------------------------------------------- wide formulas

def _inner(latex: str) -> str:
    return re.sub(r"^<math[^>]*><mrow>|</mrow></math>$", "", convert(latex))


def test_a_wide_sum_is_cut_at_its_signs_into_pieces_that_read_as_the_formula():
    # reference: latex2mathml on the uncut formula; the pieces' MathML, one after another, is the same
    wide = " + ".join(f"a_{{{i}}} b_{{{i}}}" for i in range(40))
    pieces = render_math.formula_pieces(wide)
    assert len(pieces) == 40 and pieces[1] == "+ a_{1} b_{1}"
    assert "".join(_inner(p) for p in pieces) == _inner(wide)
    assert render_math.formula_pieces(r"\frac{a}{b} = c") == [r"\frac{a}{b} = c"]  # one that fits stays whole
    page = render_math.latex_to_mathml(wide)
    assert page.startswith("<div class='formula'>") and page.count("<math") == 40


def test_wide_fractions_and_matrices_are_opened_into_linear_forms():
    # reference: the same symbols in the same order (spaces aside), written linearly by hand
    num, den = (" + ".join(f"{v}_{{{i}}}" for i in range(60)) for v in "ab")
    pieces = render_math.formula_pieces(rf"\frac{{{num}}}{{{den}}}")
    assert "".join(pieces).replace(" ", "") == f"({num})/({den})".replace(" ", "")
    cells = [[f"x_{{{i}{j}}} + y_{{{i}{j}}} + z" for j in range(8)] for i in range(2)]
    matrix = r"\left[\begin{matrix}" + r"\\".join(" & ".join(row) for row in cells) + r"\end{matrix}\right]"
    flat = "".join(render_math.formula_pieces(matrix)).replace(" ", "")
    assert flat == ("[" + ";".join(",".join(row) for row in cells) + "]").replace(" ", "")


def test_every_reference_formula_piece_fits_and_converts():
    # reference: the derivations of the committed results.json; each piece's estimated width is at most about
    # WRAP_WIDTH (a group whose content fits keeps its two delimiters), and nothing falls back to raw source
    results = json.loads((REFERENCE_DIR / "results.json").read_text())
    formulas = [latex for claim in results["claims"] for check in claim["checks"] for _, latex in check["derivation"]]
    assert any(len(render_math.formula_pieces(f)) > 1 for f in formulas)
    for latex in formulas:
        for piece in render_math.formula_pieces(latex):
            assert render_math.formula_width(piece) <= render_math.WRAP_WIDTH * 1.1, piece
        assert "raw-latex" not in render_math.latex_to_mathml(latex)


# ------------------------------------------------------------------------- what the browser check checks

def test_the_reference_page_passes_the_static_checks_and_broken_pages_do_not():
    # reference: the page rendered from the committed results; negative controls: the same page with each
    # property the check guards broken by hand (what the issue saw: a 64em cap, lazy unsized images, an uncut
    # wide formula, raw LaTeX in prose, a dangling link)
    results = json.loads((REFERENCE_DIR / "results.json").read_text())
    page = render.render_html(results, figures_dir=REFERENCE_DIR / "figures")
    assert browser_check.static_problems(page) == []
    wide = " + ".join(f"a_{{{i}}} b_{{{i}}}" for i in range(40))
    broken = {
        "max-width 64em": page.replace("body{", "body{max-width:64em;", 1),
        "explicit width and height": re.sub(r" width='\d+' height='\d+'", "", page, count=1),
        "loaded lazily": page.replace("loading='eager'", "loading='lazy'", 1),
        "not cut to wrap": page.replace("</body>", f"{convert(wide)}</body>"),
        "raw LaTeX": page.replace("</body>", "<p>I(x_h; x_{h'})</p></body>"),
        "missing anchors": page.replace("</body>", "<a href='#nowhere'>x</a></body>"),
    }
    for expected, bad in broken.items():
        found = browser_check.static_problems(bad)
        assert len(found) == 1 and expected in found[0], (expected, found)


def test_images_carry_their_pixel_size_and_load_eagerly(registry, tmp_path):
    # reference: the PNG's own size as PIL reads it
    out = builder.build_report("quick", tmp_path / "rep", seed=3)
    page = (out / "report.html").read_text()
    width, height = Image.open(out / "figures" / "dummy.png").size
    assert f"width='{width}' height='{height}' loading='eager'" in page


def test_browser_findings_name_the_width_the_anchor_and_overflowing_formulas():
    # reference: hand-made measurements of a page as the issue saw it (60% of a 1400 px window, a blank image
    # at an anchor) and of a page that renders well
    good = {"images": 2, "broken_images": [], "formulas": 3, "empty_formulas": 0, "wide_formulas": 0,
            "raw_latex": 0, "dangling_links": [], "window_width": 1400, "body_width": 1330, "page_width": 1400,
            "anchor": "c-0-model", "anchor_in_view": True}
    assert browser_check.problems(good) == []
    found = browser_check.problems({**good, "body_width": 840, "broken_images": ["a.png"], "wide_formulas": 2,
                                    "anchor_in_view": False, "page_width": 1600})
    assert any("uses 60% of a 1400 px window" in f for f in found)
    assert any("did not load or show (opened at #c-0-model)" in f for f in found)
    assert any("2 of 3 formulas overflow" in f for f in found) and any("scrolls sideways" in f for f in found)
    assert any("target is not in view" in f for f in found)
    page = "<h2 id='a'>a</h2><img src='x' alt='1'><h3 id='b'>b</h3><p>text</p><img src='y' alt='2'><h3 id='c'></h3>"
    assert browser_check.figure_anchor(page) == "b"  # no figure anchors: the last id above the last image
    figures = "<figure id='f1'><img alt='1'></figure><h3 id='b'>b</h3><figure id='f2'><img alt='2'></figure>"
    assert browser_check.figure_anchor(figures) == "f2"


def test_a_failing_claim_ends_with_what_holds_instead_built_from_its_record(tmp_path):
    # the subsection is written from results.json's holds_instead (the record, not the check's code): its
    # statement, status, evidence, boundary and figure follow the last check; a claim without one has none
    claims = builder.run_claims([
        Claim("c", "p", "s", (Check("exact", failing_check, "as stated"),
                              Check("exact", repairing_check, "the repair", reading="stronger"))),
        Claim("d", "p", "s", (Check("exact", failing_check, "as stated"),))], CheckContext(figures_dir=tmp_path))
    record = claims[0]["checks"][1]["holds_instead"][0]
    record["statement"] = "the bound under a stationary μ₀ (from the record)"
    results = {"tier": "quick", "seed": 0, "package_version": "x", "started": "t", "seconds": 0.0,
               "environment": builder.environment(), "claims": claims}
    md, page = render.render_markdown(results), render.render_html(results, figures_dir=tmp_path)
    section_c, section_d = md.split("\n## c\n")[1].split("\n## d\n")
    tail = section_c.split("### What holds instead")[1]
    assert section_c.index("### exact (stronger)") < section_c.index("### What holds instead")
    for text in ("**Instead of:** the paper's bound for every μ₀", "**Holds (proved):** the bound under a stationary "
                 "μ₀ (from the record)", "- step 1 checked at 12 points", "Boundary: fails from TV 0.2 on",
                 "![dummy.png](figures/dummy.png)"):
        assert text in tail
    assert "What holds instead" not in section_d
    assert page.count("What holds instead</h3>") == 1 and "<b>Holds (proved):</b>" in page
    assert "<li>sweep: 0 of 40 fail</li>" in page


def test_a_repair_status_other_than_proved_or_observed_is_rejected():
    from bma_verify.reports.core import HoldsInstead
    with pytest.raises(ValueError, match="status"):
        HoldsInstead("a", "b", "holds")
