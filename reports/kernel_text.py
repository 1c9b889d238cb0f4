"""The text of ``bma-verify check --kernel``: per kernel its facts and tie tolerances, then per claim the verdict, the
method, the worst case and its margin (each with what it is and its units), and every swept row with ``--rows``.
The results themselves come from :func:`reports.kernel_report.check_kernel_claims`; with many kernels a table of one
line per kernel follows (:func:`format_kernel_table`, the printed part of ``kernels.csv``), whose ``id`` column
numbers the kernels as their blocks above and the rows of ``kernels.csv`` do. Everything but ``--rows``' tables fits
:data:`TABLE_WIDTH` columns.
"""
from __future__ import annotations

import math
import re
import textwrap

from bma_verify.numerics.claim_sweeps import MI_FLOOR, TIE_ATOL
from bma_verify.reports.kernel_report import THM2_TARGET_ERROR, TIE_TOLERANCE, where_text


def _vector_text(values, limit: int = 8) -> str:
    shown = ", ".join(f"{v:.4g}" for v in values[:limit])
    return f"[{shown}{', …' if len(values) > limit else ''}]" + (f" ({len(values)} entries)" if len(values) > limit
                                                                 else "")


def _header_lines(name: str, result: dict) -> list[str]:
    f, unit = result["facts"], result.get("units", "nats")
    trees = result["trees"]
    tree_text = (f"1 tree of H = {len(trees[0])} positions" + (f": {trees[0]}" if len(trees[0]) <= 12 else "")
                 if len(trees) == 1 else f"{len(trees)} random trees of H = {len(trees[0])} positions")
    lines = [f"kernel {name}: d = {f['d']} states, ε = min π = {f['eps']:.4g}, d·ε = {f['d_eps']:.4g}, "
             f"δ(π) (Dobrushin) = {f['dobrushin']:.4g}, Doeblin 1 − d·min π = {f['doeblin']:.4g} (all unit-free)",
             f"  stationary law: {_vector_text(f['stationary'])}; μ₀ used: "
             + (result["init"] if result["init"] == "stationary" else _vector_text(result["init"])),
             f"  swept: {tree_text}",
             f"  ties: a log-likelihood gap with |gap| ≤ {TIE_TOLERANCE:g} nats is a tie; a ratio is undefined where "
             f"I(x_h; x_pa) ≤ {MI_FLOOR:g} nats; a gradient margin within {TIE_ATOL:g}·max(1, max|g|) is a tie; "
             f"information and gaps in {unit}"]
    if not f["hypothesis_eps_positive"]:
        lines.append("  NOTE: π has a zero entry, which violates the hypothesis π ≥ ε > 0 of Lemmas 3, 4 and "
                     "Theorem 2; they are not judged on this kernel.")
    return lines


def _claim_lines(claim: str, r: dict) -> list[str]:
    """Verdict (with its reason), method, worst case and margin, counts and findings of one claim."""
    lines = [f"{claim}: {r['verdict']}" + (f" ({r['why']})" if r.get("why") else "")]
    if r.get("method") and (r.get("worst") or r.get("rows")):  # nothing was computed for a claim that does not apply
        lines.append(f"  method: {r['method']}")
    worst = r.get("worst")
    if worst:
        value = worst["value"]
        value_text = _vector_text(value) if isinstance(value, list) else f"{value:.4g}"
        where = f" at {where_text(worst['where'])}" if worst["where"] else ""
        lines.append(f"  worst case{where}: {worst['value_is']} = {value_text} ({worst['value_units']})")
        lines.append(f"  margin: {worst['margin_is']} = {worst['margin']:.4g} ({worst['margin_units']})")
    if claim == "lemma3-strict-dpi" and r["pairs"]:
        lines.append(f"  {r['pairs']} (tree, pair) cases, {r['uninformative_pairs']} with I(x_h; x_pa) ≤ {MI_FLOOR:g} "
                     "nats (ratio undefined)")
    elif claim in ("lemma4-loglik-gap", "thm2-consistency") and r["pairs"]:
        lines.append(f"  {r['pairs']} (tree, pair) cases, {r['ties']} ties")
    elif claim == "thm3-init-gradient" and r["positions"]:
        lines.append(f"  {r['positions']} (tree, position) cases, {r['ties']} ties, {r['J_form_violations']} J-form "
                     "violations")
    lines += [f"  finding (ours): {x['statement']}: {x['status']}" for x in r.get("findings", [])]
    repair = r.get("holds_instead")
    if repair:
        lines.append(f"  what holds instead: {repair['statement']}: {repair['verdict']}")
        if repair["worst"]:
            worst = repair["worst"]
            lines.append(f"    smallest margin at {where_text(worst['where'])}: {worst['margin_is']} = "
                         f"{worst['margin']:.4g} ({worst['margin_units']}); {repair['positions']} positions, "
                         f"{repair['ties']} ties, {repair['violations']} violations")
    return lines


