"""Open a report.html in a real headless browser and check that it renders as a reader would see it.

Usage::

    python -m bma_verify.reports.browser_check reports/latest/report.html     # needs chromium (apt-get install chromium)

Checks, in the page as the browser laid it out: every image has loaded (``complete`` and a natural width > 0),
every formula is a rendered MathML element with a non-empty box, no raw LaTeX (``\\frac``, ``\\sum``, ...) is left in
the visible text, and every in-page link points at an element that exists. Exit 0 when all hold, 1 otherwise
(printing what failed), 2 when no browser is found.

How: a copy of the page gets a small script appended that measures all this after load and writes the result into
the DOM; ``chromium --headless --dump-dom`` prints that DOM. The report itself carries no script.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MARKER = "bma-verify-browser-check:"

_PROBE = """<script>
window.addEventListener('load', function () {
  var images = Array.from(document.images);
  var broken = images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).map(function (i) {
    return i.alt; });
  var maths = Array.from(document.getElementsByTagName('math'));
  var empty = maths.filter(function (m) { var r = m.getBoundingClientRect(); return !(r.width > 0 && r.height > 0);
    }).length;
  var text = document.body.innerText;
  var raw = (text.match(/\\\\(frac|sum|log|mathrm|left|right|sqrt|operatorname)\\b/g) || []).length;
  var links = Array.from(document.querySelectorAll("a[href^='#']")).map(function (a) {
    return a.getAttribute('href').slice(1); });
  var dangling = links.filter(function (id) { return !document.getElementById(id); });
  var pre = document.createElement('pre');
  pre.id = 'browser-check';
  pre.textContent = 'MARKER' + JSON.stringify({images: images.length, broken_images: broken,
    formulas: maths.length, empty_formulas: empty, raw_latex: raw, links: links.length, dangling_links: dangling,
    mathml_supported: maths.length === 0 || maths[0].getBoundingClientRect().height > 0});
  document.body.appendChild(pre);
});
</script>"""


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def inspect(report: Path, browser: str | None = None, timeout: float = 120.0) -> dict:
    """What the browser saw (counts and lists, see the module docstring). Raises ValueError without a browser."""
    report = Path(report)
    if not report.is_file():
        raise ValueError(f"report {report} does not exist; build one with `bma-verify report`")
    browser = browser or find_browser()
    if browser is None:
        raise ValueError("no headless browser found (tried " + ", ".join(BROWSERS) + "); apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / report.name
        text = report.read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", _PROBE.replace("MARKER", MARKER) + "</body>"), encoding="utf-8")
        # figures/ next to the report, for a page rendered without embedded images
        if (report.parent / "figures").is_dir():
            shutil.copytree(report.parent / "figures", Path(tmp) / "figures")
        out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                              "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=timeout)
    tag = f'<pre id="browser-check">{MARKER}'  # the element the probe wrote (the probe's source names MARKER too)
    for line in out.stdout.splitlines():
        if tag in line:
            start = line.index(tag) + len(tag)
            return json.loads(line[start:].split("</pre>")[0].replace("&quot;", '"').replace("&amp;", "&"))
    raise RuntimeError(f"the browser printed no result (exit {out.returncode}): {out.stderr[-500:]}")


def problems(seen: dict) -> list[str]:
    """What is wrong with a page, from :func:`inspect`'s result (empty when it renders as it should)."""
    found = []
    if seen["broken_images"]:
        found.append(f"{len(seen['broken_images'])} of {seen['images']} images did not load: {seen['broken_images']}")
    if seen["empty_formulas"]:
        found.append(f"{seen['empty_formulas']} of {seen['formulas']} formulas rendered empty")
    if seen["raw_latex"]:
        found.append(f"{seen['raw_latex']} raw LaTeX commands left in the visible text")
    if seen["dangling_links"]:
        found.append(f"in-page links to missing anchors: {seen['dangling_links']}")
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m bma_verify.reports.browser_check REPORT.html", file=sys.stderr)
        return 2
    try:
        seen = inspect(Path(argv[0]))
    except ValueError as exc:
        print(f"browser_check: error: {exc}", file=sys.stderr)
        return 2
    found = problems(seen)
    print(f"{argv[0]}: {seen['images']} images, {seen['formulas']} formulas, {seen['links']} in-page links: "
          + ("renders as it should" if not found else "; ".join(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
