"""Check that a report.html renders as a reader would see it: statically (parsing the page) and in a real
headless browser when one is installed.

Usage::

    python -m bma_verify.reports.browser_check reports/latest/report.html     # the browser part needs chromium

Static checks (:func:`static_problems`, no browser needed): every image has an explicit size and is not loaded
lazily (a page opened at an ``#anchor`` then lays out once, with every image in place); the page is not capped
by a ``max-width`` (it uses the window's width); no formula is wider than :data:`FORMULA_WIDTH` glyphs (wide ones
are cut into pieces that wrap); no raw LaTeX (``\\frac``, ``x_{h'}``) is left in the visible text; every in-page
link points at an element that exists.

Browser checks (:func:`inspect`, :func:`problems`), in a :data:`WINDOW` px wide window, once as the page opens
and once opened at the anchor of its last figure: every image has loaded and has a non-empty box, and those in
view have decoded; every formula is a rendered MathML element with a non-empty box that does not overflow; the page
uses at least :data:`WIDTH_SHARE` of the window's width and does not scroll sideways; at the anchor, the target is in
view; no raw LaTeX is visible; no in-page link dangles.

Exit 0 when all hold, 1 otherwise (printing what failed), 2 when no browser is found (after the static checks).
How: a copy of the page gets a small script appended that measures all this after load and writes the result into
the DOM; ``chromium --headless --dump-dom`` prints that DOM. The report itself carries no script.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

BROWSERS = ("chromium", "chromium-headless-shell", "chromium-browser", "google-chrome", "google-chrome-stable")
MARKER = "bma-verify-browser-check:"
#: The window the browser check lays the page out in (px), and the least share of its width the page must use.
WINDOW = (1400, 1000)
WIDTH_SHARE = 0.9
#: The widest formula piece the static check accepts, in glyphs (a fraction counts its wider part, a script 0.7):
#: about what a 1000 px column holds at the report's font size.
FORMULA_WIDTH = 100
#: Raw LaTeX a reader should never see: commands, and braced sub- or superscripts.
RAW_LATEX = re.compile(r"\\(?:frac|sum|log|mathrm|left|right|sqrt|operatorname)\b|[_^]\{")

_PROBE = """<script>
window.addEventListener('load', function () {
  var images = Array.from(document.images);
  var inView = images.filter(function (i) { var r = i.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight; });
  // headless browsers decode only what is on screen: the images in view must decode (within 5 s)
  Promise.all(inView.map(function (i) { return Promise.race([i.decode().then(function () { return null; },
      function () { return i.alt; }), new Promise(function (done) { setTimeout(function () { done(i.alt); }, 5000);
      })]); })).then(function (undecoded) {
    var broken = images.filter(function (i) { var r = i.getBoundingClientRect();
      return !(i.complete && i.naturalWidth > 0 && r.width > 0 && r.height > 0); }).map(function (i) {
      return i.alt; }).concat(undecoded.filter(function (a) { return a !== null; }));
    var maths = Array.from(document.getElementsByTagName('math'));
    var empty = maths.filter(function (m) { var r = m.getBoundingClientRect(); return !(r.width > 0 && r.height > 0);
      }).length;
    var wide = maths.filter(function (m) { return m.getBoundingClientRect().right > window.innerWidth + 1 ||
      m.scrollWidth > m.clientWidth + 1; }).length;
    var text = document.body.innerText;
    var raw = (text.match(/RAW_LATEX/g) || []).length;
    var links = Array.from(document.querySelectorAll("a[href^='#']")).map(function (a) {
      return a.getAttribute('href').slice(1); });
    var dangling = links.filter(function (id) { return !document.getElementById(id); });
    var target = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
    var top = target ? target.getBoundingClientRect().top : 0;
    var pre = document.createElement('pre');
    pre.id = 'browser-check';
    pre.textContent = 'MARKER' + JSON.stringify({images: images.length, broken_images: Array.from(new Set(broken)),
      in_view: inView.length, formulas: maths.length, empty_formulas: empty, wide_formulas: wide, raw_latex: raw,
      links: links.length,
      dangling_links: dangling, window_width: window.innerWidth,
      body_width: document.body.getBoundingClientRect().width, page_width: document.documentElement.scrollWidth,
      anchor: location.hash.slice(1), anchor_in_view: !target || (top > -2 && top < window.innerHeight),
      mathml_supported: maths.length === 0 || maths[0].getBoundingClientRect().height > 0});
    document.body.appendChild(pre);
  });
});
</script>"""


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _probe() -> str:
    pattern = RAW_LATEX.pattern.replace("/", "\\/")
    return _PROBE.replace("MARKER", MARKER).replace("RAW_LATEX", pattern)


def inspect(report: Path, browser: str | None = None, timeout: float = 120.0, anchor: str | None = None) -> dict:
    """What the browser saw, the page opened at ``#anchor`` when given (counts and lists, see the module
    docstring). Raises ValueError without a browser or a report."""
    report = Path(report)
    if not report.is_file():
        raise ValueError(f"report {report} does not exist; build one with `bma-verify report`")
    browser = browser or find_browser()
    if browser is None:
        raise ValueError("no headless browser found (tried " + ", ".join(BROWSERS) + "); apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / report.name
        text = report.read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", _probe() + "</body>"), encoding="utf-8")
        # figures/ next to the report, for a page rendered without embedded images
        if (report.parent / "figures").is_dir():
            shutil.copytree(report.parent / "figures", Path(tmp) / "figures")
        url = page.as_uri() + (f"#{anchor}" if anchor else "")
        out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                              f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars",
                              "--virtual-time-budget=10000", "--dump-dom", url],
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
    where = f" (opened at #{seen['anchor']})" if seen.get("anchor") else ""
    if seen["broken_images"]:
        found.append(f"{len(seen['broken_images'])} of {seen['images']} images did not load or show{where}: "
                     f"{seen['broken_images']}")
    if seen["empty_formulas"]:
        found.append(f"{seen['empty_formulas']} of {seen['formulas']} formulas rendered empty")
    if seen.get("wide_formulas"):
        found.append(f"{seen['wide_formulas']} of {seen['formulas']} formulas overflow their box (scroll bars)")
    if seen["raw_latex"]:
        found.append(f"{seen['raw_latex']} raw LaTeX commands left in the visible text")
    if seen["dangling_links"]:
        found.append(f"in-page links to missing anchors: {seen['dangling_links']}")
    if "body_width" in seen and seen["body_width"] < WIDTH_SHARE * seen["window_width"]:
        found.append(f"the page uses {seen['body_width'] / seen['window_width']:.0%} of a {seen['window_width']} px "
                     f"window (at least {WIDTH_SHARE:.0%} expected)")
    if seen.get("page_width", 0) > seen.get("window_width", 0) + 1:
        found.append(f"the page scrolls sideways ({seen['page_width']} px wide in a {seen['window_width']} px window)")
    if not seen.get("anchor_in_view", True):
        found.append(f"opened at #{seen['anchor']}, its target is not in view")
    return found


# ------------------------------------------------------------------------------------ static checks (no browser)

class _Page(HTMLParser):
    """What the static checks read from a page: its images, ids, in-page links, CSS, visible text and formulas
    (each ``<math>`` as a tree of (tag, children) with text leaves)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.images, self.ids, self.links, self.css, self.text, self.formulas = [], [], [], [], [], []
        self.last_id_before_image, self.figure_ids = None, []
        self._stack, self._skip = [], 0  # open MathML elements; depth inside <style>/<script>/<math>

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "figure" and "id" in attrs:
            self.figure_ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs)
            self.last_id_before_image = self.ids[-1] if self.ids else None
        elif tag == "a" and (attrs.get("href") or "").startswith("#"):
            self.links.append(attrs["href"][1:])
        if tag in ("style", "script") or tag == "math" or self._stack:
            self._skip += tag in ("style", "script")
            node = (tag, [])
            if self._stack:
                self._stack[-1][1].append(node)
            elif tag == "math":
                self.formulas.append(node)
            if tag != "style" and tag != "script":
                self._stack.append(node)

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1
        elif self._stack and self._stack[-1][0] == tag:
            self._stack.pop()

    def handle_data(self, data):
        if self._stack:
            self._stack[-1][1].append(data)
        elif self.lasttag == "style" and self._skip:
            self.css.append(data)
        elif not self._skip:
            self.text.append(data)


