"""``privsyn-fed site``: what a site of a federation of sites and servers runs, and how a person at
the site decides the releases its policy leaves to them.

  * ``run``: answer a release (``site.client``): connect outward to party 0, check the request
    against the site's policy and budget store, read the silo, answer, leave;
  * ``pending``, ``approve``, ``refuse``: the requests that wait for a person (``site.approvals``);
  * ``log``: check and print the site's audit log (``site.log``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import number, seed_arg

STATE_HELP = "the site's own folder (default TABLE.site/ beside its silo): requests waiting for a person"


def add_parsers(sub) -> None:
    """Add the ``site`` command group to ``sub`` (the subcommands of ``privsyn-fed``)."""
    site = sub.add_parser(
        "site",
        help="a site of a federation of sites and servers: answer a release, or decide one",
        description="What a site runs: `site run` answers a release; `site pending`, `site approve` and "
        '`site refuse` decide the releases whose policy says "approve": "person".',
    )
    ssub = site.add_subparsers(dest="site_command", metavar="ACTION", parser_class=type(site))
    ssub.required = True
    run = ssub.add_parser(
        "run",
        help="answer a release: connect to party 0, check it, answer, leave",
        description="Connect outward to party 0 (the federation file's sites.port on party 0's host), "
        "check the release against this site's --policy and its own budget store (and, where the policy "
        'says "approve": "person", wait for `site approve`), then read the silo and answer the steps '
        "it is asked: each answer is split into one additive share per compute server, each sealed for "
        "its server and signed with this site's key. The site opens no port and exits when the release "
        "ends. Give --cert, --key and --silo once per site: one process may run several sites, each "
        "with its own identity.",
    )
    run.add_argument("--federation", required=True, metavar="FILE", help="the federation file (it lists the sites)")
    run.add_argument(
        "--cert", action="append", required=True, metavar="CERT.pem", help="a site's certificate (names site-<name>)"
    )
    run.add_argument("--key", action="append", required=True, metavar="KEY.pem", help="that site's private key (0600)")
    run.add_argument("--schema", required=True, metavar="SCHEMA", help="the public schema (the federation's)")
    run.add_argument(
        "--silo", action="append", required=True, metavar="TABLE", help="this site's table (once per site)"
    )
    run.add_argument(
        "--policy", action="append", default=[], metavar="POLICY.json", help="a site's policy (none or one per site)"
    )
    run.add_argument(
        "--ledger",
        action="append",
        default=[],
        metavar="LEDGER.json",
        help="a site's ledger copy (none or one per site; default a new file per release in TABLE.ledgers/)",
    )
    run.add_argument("--state", action="append", default=[], metavar="DIR", help=STATE_HELP + " (none or one per site)")
    run.add_argument(
        "--seed", type=seed_arg, metavar="S", help="seeded noise for tests and demos: NOT private; party 0 too"
    )
    run.add_argument("--force", action="store_true", help="replace a --ledger that exists")
    run.add_argument(
        "--connect-timeout",
        type=number,
        default=60.0,
        metavar="SECONDS",
        help="how long to keep trying to reach party 0 (default 60)",
    )
    sl = ssub.add_parser(
        "log",
        help="check and print a site's audit log",
        description="Check a site's audit log (privsyn_fed.site.log: a hash chain of JSON lines; each release "
        "in order; each ledger copy's SHA-256 as logged), then print it one line per entry. Exit 0 when it "
        "checks out, 1 with the problems when it does not, 2 when LOG is missing or not a site log.",
    )
    sl.add_argument("log", metavar="LOG", help="the site's log (JSON lines)")
    sl.add_argument("--json", action="store_true", help="print the entries and the problems as JSON")

    pending = ssub.add_parser("pending", help="the releases that wait for a person's decision at this site")
    pending.add_argument("--state", required=True, metavar="DIR", help=STATE_HELP)
    for action, words in (("approve", "let it run"), ("refuse", "refuse it")):
        p = ssub.add_parser(action, help=f"{words}: a release that waits at this site (`site pending`)")
        p.add_argument("release", metavar="RELEASE", help="the release's id, as `site pending` lists it")
        p.add_argument("--state", required=True, metavar="DIR", help=STATE_HELP)
        p.add_argument("--by", required=True, metavar="NAME", help="who decides (recorded with the decision)")
        if action == "refuse":
            p.add_argument("--why", required=True, metavar="TEXT", help="why (party 0 is told)")


def run(args: argparse.Namespace) -> int:
    """``site ACTION``: its exit status."""
    actions = {"run": run_sites, "log": run_log, "pending": run_pending, "approve": run_decide, "refuse": run_decide}
    return actions[args.site_command](args)


def run_sites(args: argparse.Namespace) -> int:
    """``site run``: run this host's sites until the release ends; the worst exit status."""
    from ..common import InputError, check_files, named_files
    from ..site import site_main, site_setups

    cert, key = args.cert, args.key
    if not (len(cert) == len(key) == len(args.silo)):
        raise InputError(f"give --cert, --key and --silo once per site (got {len(cert)}, {len(key)}, {len(args.silo)})")
    given = [("--federation", args.federation), ("--schema", args.schema)]
    given += [("--cert", c) for c in cert] + [("--key", k) for k in key] + [("--silo", p) for p in args.silo]
    given += [("--policy", p) for p in args.policy]
    check_files(named_files(given), [], force=False)
    setups = site_setups(
        args.federation,
        args.schema,
        list(zip(cert, key, args.silo)),
        policies=args.policy,
        ledgers=args.ledger,
        states=args.state,
        seeded=args.seed is not None,
        connect_s=args.connect_timeout,
        force=args.force,
    )
    return site_main(setups)


