"""The ``bma-verify`` command: ``check``, ``train``, ``report`` and ``search`` (see the README and docs/claims.md).

Exit status of ``check``: 1 only when a claim of the paper fails. A conjecture of ours that fails (a claim of ours,
verdict ``refuted``, or a replayed instance that refutes a statement of ours) is a finding and exits 0; 3 when a
check raised, 2 on bad input.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
from pathlib import Path

import torch

from bma_verify.model.ds import train_ds_preset
from bma_verify.model.presets import train_preset
from bma_verify.numerics.claim_sweeps import VIOLATION_RTOL
from bma_verify.reports.builder import build_report, run_claims
from bma_verify.reports.core import DEVICES, TIERS, CheckContext, jsonable
from bma_verify.reports.io import load_kernels, read_json, read_vector, write_text_atomic
from bma_verify.reports.kernel_report import (KERNEL_CLAIMS, check_kernel_claims, format_kernel_result, in_units,
                                              write_table)
from bma_verify.reports.registry import CLAIM_IDS, CLAIMS, get_claim
from bma_verify.reports.render import check_label, finding_line, summary_counts, verdict_label
from bma_verify.reports.search import check_instance, default_cache_dir, run_search

PRESETS = ("fig2", "fig3", "fig5", "fig6", "ds", "robustness")


# -------------------------------------------------------------------------------------------------- arguments

def _check_parser(sub) -> None:
    check = sub.add_parser("check", help="run the checks of some or all claims and print their verdicts "
                                         "(exit status 1 when a claim of the paper fails, 3 when a check raised, "
                                         "2 on bad input; a refuted conjecture of ours exits 0)")
    check.add_argument("claims", nargs="*", metavar="CLAIM", help=f"claim ids (default: all): {', '.join(CLAIM_IDS)}")
    check.add_argument("--tier", choices=TIERS, default="quick")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--json", action="store_true", help="print results as JSON")
    check.add_argument("--kernel", metavar="PATH",
                       help="your own kernel (.npy, .csv or .json), a .npz of many or a folder of such files: runs the "
                            "kernel claims (lemma3, lemma4, thm2, thm3, thm1 construction) on it")
    check.add_argument("--init", metavar="stationary|FILE", default="stationary",
                       help="with --kernel: the law μ₀ of x_0 (a .npy/.csv/.json vector), default the stationary law")
    check.add_argument("--parents", metavar="FILE|LIST",
                       help="with --kernel: one tree, as a file or a comma list like -1,0,0,1 (default: --trees random "
                            "trees of --H positions)")
    check.add_argument("--trees", type=int, default=20, help="with --kernel: random trees to sweep (default 20)")
    check.add_argument("--H", type=int, default=6, help="with --kernel: positions per random tree (default 6)")
    check.add_argument("--out", metavar="DIR", help="with --kernel: write kernels.csv and kernels.json (one row per "
                                                    "kernel) here")
    check.add_argument("--force", action="store_true", help="with --out: replace an existing table")
    check.add_argument("--units", choices=("nats", "bits"), default="nats",
                       help="with --kernel: units of mutual informations and log-likelihood gaps (default nats)")
    check.add_argument("--rows", action="store_true", help="with --kernel: print every swept (tree, pair) row")
    check.add_argument("--instance", metavar="FILE", help="re-check a saved counterexample instance (JSON)")
    check.add_argument("--list", action="store_true", help="list the claim ids and their checks, run nothing")
    check.add_argument("--quiet", action="store_true")
    _device_arg(check)
    _threads_arg(check)


def _train_parser(sub) -> None:
    train = sub.add_parser("train", help="train a model on a preset of the paper's experiments")
    train.add_argument("--preset", choices=PRESETS, required=True)
    train.add_argument("--steps", type=int)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    train.add_argument("--out", metavar="DIR")
    train.add_argument("--quiet", action="store_true")
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    train.add_argument("--force", action="store_true", help="replace a run already in --out")
    train.add_argument("--output", choices=("mixture", "logit"), default="mixture",
                       help="output rule of the structured model (logit: the paper's; mixture: BMA's form); "
                            "not used by the ds preset")
    train.add_argument("--tier", choices=TIERS, default="full",
                       help="preset sizes: full = the paper's, quick = the report's quick tier")
    _threads_arg(train)


def _report_parser(sub) -> None:
    report = sub.add_parser("report", help="build REPORT.md, report.html, figures/ and results.json")
    report.add_argument("--tier", choices=TIERS, default="quick")
    report.add_argument("--out", metavar="DIR", default="reports/latest")
    report.add_argument("--force", action="store_true", help="replace an existing report folder")
    report.add_argument("--seed", type=int, default=0)
    report.add_argument("--quiet", action="store_true")
    report.add_argument("--claims", nargs="+", metavar="CLAIM", help="only these claims")
    _device_arg(report)
    _threads_arg(report)
    _executor_args(report)


def _search_parser(sub) -> None:
    search = sub.add_parser(
        "search", help="Hypothesis-driven counterexample search",
        description="Search for a counterexample to Lemma 3 (lemma3) or Theorem 3 (thm3) with Hypothesis. Exit "
                    "status 1 when one is found, 0 when none is, 2 on bad input. No example database is kept (a "
                    "search is reproducible from --seed and --budget); Hypothesis' working files go under "
                    "DIR/hypothesis, DIR given by --cache-dir, never into ./.hypothesis.")
    search.add_argument("target", choices=("lemma3", "thm3"))
    search.add_argument("--budget", type=int, default=200, help="number of examples to try")
    search.add_argument("--seed", type=int, default=0)
    search.add_argument("--alpha", help="lemma3: the α candidate to test (dobrushin, doeblin, sdpi, ...) or a number")
    search.add_argument("--init", choices=("any", "stationary", "full-support"), default="any",
                        help="which laws μ₀ of the first token to search over")
    search.add_argument("--form", choices=("exact", "approximate"), default="exact",
                        help="thm3: the exact π̄ form or the approximate J (marginal) form")
    search.add_argument("--out", metavar="FILE", help="write the counterexample instance (JSON) here")
    search.add_argument("--json", action="store_true",
                        help="print only the full result as JSON on stdout (every message goes to stderr)")
    search.add_argument("--cache-dir", metavar="DIR",
                        help="folder for Hypothesis' working files (DIR/hypothesis); default $BMA_VERIFY_CACHE_DIR, "
                             "else $XDG_CACHE_HOME/bma-verify, else ~/.cache/bma-verify")
    search.add_argument("--quiet", action="store_true", help="no progress or messages (with --json: JSON only)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bma-verify",
        description="Verify, symbolically, numerically and on trained transformers, the claims of 'How "
                    "Transformers Learn Causal Structures In-Context' (ICLR 2026).")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_check_parser, _train_parser, _report_parser, _search_parser):
        add(sub)
    return parser


def _device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=DEVICES, default="cpu",
                   help="where the paper-experiment presets train (exp-fig2 ... exp-robustness; e.g. the full tier's "
                        "standard transformer on a GPU); other checks use the CPU (default cpu)")


def _threads_arg(p: argparse.ArgumentParser) -> None:
    # The models are small: one torch thread is fastest on a shared 2-core machine; more threads pay off only for
    # large presets on a big machine.
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")


def _executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes (joblib): the report's checks run in parallel, a claim's checks in one "
                        "worker. With --backend dask: the LocalCluster's workers, which run the sweeps")
    p.add_argument("--backend", choices=("joblib", "dask"), default="joblib")
    p.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (default: a LocalCluster)")


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "threads", None) is not None:
        if args.threads < 1:
            print(f"bma-verify {args.command}: error: --threads must be >= 1, got {args.threads}", file=sys.stderr)
            return 2
        torch.set_num_threads(args.threads)
    try:
        return {"check": _check, "train": _train, "report": _report, "search": _search}[args.command](args)
    except (ValueError, FileExistsError) as exc:
        print(f"bma-verify {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output folder that cannot be written, a file that cannot be read
        where = f" {exc.filename}" if exc.filename else ""
        print(f"bma-verify {args.command}: error: cannot use{where}: {exc.strerror or exc}; choose a path you can "
              "read and write", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bma-verify {args.command}: interrupted; nothing was written over an existing output",
              file=sys.stderr)
        return 130


# ------------------------------------------------------------------------------------------------------ check

def _list_claims(as_json: bool) -> int:
    if as_json:
        print(json.dumps([{"id": claim.id, "statement": claim.statement,
                           "checks": [{"kind": c.kind, "reading": c.reading, "function": c.function,
                                       "cites": c.cites, "description": c.description} for c in claim.checks]}
                          for claim in CLAIMS], indent=2, ensure_ascii=False))
        return 0
    for claim in CLAIMS:
        print(f"{claim.id:28s} {', '.join(f'{c.kind} ({c.reading})' for c in claim.checks)}")
    return 0


#: What a replayed instance shows, by whose statement it tests and whether that statement holds on it.
REPLAY_OUTCOMES = {("paper", "fail"): "fail", ("ours", "fail"): "refuted finding reproduced",
                   ("paper", "pass"): "pass", ("ours", "pass"): "pass"}


def instance_owner(instance: dict, result: dict) -> str:
    """Whose statement a replayed instance tests: "paper" or "ours".

    Theorem 3's J form is the paper's statement, its exact π̄ form ours. A Lemma 3 instance names an α (a candidate
    of ours or a number): the paper's lemma itself (some α < 1) fails only when the ratio reaches 1 on a kernel with
    π > 0, the lemma's hypothesis.
    """
    if result["target"] == "thm3":
        return "paper" if result["form"] == "approximate" else "ours"
    no_alpha_below_one = result["ratio"] >= 1.0 - VIOLATION_RTOL
    return "paper" if no_alpha_below_one and min(min(row) for row in instance["kernel"]) > 0 else "ours"


def _check_instance(args) -> int:
    """``check --instance FILE``: exit 1 only when the instance fails a statement of the paper; a refuted finding of
    ours replays as "refuted finding reproduced" with exit 0."""
    instance = read_json(args.instance, "--instance")
    result = check_instance(instance)
    owner = instance_owner(instance, result)
    result = {**result, "owner": owner, "outcome": REPLAY_OUTCOMES[owner, result["verdict"]]}
    print(json.dumps(result, indent=2) if args.json else _instance_line(result))
    return 1 if result["outcome"] == "fail" else 0


def _check(args) -> int:
    if args.list:
        return _list_claims(args.json)
    if args.device != "cpu" and (args.kernel or args.instance):
        raise ValueError("--device applies to claim checks that train, not to --kernel or --instance")
    if args.instance:
        return _check_instance(args)
    claims = [get_claim(c) for c in args.claims] if args.claims else list(CLAIMS)
    if args.kernel:
        return _check_kernels(args)
    for option in ("out", "parents"):
        if getattr(args, option):
            raise ValueError(f"--{option} applies with --kernel only")
    if args.units != "nats":
        raise ValueError("--units applies with --kernel only (the report and results.json are in nats and say so)")
    with tempfile.TemporaryDirectory() as figures:
        ctx = CheckContext(tier=args.tier, seed=args.seed, figures_dir=Path(figures), quiet=args.quiet or args.json,
                           options={}, device=args.device)
        records = run_claims(claims, ctx, progress=not (args.quiet or args.json))
    if args.json:
        print(json.dumps({"tier": args.tier, "seed": args.seed, "threads": args.threads, "device": args.device,
                          "claims": records},
                         indent=2, ensure_ascii=False))
    else:
        _print_records(records)
    return exit_status(records)


def _print_records(records: list[dict]) -> None:
    """The table of ``check``: one line per check, then each claim's verdict and findings, then the counts."""
    print(f"{'claim':28s} {'kind':12s} {'reading':13s} {'verdict':13s} {'control':9s} {'seconds':>8s}  summary")
    for claim in records:
        for check in claim["checks"]:
            control = "-" if check["control"] is None else ("rejected" if check["control"]["rejected"]
                                                             else "ACCEPTED")
            verdict = check_label(check, claim.get("owner", "paper"))  # a stronger check shows its finding
            print(f"{claim['id']:28s} {check['kind']:12s} {check['reading']:13s} {verdict:13s} "
                  f"{control:9s} {check['seconds']:8.2f}  {check['summary']}")
    print()
    for claim in records:
        print(f"{claim['id']:28s} {verdict_label(claim)}")
        for finding in claim["findings"]:
            print(f"{'':28s}   {finding_line(finding)}")
    print(f"\nclaims: {summary_counts(records)}")


