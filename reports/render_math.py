"""Mathematics in the report: derivation formulas as MathML that wraps, and prose math made readable.

A derivation step from SymPy can run to thousands of characters on one line, and browsers do not break MathML
lines. :func:`latex_to_mathml` therefore cuts a wide formula, in LaTeX, at its top-level relations and ``+``/``−``
(and, for a still-wide product, between factors), after opening up wide fractions, ``\\left … \\right`` pairs and
matrices into their linear forms (``(N) / (D)``, bare delimiters, ``[a, b; c, d]``). Each piece becomes its own
``<math>`` element inside a ``<div class='formula'>`` whose CSS wraps them like words. A formula that fits stays
one display formula, untouched.

Prose (claims, summaries, controls) is written in Unicode with LaTeX-style scripts (``I(x_h; x_{h'})``);
:func:`prose_html` turns the scripts into ``<sub>``/``<sup>`` and :func:`prose_markdown` into plain Unicode
(``I(x_h; x_h′)``), leaving `code spans` alone.
"""
from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

#: Estimated width (about one per glyph) above which a formula is cut into pieces, and the most a piece should
#: take: at 60, no piece of the reference report's formulas overflows an 800 px window (reports.browser_check).
WRAP_WIDTH = 60

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\s+|.", re.S)
_RELATIONS = {"=", "<", ">", r"\le", r"\leq", r"\ge", r"\geq", r"\approx", r"\to", r"\ne", r"\neq", r"\equiv",
              r"\sim", r"\propto"}
_SIGNS = {"+", "-", r"\pm", r"\mp"}
_INVISIBLE = {r"\left", r"\right", r"\mathrm", r"\operatorname", r"\mathbb", r"\mathcal", r"\mathbf", r"\text",
              r"\displaystyle", r"\big", r"\Big", r"\bigl", r"\bigr", r"\,", r"\;", r"\!", r"\ ", r"\quad",
              r"\limits", r"\hat", r"\tilde", r"\bar", r"\vec", "^", "_", "&"}
_NAMED = {r"\log": 3, r"\exp": 3, r"\sin": 3, r"\cos": 3, r"\tanh": 4, r"\max": 3, r"\min": 3, r"\sum": 1.5}
#: Commands that take arguments, and how many: they stay glued to their arguments (a function to its argument).
_ARGUMENTS = {r"\frac": 2, r"\tfrac": 2, r"\dfrac": 2, r"\sqrt": 1, r"\mathrm": 1, r"\operatorname": 1,
              r"\mathbb": 1, r"\mathcal": 1, r"\mathbf": 1, r"\text": 1, r"\hat": 1, r"\tilde": 1, r"\bar": 1,
              r"\vec": 1, **{name: 1 for name in _NAMED if name != r"\sum"}}
_FRACTIONS = {r"\frac", r"\tfrac", r"\dfrac"}


class _Group(list):
    """A balanced group of items: ``{…}``, ``\\left X … \\right Y`` or ``\\begin{env} … \\end{env}``."""

    def __init__(self, kind: str, opening: list, items: list, closing: list):
        super().__init__(items)
        self.kind, self.opening, self.closing = kind, opening, closing


def _next_visible(tokens: list[str], i: int) -> int:
    while i < len(tokens) and tokens[i].isspace():
        i += 1
    return i


def _parse(tokens: list[str], i: int = 0, until: str | None = None) -> tuple[list, int]:
    """Items from ``tokens[i:]`` up to the token ``until`` (returned with its index): tokens and nested groups."""
    items = []
    while i < len(tokens):
        tok = tokens[i]
        if tok == until:
            return items, i
        if tok == "{":
            inner, i = _parse(tokens, i + 1, "}")
            items.append(_Group("brace", ["{"], inner, ["}"]))
        elif tok == r"\left":
            d = _next_visible(tokens, i + 1)
            inner, i = _parse(tokens, d + 1, r"\right")
            i = _next_visible(tokens, i + 1)
            items.append(_Group("left", [r"\left", tokens[d]], inner, [r"\right", tokens[i]]))
        elif tok == r"\begin":
            name, i = _parse(tokens, _next_visible(tokens, i + 1) + 1, "}")
            inner, i = _parse(tokens, i + 1, r"\end")
            i = _parse(tokens, _next_visible(tokens, i + 1) + 1, "}")[1]
            items.append(_Group("env", [r"\begin", "{", *name, "}"], inner, [r"\end", "{", *name, "}"]))
        else:
            items.append(tok)
        i += 1
    if until is not None:
        raise ValueError(f"unbalanced formula: no {until!r}")
    return items, i


