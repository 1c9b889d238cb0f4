"""Rendering a report: REPORT.md and the self-contained report.html (figures embedded, math as MathML)."""
import base64
import io
import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

import bma_verify.reports.builder as builder
from bma_verify.reports import browser_check, render
from bma_verify.reports.regression import REFERENCE_DIR
from bma_verify.reports.core import CheckContext
from bma_verify.reports.registry import Check, Claim
from tests.report_stand_ins import beyond_registry, registry  # noqa: F401 (fixtures)
from tests.report_stand_ins import passing_check, refuted_stronger_check


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
    # negative control: raw LaTeX and an image that cannot load must both be reported
    page = (out / "report.html").read_text()
    bad = tmp_path / "bad.html"
    bad.write_text(page.replace("<math", "<p>\\frac{a}{b}</p><math").replace("data:image/png;base64,",
                                                                            "data:image/png;base64,AAAA"))
    found = browser_check.problems(browser_check.inspect(bad))
    assert any("raw LaTeX" in f for f in found) and any("did not load" in f for f in found), found


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