def _check_kernels(args) -> int:
    """``check --kernel``: the kernel claims on the user's kernel(s); the output is about those kernels only."""
    claims = args.claims or list(KERNEL_CLAIMS)
    others = [c for c in claims if c not in KERNEL_CLAIMS]
    if others:
        raise ValueError(f"--kernel applies to the claims about a kernel ({', '.join(KERNEL_CLAIMS)}); "
                         f"{', '.join(others)} is not one")
    kernels = load_kernels(args.kernel)
    init = None if args.init == "stationary" else read_vector(args.init, "--init")
    parents = None if args.parents is None else read_vector(args.parents, "--parents")
    results = {name: in_units(check_kernel_claims(kernel, claims=claims, init=init, parents=parents,
                                                  trees=args.trees, H=args.H, seed=args.seed), args.units)
               for name, kernel in kernels.items()}
    table = [{"kernel": name, **r["summary"]} for name, r in results.items()]
    written = write_table(table, args.out, force=args.force) if args.out else []
    if args.json:
        print(json.dumps(jsonable({"kernels": results, "table": table}), indent=2, ensure_ascii=False,
                         allow_nan=False))
    else:
        _print_kernel_results(results, table, rows=args.rows)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 1 if any(row[c] == "fails" for row in table for c in claims) else 0


