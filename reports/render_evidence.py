"""The sentences and small tables of a check's evidence that the report writes from its record in results.json.

- :func:`positive_control_sentence`: the positive control (the ideal through the same rule) in one sentence.
- :func:`control_sentence`: the negative control in one sentence, with what the rule saw in a few key numbers (the
  full values stay in results.json) and whether it was rejected.
- :func:`power_line`, :func:`power_table`: a control's power curve, the rule's outcome as the control moves towards
  the truth (``control["power"]``: points ``{"x", "label", "rejected", "value"}``), and where it stops rejecting.
- :func:`seeds_line`, :func:`seeds_table`: a trained check over several training seeds (``check["seeds"]``): the
  counts under the count rule, and per metric its median and range.

Tables are ``(columns, rows)`` for the Markdown and HTML writers alike.
"""
from __future__ import annotations

from collections import Counter

#: How many of the control's values a sentence names.
KEY_VALUES = 4
#: Longest string that reads as an outcome word ("pass", "inconclusive", "not converged") rather than a text.
_WORD = 16


def number(value) -> str:
    """A value as a sentence shows it: 3 significant digits, yes/no, or the string results.json holds."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return "none" if value is None else str(value)


def _words(values) -> bool:
    return all(isinstance(v, str) and len(v) <= _WORD for v in values)


def _outcomes(mapping: dict) -> str:
    """``{"a": "fail", "b_c": "pass", "d": "fail"}`` → ``fail for a, d; pass for b c``."""
    by_word: dict[str, list[str]] = {}
    for key, word in mapping.items():
        by_word.setdefault(word, []).append(str(key).replace("_", " "))
    return "; ".join(f"{word} for {', '.join(keys)}" for word, keys in by_word.items())


def _list_text(values: list) -> str:
    if all(isinstance(v, bool) for v in values):
        return f"{sum(values)} of {len(values)} yes"
    if _words(values):
        return ", ".join(f"{w} ×{n}" for w, n in Counter(values).items())
    if all(isinstance(v, str) for v in values):
        return values[0] if len(values) == 1 else f"{len(values)} ({values[0]}, +{len(values) - 1} more)"
    if len(values) <= 3:
        return ", ".join(number(v) for v in values)
    text = f"{len(values)} values, {number(values[0])} … {number(values[-1])}"
    numeric = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numeric and (min(numeric), max(numeric)) not in ((values[0], values[-1]), (values[-1], values[0])):
        text += f" (range {number(min(numeric))} to {number(max(numeric))})"
    return text


def _leaves(value, path: tuple = ()):
    """'name value' for each thing worth naming in a control's measured values, in their order (a dict of
    outcome words and a list each read as one)."""
    if isinstance(value, dict):
        if value and _words(value.values()):
            yield f"{_name(path)}: {_outcomes(value)}"
            return
        for key, inner in value.items():
            yield from _leaves(inner, path + (str(key),))
    elif isinstance(value, list):
        if value:
            yield f"{_name(path)}: {_list_text(value)}"
    else:
        yield f"{_name(path)} {number(value)}"


def _name(path: tuple) -> str:
    """('flip', 'cells_violated') → 'flip cells violated'."""
    return " ".join(p.replace("_", " ") for p in path) or "value"


def control_sentence(control: dict | None) -> str:
    """One sentence: what the control is, what the rule saw (KEY_VALUES of its values), and whether it rejected it.

    >>> control_sentence({"description": "BMA reading 5 of 10 examples", "rejected": True,
    ...                   "measured": {"gap_to_bma": 0.0328, "rule": {"gap_to_bma": "fail", "accuracy": "fail"}}})
    'BMA reading 5 of 10 examples: the rule saw gap to bma 0.0328, rule: fail for gap to bma, accuracy; rejected.'
    """
    if control is None:
        return "none (so this check cannot pass)."
    leaves = list(_leaves(control["measured"]))
    seen = ", ".join(leaves[:KEY_VALUES])
    more = len(leaves) - KEY_VALUES
    seen += f" (and {more} more values in results.json)" if more > 0 else ""
    outcome = "rejected" if control["rejected"] else "NOT rejected (the check does not discriminate)"
    margin = control.get("margin")
    if margin:
        side = "≤" if margin["passes_below"] else "≥"
        outcome += (f", its {margin['quantity']} {margin['value']:.4g} against the bar {side} {margin['bar']:.4g}: "
                    f"{margin['distance']:.3g}{' ' + margin['units'] if margin['units'] else ''} on the false side")
    return f"{control['description']}: " + (f"the rule saw {seen}; " if leaves else "") + f"{outcome}."


def positive_control_sentence(control: dict) -> str:
    """One sentence: what the ideal is, what the rule saw on it, and whether it passed.

    >>> positive_control_sentence({"description": "BMA itself", "passed": False, "measured": {"rho": -1.0}})
    'BMA itself: the rule saw rho -1; did NOT pass (not testable under this reading).'
    """
    leaves = list(_leaves(control["measured"]))
    seen = ", ".join(leaves[:KEY_VALUES])
    seen += f" (and {len(leaves) - KEY_VALUES} more values in results.json)" if len(leaves) > KEY_VALUES else ""
    outcome = "passed" if control["passed"] else "did NOT pass (not testable under this reading)"
    return f"{control['description']}: " + (f"the rule saw {seen}; " if leaves else "") + f"{outcome}."


def _label(point: dict) -> str:
    return str(point.get("label") or point["x"])


def power_line(points: list[dict]) -> str:
    """Which points of the power curve the rule rejects and where it stops rejecting."""
    labels, rejected = [_label(p) for p in points], [bool(p["rejected"]) for p in points]
    span = labels[0] if len(labels) == 1 else f"{labels[0]} … {labels[-1]}"
    if all(rejected):
        return f"rejects every point ({span})"
    if not any(rejected):
        return f"rejects none of the points ({span})"
    stop = rejected.index(False)
    if stop > 0 and not any(rejected[stop:]):
        first = labels[0] if stop == 1 else f"{labels[0]} … {labels[stop - 1]}"
        return f"rejects {first}; stops rejecting at {labels[stop]}"
    return (f"rejects {', '.join(l for l, r in zip(labels, rejected) if r)}; does not reject "
            f"{', '.join(l for l, r in zip(labels, rejected) if not r)}")


def power_table(points: list[dict]) -> tuple[list[str], list[list[str]]]:
    """One column per point: whether the rule rejected it and the value it decided on (when recorded)."""
    columns = ["point"] + [str(p["x"]) for p in points]
    rows = [["rejected"] + ["yes" if p["rejected"] else "no" for p in points]]
    if any(p.get("value") is not None for p in points):
        rows.append(["value"] + [number(p.get("value")) for p in points])
    return columns, rows


def seeds_line(seeds: dict) -> str:
    """'3 seeds (training seeds 0, 1, 2): 2 meet, 1 miss, 0 undecided, 0 not converged — <count rule>'."""
    c = seeds["counts"]
    if not seeds["n"]:
        return f"none trained at this tier ({seeds.get('why', '')}); the decision would need: {seeds['count_rule']}"
    unconfirmed = (f", {c['unconfirmed_miss']} miss unconfirmed (no continuation)" if c.get("unconfirmed_miss")
                   else "")
    learning = f", {c['still_learning']} still learning at 2× steps" if c.get("still_learning") else ""
    return (f"{seeds['n']} seeds (training seeds {', '.join(map(str, seeds['training_seeds']))}): {c['meet']} meet, "
            f"{c['miss']} miss{unconfirmed}{learning}, {c['undecided']} undecided, {c['not_converged']} not "
            f"converged — {seeds['count_rule']}")


def seeds_table(seeds: dict) -> tuple[list[str], list[list[str]]]:
    """Per metric over the seeds: its median and its range."""
    rows = [[name, number(m["median"]), f"{number(m['min'])} to {number(m['max'])}"]
            for name, m in seeds["metrics"].items()]
    return ["metric", "median", "range over seeds"], rows
