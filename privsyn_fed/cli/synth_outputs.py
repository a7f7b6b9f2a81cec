"""What ``synth`` writes and says: the release's files staged for the commit (the CSV, the model, the
privacy report) and the summary it prints once they are published."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

#: ``synth`` warns when a release's expected 1-way error exceeds the independent method's by more
#: than this (in mean total variation distance).
ONEWAY_MARGIN = 0.01


def report(args: argparse.Namespace, request, result, n_silos: int) -> None:
    """What was written (``request``: ``synth.Request``), what it cost, what it sent, and any warning the
    ledger calls for."""
    from ..audit import dependence_summary

    led = result.ledger
    print(
        f"wrote {request.out}: {result.rows} rows x {len(request.schema.columns)} columns "
        f"from {n_silos} silo(s) by {args.method}" + (" over MPC" if args.mpc else "")
    )
    print(
        f"wrote {request.ledger}: epsilon={led['epsilon']:.4f} at delta={led['delta']:g} spent "
        f"(rho {led['rho_spent']:.6g} of {led['rho_budget']:.6g}) in {len(led['entries'])} mechanism calls"
        + _rounds_ran(led)
    )
    found = dependence_summary(led)
    if found:
        print(f"dependence step: {found}")
    if args.report:
        print(f"wrote {args.report}: the privacy report to hand out with the CSV")
    if args.model_out:
        print(f"wrote {args.model_out}: the model with its ledger (`privsyn-fed sample {args.model_out} --rows N`)")
    traffic = result.info.get("traffic")
    if traffic and traffic.get("layout") == "sites and servers":
        print(
            f"communication: {traffic['silos_active']} of {traffic['silos']} sites answered, at most "
            f"{traffic['max_bytes_per_site'] / 1e3:.1f} kB per site; at most "
            f"{traffic['max_bytes_per_server'] / 1e6:.1f} MB per compute server"
        )
    elif traffic and traffic.get("mpc"):
        print(
            f"communication: {traffic['parties'][0]['rounds']:.0f} message rounds; per party "
            f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.1f} MB on average "
            f"(most {traffic['max_bytes_per_silo'] / 1e6:.1f} MB)"
        )
    elif traffic:
        print(
            f"communication: {traffic['silos_active']} of {traffic['silos']} silos took part; per silo "
            f"{traffic['mean_bytes_sent_per_active_silo'] / 1e6:.3f} MB sent and "
            f"{traffic['mean_bytes_received_per_active_silo'] / 1e6:.3f} MB received on average"
        )
    own, base = (led.get("details", {}).get(k) for k in ("expected_oneway_tvd", "expected_oneway_tvd_independent"))
    if own is not None and base is not None and own > base + ONEWAY_MARGIN:
        print(
            f"warning: expected 1-way error {own:.3f} (mean total variation) against {base:.3f} for --method "
            "independent at this budget: on this little data the baseline may beat this release; compare "
            "them with `privsyn-fed evaluate --baseline`",
            file=sys.stderr,
        )
    if led.get("non_private"):
        print(f"WARNING: {led['non_private']}", file=sys.stderr)
    if led["seeded"]:
        print("warning: seeded run: the noise is predictable from the seed; not a private release", file=sys.stderr)
    print(f"check it with: privsyn-fed audit {request.ledger}")


def _rounds_ran(ledger: dict) -> str:
    """`` over N rounds`` for a ledger that records the rounds that ran (the privacy report's count),
    else nothing."""
    rounds = (ledger.get("details") or {}).get("rounds")
    return f" over {rounds} round{'' if rounds == 1 else 's'}" if isinstance(rounds, int) else ""


def csv_too_large(out: Path, rows: int, columns: int) -> str | None:
    """Why a CSV of ``rows`` rows cannot fit on the output's disk (at least 2 bytes a cell), or None."""
    import shutil

    from ..methods.output import min_csv_bytes

    need, free = min_csv_bytes(rows, columns), shutil.disk_usage(out.parent).free
    if need <= free:
        return None
    return (
        f"{rows:,} rows of {columns} columns need at least {need / 1e9:,.1f} GB, but only {free / 1e9:,.1f} GB is free"
    )


def stage_outputs(args: argparse.Namespace, out: Path, schema, result, final_ledger):
    """The release's files, written in full under temporary names (published on commit)."""
    from ..common import Staged

    full = csv_too_large(out, result.rows, len(schema.columns))
    if full:  # the row count came from the model's noisy total
        import errno

        raise OSError(errno.ENOSPC, full, str(out))
    if not args.quiet and result.rows > 1_000_000:
        print(f"privsyn-fed: writing {result.rows:,} rows to {out}", file=sys.stderr, flush=True)
    staged = Staged()
    try:
        staged.add(out, result.write_csv)
        if args.model_out:
            model = dataclasses.replace(result.model, ledger=final_ledger).to_bytes()
            staged.add(args.model_out, lambda fh: fh.write(model), binary=True)
        if args.report:
            from ..audit import Subject, render_report
            from ..common import SHAREABLE, file_digest

            subject = Subject(Path(out).name, file_digest(staged.files[0][0]))  # the staged CSV, in full
            text = render_report(final_ledger, args.report, subject=subject)
            staged.add(args.report, lambda fh: fh.write(text), mode=SHAREABLE)
    except BaseException:
        staged.discard()
        raise
    return staged