def _print_kernel_results(results: dict, table: list[dict], *, rows: bool) -> None:
    """Each kernel's facts and verdicts (its swept rows with ``rows`` or when alone), then the batch table."""
    for name, result in results.items():
        print(format_kernel_result(name, result, rows=rows or len(results) == 1))
        print()
    if len(results) > 1:
        print("  ".join(f"{c:>18s}" for c in table[0]))
        for row in table:
            print("  ".join(f"{v:>18.4g}" if isinstance(v, float) else f"{str(v):>18s}" for v in row.values()))


def exit_status(records: list[dict]) -> int:
    """1 when a claim of the paper fails, 3 when a check raised (an error verified nothing), else 0.

    A claim of ours never reads ``fail`` (its failure is ``refuted``, a finding); the owner is checked as well, so a
    results.json whose claim of ours still reads ``fail`` does not exit 1 either.
    """
    verdicts = [c["verdict"] for c in records]
    if any(c["verdict"] == "fail" and c.get("owner", "paper") == "paper" for c in records):
        return 1
    if "error" in verdicts or any(k["verdict"] == "error" for c in records for k in c["checks"]):
        return 3
    return 0


def _instance_line(result: dict) -> str:
    return f"{result['target']}: {result['outcome']} — {result.get('summary', '')}"


