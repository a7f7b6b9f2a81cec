"""``privsyn-fed budget``: show a budget store, or settle a stale reservation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..common import InputError
from .common import positive_int


def add_parsers(sub) -> None:
    """Add the ``budget`` command group to ``sub`` (the subcommands of ``privsyn-fed``)."""
    raw = argparse.RawDescriptionHelpFormatter
    bu = sub.add_parser(
        "budget",
        help="show a budget store, or close a stale reservation",
        description="Read a budget store (`show`), or close the reservation of a run whose process is gone "
        "(`settle`). `privsyn-fed budget ACTION --help` describes each.",
    )
    bsub = bu.add_subparsers(dest="action", metavar="ACTION", parser_class=type(bu))
    bsub.required = True
    store_help = "the budget store file (SQLite, made by `synth --budget-store`)"
    sh = bsub.add_parser(
        "show",
        help="each dataset's total budget, its runs and what is left",
        description="Print the datasets of a budget store, their total budget, every run that drew on it "
        "(reserved, complete, failed, rejected or abandoned) and what is left.",
        epilog="example:\n  privsyn-fed budget show --budget-store budget.db --dataset-id adult",
        formatter_class=raw,
    )
    sh.add_argument("--budget-store", required=True, metavar="STORE.db", help=store_help)
    sh.add_argument("--dataset-id", metavar="ID", help="only this dataset (default: all)")
    sh.add_argument("--json", action="store_true", help="print JSON")
    se = bsub.add_parser(
        "settle",
        help="close a stale reservation at the spend its ledger records",
        description="Close the reservation of a run whose process is gone (killed, or its host lost) at the "
        "spend its ledger records, never below it; the run is then counted as abandoned.",
        epilog="example:\n  privsyn-fed budget settle --budget-store budget.db --run 7",
        formatter_class=raw,
    )
    se.add_argument("--budget-store", required=True, metavar="STORE.db", help=store_help)
    se.add_argument("--run", type=positive_int, required=True, metavar="N", help="the run to close (see `budget show`)")
    se.add_argument(
        "--ledger", metavar="LEDGER.json", help="the run's ledger (default: the path the store recorded for it)"
    )
    se.add_argument(
        "--confirm-stopped",
        action="store_true",
        help="the run was started on another host and you have made sure it has stopped",
    )


def run(args: argparse.Namespace) -> int:
    """``budget show`` (or ``settle``): each dataset's budget, spend, what is left and runs; 0."""
    from ..accounting import BudgetStore, check_dataset_id, rho_to_epsilon
    from ..common import check_regular

    if args.action == "settle":
        return run_settle(args)
    check_regular(Path(args.budget_store), "--budget-store")
    store = BudgetStore(args.budget_store, create=False)
    ids = [check_dataset_id(args.dataset_id)] if args.dataset_id is not None else store.datasets()
    budgets = [store.budget(i) for i in ids]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "dataset": b.id,
                        "total_epsilon": b.total_epsilon,
                        "delta": b.delta,
                        "rho_total": b.rho_total,
                        "rho_committed": b.rho_committed,
                        "epsilon_committed": b.epsilon_committed,
                        "rho_left": b.rho_left,
                        "runs": b.runs,
                    }
                    for b in budgets
                ],
                indent=2,
            )
        )
        return 0
    if not budgets:
        print(f"{args.budget_store}: no datasets yet")
    for b in budgets:
        left_eps = rho_to_epsilon(b.rho_left, b.delta) if b.rho_left > 0 else 0.0
        print(
            f"dataset {_shown(b.id)}: total epsilon {b.total_epsilon:g} at delta {b.delta:g} (rho {b.rho_total:.6g}); "
            f"committed rho {b.rho_committed:.6g} (epsilon {b.epsilon_committed:.4g}); "
            f"left rho {b.rho_left:.6g} (a single further run of up to epsilon {left_eps:.4g})"
        )
        for r in b.runs:
            spent = "all of it (not settled)" if r["rho_spent"] is None else f"{r['rho_spent']:.6g}"
            print(
                f"  run {r['id']}: {_shown(r['method'])}, epsilon {r['epsilon']:g}, reserved rho "
                f"{r['rho_reserved']:.6g}, counted {spent}, {r['status']}, started {r['started']}"
                + (f", ledger {_shown(r['ledger'])}" if r["ledger"] else ", no ledger")
                + (f"; privacy unit {_shown(r['unit'])}" if r.get("unit") else "")
                + (f"; {_shown(r['new_dataset'])}" if r.get("new_dataset") else "")
            )
    return 0


def _shown(text: str) -> str:
    """Text from the store as ``budget show`` prints it: quoted and escaped when it holds a newline
    or another character that is not printable (a store written before ids were checked)."""
    return text if text.isprintable() else repr(text)


def run_settle(args: argparse.Namespace) -> int:
    """``budget settle``: close a stale reservation at its ledger's spend (``settle_stale``); 0."""
    from ..accounting import BudgetStore, settle_stale
    from ..audit import load_ledger
    from ..common import Named, check_regular, check_store

    check_store(Named("--budget-store", Path(args.budget_store)))
    store = BudgetStore(args.budget_store, create=False)
    run = store.run(args.run)
    path = args.ledger or run["ledger"]
    if not path and run["status"] != "reserved":  # a rejected run withdrew its ledger: nothing to settle
        raise InputError(
            f"run {args.run} of {args.budget_store} is already settled ({run['status']}) and has no ledger"
        )
    if not path:
        raise InputError(
            f"run {args.run} recorded no ledger; give --ledger (the run stays counted at its "
            "whole reservation meanwhile)"
        )
    check_regular(Path(path), "--ledger" if args.ledger else f"the ledger of run {args.run}")
    ledger = load_ledger(path)
    spent = settle_stale(store, args.run, ledger, str(path), confirm_stopped=args.confirm_stopped)
    print(
        f"settled run {args.run} of dataset '{run['dataset']}' at rho {spent:.6g} (its ledger's spend; "
        f"it had reserved {run['rho_reserved']:.6g}): abandoned"
    )
    return 0