def _row_lines(claim: str, r: dict, unit: str) -> list[str]:
    if claim == "lemma3-strict-dpi" and r["rows"]:
        return [f"  tree  h  h'  pa  ancestor  I(x_h;x_pa)  I(x_h;x_h')  ratio   (I in {unit}, ratio unit-free)"] + [
            f"  {x['tree']:4d} {x['h']:2d} {x['h_prime']:3d} {x['parent']:3d}  {str(x['ancestor']):8s}"
            f"  {x['mi_parent']:11.4g}  {x['mi_candidate']:11.4g}  {x['ratio']:.4f}" for x in r["rows"]]
    if claim == "thm2-consistency" and r.get("rows"):
        return [f"  tree  h  h'  pa  gap Δ ({unit})  L for error {THM2_TARGET_ERROR} (examples)"] + [
            f"  {x['tree']:4d} {x['h']:2d} {x['h_prime']:3d} {x['parent']:3d}  {x['gap']:11.4g}  "
            f"{x['L_for_error_0.05']:.4g}" for x in r["rows"]]
    if claim == "thm3-init-gradient" and r["rows"]:
        return ["  tree  h  pa  J form     margin       exact π̄ form  margin      ± s.e.   method       J-form "
                "gradients E g(h') (margins and gradients in nats per unit score)"] + [
            f"  {x['tree']:4d} {x['h']:2d} {x['parent']:3d}  {x['J_form']:9s} {x['J_margin']:11.4g}  "
            f"{x['exact_form']:13s} {x['exact_margin']:11.4g} {x['exact_margin_stderr']:8.2g}   "
            f"{x['exact_method']:12s} {_vector_text(x['J_gradient'])}" for x in r["rows"]]
    return []


#: Width of the printed text and batch table: a terminal's, with room to spare.
TABLE_WIDTH = 100


#: A short bracketed expression ("I(x_h; x_pa)", "(tree, pair)") that a wrapped line keeps whole.
_UNBROKEN = re.compile(r"[\w|]*\([^()]{1,22}\)")


def _wrapped(line: str, width: int) -> list[str]:
    """``line`` within ``width`` columns, its continuation lines indented four columns past its own indent; short
    bracketed expressions are not split."""
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    kept = _UNBROKEN.sub(lambda m: m.group().replace(" ", "\0"), line)
    return [part.replace("\0", " ") for part in textwrap.wrap(kept, width, subsequent_indent=indent,
                                                                break_on_hyphens=False, break_long_words=False)]