# ------------------------------------------------------------------------------------------- train and report

def _train(args) -> int:
    if args.preset == "ds":
        metrics = train_ds_preset(steps=args.steps, seed=args.seed, device=args.device, out=args.out,
                                  quiet=args.quiet, resume=args.resume, force=args.force)
    else:
        metrics = train_preset(args.preset, steps=args.steps, seed=args.seed, device=args.device, out=args.out,
                               quiet=args.quiet, resume=args.resume, tier=args.tier, output=args.output,
                               force=args.force)
    if not args.quiet:
        print(json.dumps({k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}, indent=2))
    return 0


def _report(args) -> int:
    out = build_report(args.tier, args.out, seed=args.seed, claims=args.claims, force=args.force,
                       quiet=args.quiet, jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                       threads=args.threads, device=args.device)
    results = json.loads((out / "results.json").read_text())
    print(f"report written to {out}/REPORT.md (claims: {summary_counts(results['claims'])})")
    # a report is written whatever the verdicts; only a check that raised makes the command fail
    return 3 if exit_status(results["claims"]) == 3 else 0


# ----------------------------------------------------------------------------------------------------- search

def _strict_json(value):
    """``value`` with every non-finite float as None: JSON has no infinities or NaN (a closest call never scored
    is -inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    return value


def _alpha_arg(text: str | None):
    """``--alpha``: a number, or a candidate's name (left as text for :func:`run_search` to check)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _search(args) -> int:
    cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    # with --json, stdout carries the JSON alone: Hypothesis' own reports (without --quiet) go to stderr
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        result = run_search(args.target, budget=args.budget, seed=args.seed, quiet=args.quiet,
                            alpha=_alpha_arg(args.alpha), init=args.init, form=args.form, cache_dir=cache_dir)
    messages = [result.get("message", "")]
    if args.out and result.get("instance") is not None:
        write_text_atomic(Path(args.out), json.dumps(result["instance"], indent=2) + "\n", overwrite=False)
        messages.append(f"instance written to {args.out}; re-check it with: bma-verify check --instance {args.out}")
    if args.json:
        if not args.quiet:
            print("\n".join(messages), file=sys.stderr)
        print(json.dumps(_strict_json(result), indent=2, allow_nan=False))
    else:
        print("\n".join(messages))
        if not args.quiet:
            print("(the full result, as JSON: add --json)")
    return 1 if result.get("instance") is not None else 0


if __name__ == "__main__":
    sys.exit(main())