def _source(items) -> str:
    out = []
    for item in items:
        if isinstance(item, _Group):
            out += [*item.opening, _source(item), *item.closing]
        else:
            out.append(item)
    return "".join(out)


# ------------------------------------------------------------------------------------------ widths and atoms

def _tok(item) -> str:
    """The token an item is, or "" for a group."""
    return item if isinstance(item, str) else ""


class _Atom:
    """What a line may not be broken inside: a head (token or group), its brace arguments, its scripts."""

    def __init__(self, head):
        self.head, self.args, self.scripts, self.items = head, [], [], [head]


def _atoms(items: list) -> list[_Atom]:
    """``items`` in atoms, in order: whitespace, primes and scripts join the atom before them."""
    atoms, i = [], 0
    while i < len(items):
        item = items[i]
        if atoms and isinstance(item, str) and (item.isspace() or item in ("'", r"\limits")):
            atoms[-1].items.append(item)
        elif atoms and item in ("^", "_"):
            j = i + 1
            while j < len(items) and isinstance(items[j], str) and items[j].isspace():
                j += 1
            atoms[-1].items += items[i:j + 1]
            atoms[-1].scripts += items[j:j + 1]
            i = j
        else:
            atom = _Atom(item)
            for _ in range(_ARGUMENTS.get(_tok(item), 0)):
                while i + 1 < len(items) and isinstance(items[i + 1], str) and items[i + 1].isspace():
                    i += 1
                    atom.items.append(items[i])
                if i + 1 < len(items):
                    i += 1
                    atom.items.append(items[i])
                    atom.args.append(items[i])
            atoms.append(atom)
        i += 1
    return atoms


def _item_width(item) -> float:
    if isinstance(item, _Group):
        if item.kind == "env":
            rows = _cells(item)
            return max(sum(_width(cell) + 2 for cell in row) for row in rows) if rows else 0.0
        return _width(item) + (2 if item.kind == "left" else 0)
    if item.isspace() or item in _INVISIBLE:
        return 0.0
    if item in _RELATIONS or item in _SIGNS:
        return 2.0
    return _NAMED.get(item, 1.0)


def _atom_width(atom: _Atom) -> float:
    scripts = 0.7 * max((_item_width(s) for s in atom.scripts), default=0.0)
    if _tok(atom.head) in _FRACTIONS:
        return max((_item_width(a) for a in atom.args), default=0.0) + 0.5 + scripts
    return _item_width(atom.head) + sum(_item_width(a) for a in atom.args) + scripts


def _width(items) -> float:
    return sum(_atom_width(a) for a in _atoms(list(items)))


def _cells(env: _Group) -> list[list[list]]:
    """A matrix's rows, each a list of cells (item lists), split at ``\\\\`` and ``&``."""
    rows, row, cell = [], [], []
    for item in env:
        if item == "\\\\":
            rows.append(row + [cell])
            row, cell = [], []
        elif item == "&":
            row.append(cell)
            cell = []
        else:
            cell.append(item)
    if row or any(not (isinstance(x, str) and x.isspace()) for x in cell):
        rows.append(row + [cell])
    return rows


# ------------------------------------------------------------------------------------ opening and cutting

