"""``privsyn-fed audit``: re-check a ledger, or check a mechanism empirically."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..common import InputError
from .common import number, positive_int


def add_parsers(sub) -> None:
    """Add the command's parser to ``sub`` (the subcommands of ``privsyn-fed``)."""
    au = sub.add_parser(
        "audit",
        help="re-check a privacy ledger",
        description="Recompute every entry of a ledger from its own parameters, the "
        "total, the budget and the (epsilon, delta) conversion. Exit 0 when "
        "it adds up, 1 with the reasons when it does not. With --site-log, check a site's audit log "
        "instead (and with --budget-store, against the site's budget store).",
    )
    au.add_argument("ledger", metavar="LEDGER.json", nargs="?", help="ledger written by `privsyn-fed synth`")
    au.add_argument("--json", action="store_true", help="print the audit result as JSON")
    au.add_argument(
        "--report", metavar="REPORT.html", help="also write a human-readable report (.html with a chart, or .md)"
    )
    au.add_argument("--force", action="store_true", help="replace --report if it already exists")
    sl = au.add_argument_group("a site's audit log (instead of a ledger)")
    sl.add_argument(
        "--site-log",
        metavar="LOG",
        help="check a site's audit log: its hash chain, each release's order, each ledger copy's SHA-256 "
        "(privsyn_fed.site.log); leave LEDGER.json out",
    )
    sl.add_argument(
        "--budget-store",
        metavar="STORE.db",
        help="with --site-log: also check each release's run in the site's budget store (read only)",
    )
    em = au.add_argument_group(
        "empirical check (instead of a ledger): does an implementation leak more than it claims?"
    )
    em.add_argument(
        "--empirical",
        action="store_true",
        help="run --mechanism many times on D and D plus a canary record and report a "
        "Clopper-Pearson lower bound on its real epsilon; exit 1 if it exceeds the claim",
    )
    em.add_argument(
        "--mechanism",
        choices=["gaussian", "exponential", "aim-round"],
        help="gaussian: a count through the Gaussian mechanism; exponential: a selection "
        "among 100 candidates; aim-round: AIM's selection on a small table",
    )
    em.add_argument("--epsilon", type=number, metavar="E", help="the claimed epsilon")
    em.add_argument("--delta", type=number, default=1e-5, metavar="D", help="the claimed delta (default 1e-5)")
    em.add_argument(
        "--trials",
        type=positive_int,
        metavar="N",
        help="runs on each dataset (default 200000 for gaussian, 10000 otherwise)",
    )
    em.add_argument(
        "--confidence", type=number, default=0.95, metavar="C", help="confidence of the lower bound (default 0.95)"
    )


def run(args: argparse.Namespace) -> int:
    """Audit LEDGER (or run ``--empirical``), writing ``--report`` if asked; 0 if it passes, 1 if not."""
    from ..audit import audit_ledger, load_ledger

    if args.site_log is not None or args.budget_store is not None:
        return run_site_log(args)
    if args.empirical:
        return run_empirical(args)
    if args.ledger is None:
        raise InputError("audit needs a LEDGER.json (or --empirical with --mechanism and --epsilon)")
    if args.mechanism or args.epsilon is not None:
        raise InputError("--mechanism and --epsilon belong to --empirical")

    from ..common import Named, check_files, check_input

    check_input(Named("LEDGER", Path(args.ledger)), "ledger file")
    if args.report:
        from ..audit import check_report_path

        check_report_path(args.report)
        check_files(
            [Named("LEDGER", Path(args.ledger))], [(Named("--report", Path(args.report)), "report")], force=args.force
        )
    ledger = load_ledger(args.ledger)
    report = audit_ledger(ledger)
    if args.report:
        from ..audit import Subject, write_report

        write_report(ledger, args.report, report, Subject(ledger=Path(args.ledger).name))
        print(f"wrote {args.report}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(
            json.dumps(
                {"ok": report.ok, "problems": report.problems, "warnings": report.warnings, "summary": report.summary},
                indent=2,
            )
        )
    else:
        s = report.summary
        if "privacy_unit" in s:
            print(f"privacy unit {s['privacy_unit']}")
        for w in report.warnings:
            print(f"WARNING: {w}")
        for p in report.problems:
            print(f"PROBLEM: {p}")
        verdict = "OK" if report.ok else "FAILED"
        print(
            f"{verdict}: {args.ledger}: method {s['method']}, {s['entries']} entries, rho {s['rho_spent']:.6g} "
            f"of {s['rho_budget']:.6g}, epsilon {s['epsilon']:.6g} at delta {s['delta']:g}"
        )
    return 0 if report.ok else 1


