"""``synth`` over sites and compute servers (``--servers``, or a federation file that lists sites),
and, with ``--superlink``, through the sites' agents on Flower (``agent.submit``)."""

from __future__ import annotations

from .common import collusion_cost, coordinator_options, number, positive_int
from .ledger_target import used_ledger


def add_sites_args(m) -> None:
    """``--servers``, ``--site-wait``, ``--superlink`` and ``--approval-wait`` (``synth``'s group of
    secure computation)."""
    m.add_argument(
        "--servers",
        type=positive_int,
        metavar="S",
        help="with --mpc on this machine: sites and compute servers instead of one party per silo. Each "
        "--silo becomes a site that shares each answer once, as one sealed share per server, and S "
        "compute servers (this process is server 0) hold the shares, run select and measure, and add "
        "the noise, so the noise is sqrt(S/(S-T)) times the planned sigma whatever the number of sites "
        "(S at least 2; 3 is usual). Across machines the federation file's 'sites' field chooses this",
    )
    m.add_argument(
        "--site-wait",
        type=number,
        default=60.0,
        metavar="SECONDS",
        help="with sites and servers: how long to wait for the sites to connect before the release goes "
        "on with those present (at least one; default 60)",
    )
    m.add_argument(
        "--superlink",
        metavar="HOST:PORT",
        help="with a federation file that lists sites: hand the release's job to the sites' agents (each "
        "site runs `flower-supernode` with privsyn-fed's ClientApp) through this Flower SuperLink, whose "
        "TLS certificate the federation's CA issued; each agent answers as `site run` does",
    )
    m.add_argument(
        "--approval-wait",
        type=number,
        default=600.0,
        metavar="SECONDS",
        help="with sites and servers: how long each site has to accept or refuse the release (a site "
        "whose policy has a person approve each release waits for them; default 600)",
    )


def release_over_sites(args, request, budget, release, log) -> tuple:
    """``_release`` over sites and compute servers (``--servers``, or a federation file with sites):
    this process is server 0 and reads no silo; the sites check the request against their own
    policies before they read theirs."""
    from ..mpc import DEFAULT_SERVERS, servers_coordinator

    agents: list = []

    def announce(fed) -> None:  # the sites' agents get the job once party 0's sites' port listens
        from ..agent import AgentsRun
        from ..mpc import federation_digest

        run = AgentsRun(args.superlink, fed.ca_pem, fed.name, federation_digest(fed), fed.sites.names,
                        wait_s=args.site_wait, log=log)  # fmt: skip
        agents.append(run)
        run.submit()

    try:
        with servers_coordinator(
            args.schema,
            args.silo,
            servers=args.servers or DEFAULT_SERVERS,
            seed=args.seed,
            log=log,
            site_wait_s=args.site_wait,
            approval_s=args.approval_wait,
            announce=announce if args.superlink else None,
            **coordinator_options(args),
            release=request.release.terms(),
            silo_names=args.silo_names,
        ) as agg:
            with budget as reservation:
                request.ledger = used_ledger(request.ledger, reservation, args.budget_store)
                agg.begin()  # every server opens its ledger copy; every site reserves, reads and opens its own
                log(f"{len(agg.hub.active())} of {len(agg.silo_names)} sites began the release")
                log(collusion_cost(args, len(args.silo)))
                result = release([], reservation, agg), len(agg.silo_names)
        for run in agents:  # the sites were told the release ended: their agents reply
            run.finish()
        return result
    finally:
        for run in agents:
            run.close()