def _open(items: list) -> list:
    """``items`` with every structure wider than WRAP_WIDTH opened into its linear form (recursively)."""
    out = []
    for atom in _atoms(items):
        head, trailing = atom.head, atom.items[1:]
        delimiters = 2 if isinstance(head, _Group) and head.kind == "left" else 0
        if _atom_width(atom) - delimiters <= WRAP_WIDTH:  # a group whose content fits keeps its delimiters
            out += atom.items
        elif _tok(head) in _FRACTIONS and len(atom.args) == 2 and not atom.scripts:
            num, den = atom.args
            out += ["(", " ", *_open(list(num)), " ", ")", " ", "/", " ", "(", " ", *_open(list(den)), " ", ")", " "]
        elif isinstance(head, _Group) and head.kind == "brace":
            out += [" ", *_open(list(head)), " ", *trailing]
        elif isinstance(head, _Group) and head.kind == "left":
            bare = [d if d != "." else "" for d in (head.opening[1], head.closing[1])]
            out += [bare[0], " ", *_open(list(head)), " ", bare[1], *trailing]
        elif isinstance(head, _Group) and head.kind == "env":
            rows = _cells(head)
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    out += [" ", *_open(cell), "," if c < len(row) - 1 else (";" if r < len(rows) - 1 else ""), " "]
            out += trailing
        elif _tok(head) in _NAMED:  # a function of a wide argument: the argument opened
            out += [head, " ", *_open(trailing)]
        else:  # a wide square root, text or script: left whole
            out += atom.items
    return out


def _starts_piece(atom: _Atom, previous: _Atom | None, depth: int) -> bool:
    """Break before a relation outside brackets, before a binary sign, after a comma or semicolon."""
    if previous is None:
        return False
    head, before = _tok(atom.head), _tok(previous.head)
    if before in (",", ";") or (head in _RELATIONS and depth == 0):
        return True
    return head in _SIGNS and before not in _RELATIONS | _SIGNS | {"(", "[", "/"}


def _pack(atoms: list[_Atom]) -> list[list[_Atom]]:
    """Cut a run of atoms into lines of at most WRAP_WIDTH (an atom wider than that is a line of its own)."""
    lines, line, width = [], [], 0.0
    for atom in atoms:
        w = _atom_width(atom)
        if line and width + w > WRAP_WIDTH:
            lines.append(line)
            line, width = [], 0.0
        line.append(atom)
        width += w
    return lines + ([line] if line else [])


def formula_width(latex: str) -> float:
    """The estimated display width of ``latex``, in the units of ``WRAP_WIDTH`` (what :func:`formula_pieces` fits
    each piece to). Raises ValueError for unbalanced braces, ``\\left`` or ``\\begin``."""
    return _width(_parse(_TOKEN.findall(latex))[0])


def formula_pieces(latex: str) -> list[str]:
    """LaTeX pieces of ``latex`` that each fit WRAP_WIDTH where possible, in order (the formula itself when it
    fits). Read one after another they are the formula, with wide fractions, ``\\left … \\right`` and matrices
    written linearly. Raises ValueError for unbalanced braces, ``\\left`` or ``\\begin``."""
    items = _parse(_TOKEN.findall(latex))[0]
    if _width(items) <= WRAP_WIDTH:
        return [latex]
    runs, previous, depth = [], None, 0
    for atom in _atoms(_open(items)):
        if not runs or _starts_piece(atom, previous, depth):
            runs.append([])
        runs[-1].append(atom)
        depth += (_tok(atom.head) in ("(", "[")) - (_tok(atom.head) in (")", "]"))
        if not (isinstance(atom.head, str) and atom.head.isspace()):
            previous = atom
    pieces = [_source(x for atom in line for x in atom.items).strip() for run in runs for line in _pack(run)]
    return [p for p in pieces if p]


def _mathml(latex: str) -> str:
    return convert(latex, display="block").replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "")