def run_site_log(args: argparse.Namespace) -> int:
    """Check a site's log (``--site-log``), alone or against its ``--budget-store``; 0 if it checks
    out, 1 if not."""
    from ..common import Named, check_input, terminal_text
    from ..site import check_log, read_log

    if args.site_log is None:
        raise InputError("--budget-store belongs to --site-log")
    if args.ledger is not None or args.empirical or args.report:
        raise InputError("--site-log checks a site's log: leave LEDGER.json, --empirical and --report out")
    check_input(Named("--site-log", Path(args.site_log)), "site log")
    if args.budget_store is not None:
        check_input(Named("--budget-store", Path(args.budget_store)), "budget store")
    problems = check_log(args.site_log, store=args.budget_store)
    entries = read_log(args.site_log, strict=False)
    summary = {
        "entries": len(entries),
        "releases": len({str(e["release"]) for e in entries}),
        "budget_store": args.budget_store,
    }
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems, "warnings": [], "summary": summary}, indent=2))
        return 1 if problems else 0
    for p in problems:
        print(f"PROBLEM: {terminal_text(p)}")
    against = f", against {args.budget_store}" if args.budget_store else ""
    print(
        terminal_text(
            f"{'FAILED' if problems else 'OK'}: {args.site_log}: site log, {summary['entries']} entries, "
            f"{summary['releases']} releases{against}"
        )
    )
    return 1 if problems else 0


def run_empirical(args: argparse.Namespace) -> int:
    """Lower-bound ``--mechanism``'s epsilon empirically; 0 if consistent with the claim, 1 if not."""
    from ..audit import empirical_check, runner_for
    from ..noise import OpenDPNoise

    if args.ledger is not None:
        raise InputError("--empirical checks a mechanism, not a ledger: leave LEDGER.json out")
    if args.mechanism is None or args.epsilon is None:
        raise InputError("--empirical needs --mechanism and --epsilon")
    check_args = (args.epsilon, args.delta)
    from ..accounting import check_budget_args

    check_budget_args(*check_args)
    if not 0 < args.confidence < 1:
        raise InputError(f"--confidence must lie in (0, 1), not {args.confidence}")
    trials = args.trials or (200_000 if args.mechanism == "gaussian" else 10_000)
    print(f"running {args.mechanism} {trials} times on D and on D plus a canary (OpenDP noise)...", flush=True)
    result = empirical_check(
        args.mechanism,
        runner_for(args.mechanism, args.epsilon, args.delta, OpenDPNoise()),
        args.epsilon,
        args.delta,
        trials,
        args.confidence,
    )
    verdict = "OK" if result.consistent else "LEAK"
    print(
        f"{verdict}: {args.mechanism}: epsilon >= {result.epsilon_lower_bound:.4f} with {args.confidence:.0%} "
        f"confidence (claimed {args.epsilon:g} at delta {args.delta:g}); most revealing event: {result.event}, "
        f"rates {result.rate_d:.4g} vs {result.rate_d_prime:.4g}"
    )
    if result.consistent:
        print("a lower bound at or below the claim is consistent with it (it cannot prove the claim)")
    return 0 if result.consistent else 1
