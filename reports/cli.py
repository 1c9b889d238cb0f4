"""The ``bma-verify`` command: ``check``, ``train``, ``report`` and ``search`` (see the README and docs/claims.md).

Exit status of ``check``: 1 only when a claim of the paper fails. A conjecture of ours that fails (a claim of ours,
verdict ``refuted``, or a replayed instance that refutes a statement of ours) is a finding and exits 0; 3 when a
check raised. Every command: 2 on bad input (one line naming the flag or file and what is expected; nothing
written), 128 + the signal when stopped (130 Ctrl-C, 143 SIGTERM: workers stopped, temporary files removed, one
line), 141 when the reader of its output has gone (``| head``: quietly, as ``cat`` does).

Start-up is kept short: this module imports the standard library and :mod:`reports.catalog` only, and each command
imports what it needs (torch, SciPy, SymPy, matplotlib: seconds) once its arguments have been checked, so that
``--help``, ``--version``, ``check --list`` and a refused argument answer at once.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

from bma_verify.reports.catalog import CLAIM_IDS, CLAIM_INDEX, DEVICES, KERNEL_CLAIMS, TIERS, package_version

PRESETS = ("fig2", "fig3", "fig5", "fig6", "ds", "robustness")


# -------------------------------------------------------------------------------------------------- arguments

#: Appended to the help of an option that has a default.
DEFAULT = " (default %(default)s)"


def _check_parser(sub) -> None:
    check = sub.add_parser("check", help="run the checks of some or all claims and print their verdicts "
                                         "(exit status 1 when a claim of the paper fails, 3 when a check raised, "
                                         "2 on bad input; a refuted conjecture of ours exits 0)")
    check.add_argument("claims", nargs="*", metavar="CLAIM",
                       help="claim ids, e.g. lemma3-strict-dpi (default: all; bma-verify check --list lists them)")
    check.add_argument("--tier", choices=TIERS, default="quick",
                       help="sizes of the checks: quick (minutes on a laptop) or full (the paper's sizes)" + DEFAULT)
    check.add_argument("--seed", type=int, default=0,
                       help="seed of every random draw and training run; the same seed gives the same numbers"
                            + DEFAULT)
    check.add_argument("--json", action="store_true", help="print results as JSON")
    check.add_argument("--kernel", metavar="PATH",
                       help="your own kernel (.npy, .csv or .json), a .npz of many or a folder of such files: runs the "
                            "kernel claims (lemma3, lemma4, thm2, thm3, thm1 construction) on it")
    check.add_argument("--init", metavar="stationary|FILE", default="stationary",
                       help="with --kernel: the law μ₀ of x_0 (a .npy/.csv/.json vector) or the stationary law"
                            + DEFAULT)
    check.add_argument("--parents", metavar="FILE|LIST",
                       help="with --kernel: one tree, as a file or a comma list like -1,0,0,1 (default: --trees random "
                            "trees of --H positions)")
    check.add_argument("--trees", type=int, default=20, help="with --kernel: random trees to sweep" + DEFAULT)
    check.add_argument("--H", type=int, default=6, help="with --kernel: positions per random tree" + DEFAULT)
    check.add_argument("--out", metavar="DIR", help="with --kernel: write kernels.csv and kernels.json (one row per "
                                                    "kernel) here")
    check.add_argument("--force", action="store_true", help="with --out: replace an existing table")
    check.add_argument("--units", choices=("nats", "bits"), default="nats",
                       help="with --kernel: units of mutual informations and log-likelihood gaps" + DEFAULT)
    check.add_argument("--rows", action="store_true", help="with --kernel: print every swept (tree, pair) row")
    check.add_argument("--instance", metavar="FILE", help="re-check a saved counterexample instance (JSON)")
    check.add_argument("--list", action="store_true",
                       help="list the claims (id, kinds of check, what each states), run nothing; with --json: "
                            "their full statements and checks")
    check.add_argument("--quiet", action="store_true",
                       help="no progress bar or progress lines on stderr (the results are printed all the same)")
    check.add_argument("--claims-dir", metavar="DIR",
                       help="also the claim folders of DIR (DIR/<claim_id>/claim.py, as in reports/claims/; "
                            "docs/adding-a-claim.md), listed and checked beside the package's claims")
    check.add_argument("--jobs", type=int, default=1,
                       help="worker processes (joblib, one torch thread each) for the sweeps and for the runs of a "
                            "trained check's seeds, e.g. --jobs 2 for the full tier on 2 cores; every run is seeded, "
                            "so the numbers do not depend on it" + DEFAULT)
    _device_arg(check)
    _threads_arg(check)


def _train_parser(sub) -> None:
    train = sub.add_parser("train", help="train a model on a preset of the paper's experiments")
    train.add_argument("--preset", choices=PRESETS, required=True, help="which experiment's model and task")
    train.add_argument("--steps", type=int, help="training steps (default: the preset's)")
    train.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the data" + DEFAULT)
    train.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                       help="where to train; auto: cuda when there is one" + DEFAULT)
    train.add_argument("--out", metavar="DIR", help="write checkpoints and metrics.json here (default: nothing "
                                                    "written)")
    train.add_argument("--quiet", action="store_true", help="no progress bar and no metrics printed")
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    train.add_argument("--force", action="store_true", help="replace a run already in --out")
    train.add_argument("--output", choices=("mixture", "logit"), default="mixture",
                       help="output rule of the structured model (logit: the paper's; mixture: BMA's form); "
                            "not used by the ds preset" + DEFAULT)
    train.add_argument("--tier", choices=TIERS, default="full",
                       help="preset sizes: full = the paper's, quick = the report's quick tier" + DEFAULT)
    _threads_arg(train)


def _report_parser(sub) -> None:
    report = sub.add_parser("report", help="build REPORT.md, report.html, figures/ and results.json")
    report.add_argument("--tier", choices=TIERS, default="quick",
                        help="sizes of the checks: quick (minutes on a laptop) or full (the paper's sizes)" + DEFAULT)
    report.add_argument("--out", metavar="DIR", default="reports/latest", help="the report's folder" + DEFAULT)
    report.add_argument("--force", action="store_true", help="replace an existing report folder")
    report.add_argument("--seed", type=int, default=0,
                        help="seed of every random draw and training run; the same seed gives the same numbers"
                             + DEFAULT)
    report.add_argument("--quiet", action="store_true",
                        help="no progress: neither the bar (on a terminal) nor one line per finished claim "
                             "(otherwise)")
    report.add_argument("--claims", nargs="+", metavar="CLAIM", help="only these claims (default: all)")
    _device_arg(report)
    _threads_arg(report)
    _executor_args(report)


def _search_parser(sub) -> None:
    search = sub.add_parser(
        "search", help="seeded counterexample search (Lemma 3's α, Theorem 3's forms)",
        description="Search for a counterexample to Lemma 3 (lemma3) or Theorem 3 (thm3): random (kernel, tree, "
                    "μ₀) from a seeded generator, chains (ancestor pairs) and non-stationary μ₀ included, a hill "
                    "climb on the worst margin, and the first violation shrunk to a small instance. The result "
                    "depends on --seed and --budget only; the instance records the command that finds it "
                    "(found_by) and replays with 'bma-verify check --instance FILE'. Exit status 1 when the "
                    "counterexample fails a statement of the paper (Theorem 3's J form, a Lemma 3 ratio reaching 1), "
                    "0 when none is found or it refutes a reading of ours (α = δ(π), the exact π̄ form), 2 on bad "
                    "input. Nothing is written but --out.")
    search.add_argument("target", choices=("lemma3", "thm3"), help="the statement to search a counterexample to")
    search.add_argument("--budget", type=int, default=1000, help="number of examples to try" + DEFAULT)
    search.add_argument("--seed", type=int, default=0, help="seed of the search; the same seed finds the same "
                                                            "instance" + DEFAULT)
    search.add_argument("--alpha", help="lemma3: the α candidate to test (dobrushin, doeblin, sdpi, ...) or a number")
    search.add_argument("--init", choices=("any", "stationary", "full-support"), default="any",
                        help="which laws μ₀ of the first token to search over (any: the stationary law or a drawn "
                             "one, near point masses included)" + DEFAULT)
    search.add_argument("--form", choices=("exact", "approximate"), default="exact",
                        help="thm3: the exact π̄ form or the approximate J (marginal) form" + DEFAULT)
    search.add_argument("--states", type=int, help="thm3: a fixed number of states d (2..4)")
    search.add_argument("--min-pi", type=float, help="thm3: every kernel entry at least this (min π)")
    search.add_argument("--max-tv", type=float,
                        help="thm3: only μ₀ within this total-variation distance of the kernel's stationary law")
    search.add_argument("--out", metavar="FILE", help="write the counterexample instance (JSON) here")
    search.add_argument("--json", action="store_true",
                        help="print only the full result as JSON on stdout (every message goes to stderr)")
    search.add_argument("--quiet", action="store_true", help="no progress or messages (with --json: JSON only)")


def build_parser() -> argparse.ArgumentParser:
    """The ``bma-verify`` command line: its subcommands check, train, report and search, with their options."""
    parser = argparse.ArgumentParser(
        prog="bma-verify",
        description="Verify, symbolically, numerically and on trained transformers, the claims of 'How "
                    "Transformers Learn Causal Structures In-Context' (ICLR 2026).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_check_parser, _train_parser, _report_parser, _search_parser):
        add(sub)
    return parser


def _device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=DEVICES, default="cpu",
                   help="where the paper-experiment presets train (exp-fig2 ... exp-robustness; e.g. the full tier's "
                        "GPT and task-shaped runs on a GPU); other checks use the CPU" + DEFAULT)


def _threads_arg(p: argparse.ArgumentParser) -> None:
    # The models are small: one torch thread is fastest on a shared 2-core machine; more threads pay off only for
    # large presets on a big machine.
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads" + DEFAULT)


def _executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes (joblib): the report's checks run in parallel, a claim's checks in one "
                        "worker. With --backend dask: the LocalCluster's workers, which run the sweeps" + DEFAULT)
    p.add_argument("--backend", choices=("joblib", "dask"), default="joblib",
                   help="where the workers run: joblib processes here, or a Dask cluster" + DEFAULT)
    p.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (default: a LocalCluster)")


#: Integer options and their smallest value, checked before any work so that the message names the flag.
INT_MINIMUMS = {"seed": 0, "threads": 1, "jobs": 1, "trees": 1, "H": 2, "steps": 1, "budget": 1}

#: Output options: a folder or file that is the other kind, or that cannot be created (/proc, a read-only mount),
#: is refused before any work.
OUTPUTS = {"report": {"out": "folder"}, "check": {"out": "folder"}, "train": {"out": "folder"},
           "search": {"out": "file"}}


def _check_options(args) -> None:
    """The checks argparse cannot make: integer ranges and writable outputs (ValueError naming the flag)."""
    for name, minimum in INT_MINIMUMS.items():
        value = getattr(args, name, None)
        if value is not None and value < minimum:
            expected = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
            raise ValueError(f"--{name} must be {expected}, got {value}")
    for name, kind in OUTPUTS.get(args.command, {}).items():
        if getattr(args, name, None):
            from bma_verify.reports.io import check_output
            check_output(getattr(args, name), f"--{name}", kind)


def main(argv=None) -> int:
    """Run the command; its exit status (see the module docstring). Every refusal is one line on stderr, exit 2."""
    args = build_parser().parse_args(_joined_negative_lists(sys.argv[1:] if argv is None else list(argv)))
    if "torch" not in sys.modules:  # the same float path on every AVX2 machine (reports/float_path.py)
        from bma_verify.reports.float_path import pin
        pin()
    from bma_verify.reports.executor import stop_on_signals  # NumPy and joblib, not torch (a quarter second)
    try:
        with stop_on_signals():  # SIGINT / SIGTERM: workers stopped, then KeyboardInterrupt unwinds the cleanups
            _check_options(args)
            commands = {"check": check_command, "train": train_command, "report": report_command,
                        "search": search_command}
            status = commands[args.command](args)
            sys.stdout.flush()  # a reader that has gone shows here rather than at exit
            return status
    except BrokenPipeError:
        return _output_closed()
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"bma-verify {args.command}: stopped by {_SIGNAL_NAMES.get(signum, signum)}; {_left_behind(args)}",
              file=sys.stderr)
        return 128 + signum
    except (ValueError, FileExistsError) as exc:
        print(f"bma-verify {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output folder that cannot be written, a file that cannot be read
        from bma_verify.reports.io import destination
        where = f" {destination(exc.filename)}" if exc.filename else ""  # the user's path, not its temporary twin
        print(f"bma-verify {args.command}: error: cannot use{where}: {exc.strerror or exc}; choose a path you can "
              "read and write", file=sys.stderr)
        return 2


def _joined_negative_lists(argv: list[str]) -> list[str]:
    """``--parents -1,0,1`` as ``--parents=-1,0,1``: argparse reads a value that starts with a single '-' and is not
    one number as an option (a tree's root parent is -1, so every parent list starts so)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--parents" and i + 1 < len(argv) and re.match(r"-[^-]", argv[i + 1]):
            out.append(f"--parents={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


_SIGNAL_NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


def _left_behind(args) -> str:
    """What an interrupted command leaves: workers and temporary files are gone; outputs are whole or absent."""
    if args.command == "train" and args.out and Path(args.out).is_dir():
        return f"workers stopped; {args.out} holds only complete checkpoints (continue with --resume)"
    out = getattr(args, "out", None)
    return f"workers stopped, temporary files removed, nothing written{f' to {out}' if out else ''}"


def _output_closed() -> int:
    """stdout's reader has gone (``bma-verify check ... | head``): stop quietly, as cat or grep do, with their
    status 141 (128 + SIGPIPE). stdout is pointed at /dev/null so that Python's flush at exit stays silent."""
    with contextlib.suppress(OSError, ValueError):  # a stdout without a file descriptor (tests) needs nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


# ------------------------------------------------------------------------------------------------------ check

def list_lines(index=None) -> list[str]:
    """``check --list``: a header, then one aligned line per claim: its id, its kinds of check and what it states
    (from ``index``, by default :data:`reports.catalog.CLAIM_INDEX`, without importing a claim)."""
    index = CLAIM_INDEX if index is None else index
    rows = [("claim", "checks", "states")] + [(e.id, ", ".join(e.kinds), e.short) for e in index]
    id_width, kinds_width = (max(len(row[column]) for row in rows) for column in (0, 1))
    return [f"{claim:{id_width}s}  {kinds:{kinds_width}s}  {short}" for claim, kinds, short in rows]


def _list_claims(as_json: bool, index) -> int:
    if as_json:  # the full statements and checks: the claims themselves
        print(json.dumps([{"id": claim.id, "statement": claim.statement,
                           "checks": [{"kind": c.kind, "reading": c.reading, "function": c.function,
                                       "cites": c.cites, "description": c.description} for c in claim.checks]}
                          for claim in _claims_of(index)], indent=2, ensure_ascii=False))
        return 0
    print("\n".join(list_lines(index) + ["(the precise statements, with each check: bma-verify check --list --json)"]))
    return 0


def _claim_index(claims_dir: str | None):
    """The claims ``check`` knows: the package's, and with ``--claims-dir`` the claim folders of that folder."""
    if claims_dir is None:
        return CLAIM_INDEX
    from bma_verify.reports.catalog import claim_index

    try:
        return claim_index(claims_dir)
    except ValueError as exc:
        raise ValueError(f"--claims-dir {claims_dir}: {exc}") from None


def _claims_of(index) -> tuple:
    """The claims of ``index``: the registry's when it is the package's catalog, else each imported in turn."""
    from bma_verify.reports import registry

    return registry.CLAIMS if index is CLAIM_INDEX else registry.load_claims(index)


#: What a replayed instance shows, by whose statement it tests and whether that statement holds on it.
REPLAY_OUTCOMES = {("paper", "fail"): "fail", ("ours", "fail"): "refuted finding reproduced",
                   ("paper", "pass"): "pass", ("ours", "pass"): "pass",
                   # Monte Carlo beyond enumeration whose margin does not clear its standard errors (exit 0)
                   ("paper", "undecided"): "undecided", ("ours", "undecided"): "undecided"}


def instance_owner(instance: dict, result: dict) -> str:
    """Whose statement a replayed instance tests: "paper" or "ours".

    Theorem 3's J form is the paper's statement, its exact π̄ form ours. A Lemma 3 instance names an α (a candidate
    of ours or a number): the paper's lemma itself (some α < 1) fails only when the ratio reaches 1 on a kernel with
    π > 0, the lemma's hypothesis.
    """
    from bma_verify.numerics.claim_sweeps import VIOLATION_RTOL
    from bma_verify.reports.replay import EXTENSION_TARGETS

    if result["target"] in EXTENSION_TARGETS:  # the DAG extension and footnote 1's mappings: statements of ours
        return "ours"
    if result["target"] == "thm3":
        return "paper" if result["form"] == "approximate" else "ours"
    no_alpha_below_one = result["ratio"] >= 1.0 - VIOLATION_RTOL
    return "paper" if no_alpha_below_one and min(min(row) for row in instance["kernel"]) > 0 else "ours"


def _check_instance(args) -> int:
    """``check --instance FILE``: exit 1 only when the instance fails a statement of the paper; a refuted finding of
    ours replays as "refuted finding reproduced" with exit 0."""
    from bma_verify.reports.io import read_json
    from bma_verify.reports.search import as_instance, check_instance

    data = read_json(args.instance, "--instance")
    _use_threads(args.threads)
    try:
        instance = as_instance(data)  # an instance, or a finding / search result holding one
        result = check_instance(instance)
    except ValueError as exc:
        raise ValueError(f"--instance {args.instance}: {exc}") from None
    owner = instance_owner(instance, result)
    result = {**result, "owner": owner, "outcome": REPLAY_OUTCOMES[owner, result["verdict"]]}
    print(json.dumps(result, indent=2) if args.json else _instance_line(result))
    return 1 if result["outcome"] == "fail" else 0


def check_command(args) -> int:
    """``bma-verify check``: the claims' checks (or ``--kernel``, ``--instance``, ``--list``); the exit status."""
    if args.claims_dir and (args.kernel or args.instance):
        raise ValueError("--claims-dir applies to claim checks, not to --kernel or --instance")
    if args.claims_dir and args.jobs > 1:  # a worker process imports checks by name, and cannot find these
        raise ValueError("--claims-dir runs its claims in this process: use --jobs 1")
    index = _claim_index(args.claims_dir)
    if args.list:
        return _list_claims(args.json, index)
    if args.device != "cpu" and (args.kernel or args.instance):
        raise ValueError("--device applies to claim checks that train, not to --kernel or --instance")
    if args.instance:
        return _check_instance(args)
    if args.kernel:
        return _check_kernels(args)
    known = CLAIM_IDS if index is CLAIM_INDEX else tuple(entry.id for entry in index)
    unknown = [c for c in args.claims if c not in known]
    if unknown:
        raise ValueError(f"claim must be one of {', '.join(known)}; got {unknown[0]!r}")
    for option in ("out", "parents"):
        if getattr(args, option):
            raise ValueError(f"--{option} applies with --kernel only")
    if args.units != "nats":
        raise ValueError("--units applies with --kernel only (the report and results.json are in nats and say so)")
    from bma_verify.reports.builder import run_claims
    from bma_verify.reports.core import CheckContext
    from bma_verify.reports.registry import CLAIMS, get_claim

    _use_threads(args.threads)
    if index is CLAIM_INDEX:
        claims = [get_claim(c) for c in args.claims] if args.claims else list(CLAIMS)
    else:
        by_id = {claim.id: claim for claim in _claims_of(index)}
        claims = [by_id[c] for c in args.claims] if args.claims else list(by_id.values())
    with tempfile.TemporaryDirectory() as figures:
        ctx = CheckContext(tier=args.tier, seed=args.seed, figures_dir=Path(figures), quiet=args.quiet or args.json,
                           options={}, device=args.device, jobs=args.jobs)
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
    from bma_verify.reports.render import check_label, finding_line, summary_counts, verdict_label

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
    from bma_verify.reports.io import load_kernels, read_vector

    kernels = load_kernels(args.kernel)
    init = None if args.init == "stationary" else read_vector(args.init, "--init")
    parents = None if args.parents is None else _tree_arg(args.parents)
    # every input read and checked: now the checks themselves (torch for the Theorem 1 construction only)
    from bma_verify.reports.kernel_report import check_kernel_claims, in_units, table_row, write_table

    if "thm1-construction" in claims:  # the only kernel claim that runs torch (importing it takes seconds)
        _use_threads(args.threads)
    results = {name: in_units(check_kernel_claims(kernel, claims=claims, init=init, parents=parents,
                                                  trees=args.trees, H=args.H, seed=args.seed), args.units)
               for name, kernel in kernels.items()}
    table = [table_row(name, r) for name, r in results.items()]
    written = write_table(table, args.out, force=args.force) if args.out else []
    if args.json:
        from bma_verify.reports.core import jsonable  # torch and matplotlib come with it: only for --json

        print(json.dumps(jsonable({"kernels": results, "table": table}), indent=2, ensure_ascii=False,
                         allow_nan=False))
    else:
        _print_kernel_results(results, table, rows=args.rows)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 1 if any(row[c] == "fails" for row in table for c in claims) else 0


def _tree_arg(text: str):
    """``--parents``: one tree, from a file or a comma list, refused naming the flag and the first wrong entry."""
    from bma_verify.numerics.validation import check_parents
    from bma_verify.reports.io import read_vector

    vector = read_vector(text, "--parents")  # a file or list that does not read as numbers is named there
    try:
        return check_parents(vector, single=True)
    except ValueError as exc:
        raise ValueError(f"--parents {text}: {exc}") from None


def _print_kernel_results(results: dict, table: list[dict], *, rows: bool) -> None:
    """Each kernel's facts, verdicts, worst cases and margins (its swept rows with ``rows``), then the batch table."""
    from bma_verify.reports.kernel_text import format_kernel_result, format_kernel_table

    for kernel_id, (name, result) in enumerate(results.items(), start=1):
        print(format_kernel_result(name, result, rows=rows, kernel_id=kernel_id if len(results) > 1 else None))
        print()
    if len(results) > 1:
        print(format_kernel_table(table))


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

def _use_threads(threads: int) -> None:
    """``--threads``: torch's CPU threads, set once the arguments are checked and the work is about to start."""
    import torch

    torch.set_num_threads(threads)


def train_command(args) -> int:
    """``bma-verify train``: train one preset and print its metrics; the exit status."""
    from bma_verify.model.ds import train_ds_preset
    from bma_verify.reports.plans import train_preset

    _use_threads(args.threads)
    created = args.out is not None and not Path(args.out).exists()
    try:
        if args.preset == "ds":
            metrics = train_ds_preset(steps=args.steps, seed=args.seed, device=args.device, out=args.out,
                                      quiet=args.quiet, resume=args.resume, force=args.force)
        else:
            metrics = train_preset(args.preset, steps=args.steps, seed=args.seed, device=args.device, out=args.out,
                                   quiet=args.quiet, resume=args.resume, tier=args.tier, output=args.output,
                                   force=args.force)
    except KeyboardInterrupt:
        if created:  # stopped before its first checkpoint: the folder this run created is removed if still empty
            with contextlib.suppress(OSError):
                Path(args.out).rmdir()
        raise
    if not args.quiet:
        print(json.dumps({k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}, indent=2))
    return 0


def report_command(args) -> int:
    """``bma-verify report``: REPORT.md, report.html, figures/ and results.json in ``--out``; the exit status."""
    from bma_verify.reports.builder import build_report
    from bma_verify.reports.render import summary_counts

    _use_threads(args.threads)
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


def search_command(args) -> int:
    """``bma-verify search``: a counterexample search (the instance written to ``--out`` if found); the exit status."""
    if args.out and Path(args.out).exists():  # refused before the search, not after it
        raise ValueError(f"--out {args.out} already exists; choose a new file name (an instance is never overwritten)")
    from bma_verify.reports.io import write_text_atomic
    from bma_verify.reports.search import run_search

    result = run_search(args.target, budget=args.budget, seed=args.seed, alpha=_alpha_arg(args.alpha),
                        init=args.init, form=args.form, states=args.states, min_pi=args.min_pi,
                        max_tv=args.max_tv)
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
    instance = result.get("instance")
    return 1 if instance is not None and instance_owner(instance, result["check"]) == "paper" else 0


if __name__ == "__main__":
    sys.exit(main())