def latex_to_mathml(latex: str) -> str:
    """MathML for a LaTeX formula (converted at build time: browsers render it natively, offline).

    A formula wider than WRAP_WIDTH becomes ``<div class='formula'>`` holding one ``<math>`` per piece
    (:func:`formula_pieces`), which the page wraps like words. A formula the converter cannot read is shown as
    escaped source in ``<pre class='raw-latex'>`` rather than dropped, so a reader always sees it.
    """
    try:
        attempts = [formula_pieces(latex), [latex]]
    except ValueError:  # unbalanced groups: the converter judges the formula whole
        attempts = [[latex]]
    for pieces in attempts:  # pieces first; the whole formula if a piece does not convert
        try:
            maths = [_mathml(p) for p in pieces]
        except Exception:  # noqa: BLE001 - a formula the converter does not know stays readable as source
            continue
        return maths[0] if len(maths) == 1 else "<div class='formula'>" + "".join(maths) + "</div>"
    return f"<pre class='raw-latex'>{html.escape(latex)}</pre>"


# ------------------------------------------------------------------------------------------------ prose math

_LETTER = "A-Za-zΑ-Ωα-ω"
#: A one-letter symbol (not the end of a word), with accents and primes: x, p̂, h′.
_BASE = rf"(?<![\w\u0300-\u036f])[{_LETTER}][\u0300-\u036f]*[′*ᵀ]*"
_BODY = rf"\{{[^{{}}]*\}}|\([^()]*\)|[{_LETTER}0-9²³′*ᵀ]+"
_SCRIPTED = re.compile(rf"({_BASE})((?:[_^](?:{_BODY}))+)")
_SCRIPT = re.compile(rf"([_^])({_BODY})")
_BRACED = re.compile(r"([_^])\{([^{}]*)\}")
#: A prime on a one-letter symbol, which may itself be a script: h' and x_h' (not D'Angelo, not BMA's).
_PRIME = re.compile(rf"((?<![^\W_])(?<![\u0300-\u036f])[{_LETTER}][\u0300-\u036f]*)'(?![{_LETTER}])")
_ATOM = re.compile(r"[^\W_]+[′*ᵀ]*")


def _outside_code(text: str, convert_part) -> str:
    """``convert_part`` applied to the text outside `code spans`."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else convert_part(p) for p in parts)


def _repeat(pattern, replace, text: str) -> str:
    for _ in range(4):  # inner scripts first: x_{a_{b}} needs two passes
        text, n = pattern.subn(replace, text)
        if n == 0:
            break
    return text


def _markdown_part(text: str) -> str:
    text = _PRIME.sub(r"\1′", text)

    def plain(m):
        body = m.group(2).replace("'", "′")
        return m.group(1) + (body if _ATOM.fullmatch(body) else f"({body})")
    return _repeat(_BRACED, plain, text)


def _html_part(text: str) -> str:
    text = _PRIME.sub(r"\1′", html.escape(text, quote=False))

    def tags(m):
        return m.group(1) + "".join(_tag(s, b) for s, b in _SCRIPT.findall(m.group(2)))
    text = _repeat(_SCRIPTED, tags, text)
    # a braced script is math whatever its base (softmax_{h′<h}, lim_{β→∞})
    return _repeat(_BRACED, lambda m: _tag(m.group(1), m.group(2)), text)


def _tag(mark: str, body: str) -> str:
    body = body.replace("'", "′")
    body = body[1:-1] if body.startswith("{") else body
    name = "sub" if mark == "_" else "sup"
    return f"<{name}>{body}</{name}>"


def prose_markdown(text: str) -> str:
    """Prose with LaTeX-style scripts in plain Unicode: ``I(x_h; x_{h'})`` → ``I(x_h; x_h′)``, ``e^{−β}`` →
    ``e^(−β)`` (parentheses where a script is more than one symbol); `code spans` untouched."""
    return _outside_code(text, _markdown_part)


def prose_html(text: str) -> str:
    """Prose as escaped HTML with its scripts as ``<sub>``/``<sup>``: ``I(x_h; x_{h'})`` →
    ``I(x<sub>h</sub>; x<sub>h′</sub>)``; a script needs a one-letter base, so ``max_abs_error`` stays as it is."""
    return _outside_code(text, _html_part)