def format_kernel_result(name: str, result: dict, *, rows: bool = False, kernel_id: int | None = None,
                         width: int = TABLE_WIDTH) -> str:
    """The human-readable output about one kernel: its facts, then per claim the verdict, method, worst case and
    margin, each wrapped within ``width`` columns, and with ``rows`` every swept row (one line each, unwrapped).
    ``kernel_id``: the kernel's number in a batch (the ``id`` of :func:`format_kernel_table`), shown beside its
    name."""
    unit = result.get("units", "nats")
    shown = name if kernel_id is None else f"{name} (id {kernel_id})"
    lines = [wrapped for line in _header_lines(shown, result) for wrapped in _wrapped(line, width)]
    for claim, r in result["claims"].items():
        lines += [wrapped for line in _claim_lines(claim, r) for wrapped in _wrapped(line, width)]
        if rows:
            lines += _row_lines(claim, r, unit)
    return "\n".join(lines)


#: Verdicts as the table shows them: a failure stands out.
SHORT_VERDICTS = {"holds": "holds", "fails": "FAILS", "not applicable": "n/a"}
#: The claims' columns of the table: (claim, its header, the number shown after its verdict, that number's header).
TABLE_CLAIMS = (("lemma3-strict-dpi", "lemma3", "lemma3_max_ratio", "ratio"), ("lemma4-loglik-gap", "lemma4", None, ""),
                ("thm2-consistency", "thm2", None, ""), ("thm3-init-gradient", "thm3", "thm3_margin_nats", "margin"),
                ("thm1-construction", "thm1", None, ""))
TABLE_NOTE = ("id = the kernel's block above and its row of kernels.csv; min π = ε; δ(π) = the Dobrushin "
              "coefficient; ratio = the largest I(x_h; x_h')/I(x_h; x_pa) (unit-free); margin = E g(pa) − max other "
              "E g at the worst position (nats per unit score); n/a: not applicable (see above). Every number, worst "
              "pair and gradient: --out (kernels.csv, kernels.json).")


def _number_text(value) -> str:
    return "-" if not isinstance(value, float) or math.isnan(value) else f"{value:.4g}"


def _table_columns(table: list[dict]) -> list[tuple[str, list[str]]]:
    """(header, cells) of the printed columns: the kernel, its facts, and per claim of the table its verdict (and
    its one number for Lemma 3 and Theorem 3)."""
    columns = [("id", [str(i) for i in range(1, len(table) + 1)]), ("kernel", [row["kernel"] for row in table]),
               ("d", [str(row["d"]) for row in table]),
               ("min π", [_number_text(row["eps"]) for row in table]),
               ("δ(π)", [_number_text(row["dobrushin"]) for row in table])]
    for claim, header, number, number_header in TABLE_CLAIMS:
        if claim in table[0]:
            columns.append((header, [SHORT_VERDICTS.get(row[claim], row[claim]) for row in table]))
            if number:
                columns.append((number_header, [_number_text(row[number]) for row in table]))
    return columns


def _cut(name: str, width: int) -> str:
    """``name`` within ``width`` characters: its middle replaced by … (the end often tells a batch's names apart)."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return name[:width - 1 - tail] + "…" + name[len(name) - tail:]


def format_kernel_table(table: list[dict], width: int = TABLE_WIDTH) -> str:
    """The batch table of :func:`reports.kernel_report.table_row` rows, one line per kernel numbered by its ``id``
    (1, 2, … in the order of ``table``), within ``width`` columns: kernel names too long for it are cut in the
    middle (marked …), the note below is wrapped."""
    columns = _table_columns(table)
    widths = [max(len(header), *(len(cell) for cell in cells)) for header, cells in columns]
    others = sum(widths) - widths[1] + 2 * (len(widths) - 1)
    widths[1] = max(len("kernel"), min(widths[1], width - others))

    def line(cells: list[str]) -> str:
        return "  ".join([f"{cells[0]:>{widths[0]}s}", f"{_cut(cells[1], widths[1]):{widths[1]}s}"]
                         + [f"{c:>{w}s}" for c, w in zip(cells[2:], widths[2:])])

    lines = [line([header for header, _ in columns])]
    lines += [line([cells[i] for _, cells in columns]) for i in range(len(table))]
    return "\n".join(lines + textwrap.wrap(TABLE_NOTE, width, break_on_hyphens=False))