def _formula_width(node) -> float:
    """Glyphs across a MathML tree: a fraction (or a stack) its wider part, a script 0.7 of its width."""
    if isinstance(node, str):
        return len(node.strip())
    tag, children = node
    elements = [c for c in children if not isinstance(c, str)] if tag != "mi" else children
    widths = [_formula_width(c) for c in (elements if tag in ("mfrac", "munder", "mover", "munderover", "mtable",
                                                             "msub", "msup", "msubsup") else children)]
    if tag in ("mfrac", "munder", "mover", "munderover"):
        return max(widths, default=0.0)
    if tag in ("msub", "msup", "msubsup"):
        return (widths[0] + 0.7 * max(widths[1:], default=0.0)) if widths else 0.0
    if tag == "mtable":  # rows: mtr > mtd; the widest row
        return max(widths, default=0.0)
    if tag in ("mo", "mtext"):
        return sum(widths) + 0.5  # operator spacing
    return sum(widths)


def figure_anchor(page: str) -> str | None:
    """The anchor of the page's last figure (else the last id above its last image): a link deep into the page
    that lands on an image."""
    parsed = _Page()
    parsed.feed(page)
    return parsed.figure_ids[-1] if parsed.figure_ids else parsed.last_id_before_image


def static_problems(page: str) -> list[str]:
    """What is wrong with a page that its HTML alone shows (empty when none); see the module docstring."""
    parsed = _Page()
    parsed.feed(page)
    found = []
    unsized = [i.get("alt") for i in parsed.images if not (i.get("width") or "").isdigit()
               or not (i.get("height") or "").isdigit()]
    if unsized:
        found.append(f"{len(unsized)} of {len(parsed.images)} images without an explicit width and height, e.g. "
                     f"{unsized[:3]}")
    lazy = [i.get("alt") for i in parsed.images if i.get("loading") == "lazy"]
    if lazy:
        found.append(f"{len(lazy)} images loaded lazily (blank when the page opens at an anchor): {lazy}")
    capped = re.search(r"body\s*\{[^}]*max-width\s*:\s*([^;}]+)", "".join(parsed.css))
    if capped and capped.group(1).strip() not in ("none", "100%"):
        found.append(f"the page is capped at max-width {capped.group(1).strip()} (it should use the window's width)")
    wide = [round(w) for w in map(_formula_width, parsed.formulas) if w > FORMULA_WIDTH]
    if wide:
        found.append(f"{len(wide)} of {len(parsed.formulas)} formulas wider than {FORMULA_WIDTH} glyphs, not cut to "
                     f"wrap: {wide[:5]}")
    raw = RAW_LATEX.findall("".join(parsed.text))
    if raw:
        found.append(f"{len(raw)} raw LaTeX commands left in the visible text: {sorted(set(raw))}")
    dangling = sorted(set(parsed.links) - set(parsed.ids))
    if dangling:
        found.append(f"in-page links to missing anchors: {dangling}")
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m bma_verify.reports.browser_check REPORT.html", file=sys.stderr)
        return 2
    report = Path(argv[0])
    if not report.is_file():
        print(f"browser_check: error: report {report} does not exist; build one with `bma-verify report`",
              file=sys.stderr)
        return 2
    page = report.read_text(encoding="utf-8")
    found = static_problems(page)
    print(f"{report} (static): " + ("; ".join(found) if found else "renders as it should"))
    try:
        views = [inspect(report), inspect(report, anchor=figure_anchor(page))]
    except ValueError as exc:
        print(f"browser_check: {exc}: the layout in a browser is not checked", file=sys.stderr)
        return 2
    for seen in views:
        in_browser = problems(seen)
        found += in_browser
        print(f"{report}{' #' + seen['anchor'] if seen.get('anchor') else ''}: {seen['images']} images, "
              f"{seen['formulas']} formulas, {seen['links']} in-page links, {seen['window_width']} px window: "
              + ("; ".join(in_browser) if in_browser else "renders as it should"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