def run_pending(args: argparse.Namespace) -> int:
    """``site pending``: one line per waiting request; 0."""
    from ..common import terminal_text
    from ..site import pending

    waiting = pending(Path(args.state))
    for r in waiting:
        request = r.get("request") if isinstance(r.get("request"), dict) else {}
        print(
            terminal_text(
                f"{r.get('release')}  asked {r.get('asked')}  site {r.get('site')}: {request.get('method')} at "
                f"epsilon {request.get('epsilon')}, delta {request.get('delta')}, {request.get('parties')} "
                f"compute servers, collusion {request.get('collusion')}"
            )
        )
    if not waiting:
        print(f"no release waits at {args.state}")
    return 0


def run_decide(args: argparse.Namespace) -> int:
    """``site approve`` / ``site refuse``: record the decision; 0."""
    from ..site import decide

    approved = args.site_command == "approve"
    decision = decide(Path(args.state), args.release, approved, args.by, getattr(args, "why", ""))
    print(f"{args.release}: {'approved' if decision.approved else 'refused'} by {decision.by}")
    return 0


def _fact(e: dict) -> str:
    """The key facts of a site log entry, in words."""
    kind = e.get("kind")
    if kind == "request":
        who = e.get("party0") if isinstance(e.get("party0"), dict) else {}
        return (
            f"{e.get('method')} at epsilon {e.get('epsilon')}, delta {e.get('delta')}, {e.get('servers')} servers, "
            f"collusion {e.get('collusion')}; asked by {who.get('organisation')} ({who.get('role')})"
        )
    if kind == "verdict":
        return f"{e.get('verdict')} by {e.get('by')}" + (f": {e.get('why')}" if e.get("why") else "")
    if kind == "answer":
        return f"step {e.get('step')} {e.get('step_kind')} {e.get('label')}, rho so far {e.get('rho')}"
    run = f", store {e.get('store')} run {e.get('run')}" if e.get("store") is not None else ""
    return f"{e.get('status')}, rho {e.get('rho_spent')}, ledger {e.get('ledger')}{run}"


def run_log(args: argparse.Namespace) -> int:
    """``site log``: check LOG, print it; 0 when it checks out, 1 when it does not."""
    import json
    from pathlib import Path

    from ..common import Named, check_input, terminal_text
    from ..site import check_log, read_log

    check_input(Named("LOG", Path(args.log)), "site log")
    problems = check_log(args.log)
    entries = read_log(args.log, strict=False)
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems, "entries": entries}, indent=2))
        return 1 if problems else 0
    for e in entries:
        print(terminal_text(f"{e['time']}  {str(e['kind']):7}  {e.get('release')}  {_fact(e)}"))
    for p in problems:
        print(f"PROBLEM: {terminal_text(p)}")
    verdict, n = "FAILED" if problems else "OK", len({str(e["release"]) for e in entries})
    print(terminal_text(f"{verdict}: {args.log}: {len(entries)} entries, {n} releases, {len(problems)} problems"))
    return 1 if problems else 0
