"""``privsyn-fed synth``: release one synthetic CSV of the silos' union, with its ledger. The command
checks its files and options, builds the release's request once (``release.ReleaseRequest.of``),
reserves, and runs it (``release.run_release``); its parser is ``synth_args``."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from ..common import (
    InputError,
    Named,
    check_distinct,
    check_files,
    check_identical_contents,
    named_files,
    read_json,
    table_name,
)
from ..release import OPTIONS, ReleaseRequest, run_release
from ..schema import Schema
from . import quality
from .common import (
    check_budget_options,
    check_mpc_args,
    collusion_cost,
    coordinator_options,
    federation_parties,
    federation_sites,
    servers_layout,
)
from .ledger_target import ledger_output, used_ledger
from .synth_args import method_options_given
from .synth_outputs import csv_too_large, report, stage_outputs

#: Notes on the silos' headers (public), shown on stderr.
log = logging.getLogger("privsyn_fed.cli.synth")


@dataclass
class Request:
    """A checked ``synth`` command: the release's request, what it reads and writes, and the method's
    options as given (a workload file's contents read)."""

    release: ReleaseRequest
    out: Path
    ledger: Path
    silo_files: list[Named]
    options: dict

    @property
    def schema(self) -> Schema:
        """The release's public schema."""
        return self.release.schema


def run(args: argparse.Namespace) -> int:
    """Check everything public, reserve, read the silos, run, then commit the files (``api``)."""
    request = _checked(args)
    budget: contextlib.AbstractContextManager = contextlib.nullcontext()
    if args.budget_store:  # before any silo is read
        from ..accounting import reserved

        budget = reserved(
            args.budget_store,
            args.dataset_id,
            epsilon=args.epsilon,
            delta=args.delta,
            method=args.method,
            total_epsilon=args.total_epsilon,
            ledger=str(request.ledger.resolve()),
            keep_existing=not args.force,  # and a ledger the store references, always (``kept_ledger``)
            new_dataset=args.new_dataset,
        )
    result, n_silos = _release(args, request, budget)
    report(args, request, result, n_silos)
    if args.quality_report:
        return quality.write_after_release(args, request.out, request.ledger, request.schema, request.options)
    return 0


def _checked(args: argparse.Namespace) -> Request:
    """The command's own checks (options, files, headers), then the release's request, checked once
    (``release.ReleaseRequest.of``): everything that needs no private data."""
    from ..schema import ignored_note
    from ..silo import check_table_header, silo_names
    from .common import federation_inputs

    if not args.silo and not servers_layout(args):
        raise InputError("--silo TABLE is needed (once per silo)")
    given = any("=" in s for s in args.silo)
    args.silo_names, paths = zip(*silo_names(args.silo)) if args.silo else ((), ())
    args.silo = list(paths)
    if servers_layout(args):  # the sites' names: their certificates name them
        from ..mpc import local_site_names

        args.silo_names = federation_sites(args) or local_site_names(args.silo, args.silo_names if given else None)
    out = Path(args.out)
    ledger = Path(args.ledger) if args.ledger else out.with_suffix(".ledger.json")
    options = method_options_given(args)
    check_mpc_args(args, args.silo, "--silo")
    if args.report:
        from ..audit import check_report_path

        check_report_path(args.report)
    quality.check_args(args)
    check_budget_options(args, "release")
    silo_files = named_files(("--silo", p) for p in args.silo)
    outputs = [(Named("--out", out), "synthetic CSV"), *ledger_output(args, ledger)]
    if args.model_out:
        outputs.append((Named("--model-out", Path(args.model_out)), "model"))
    if args.report:
        outputs.append((Named("--report", Path(args.report)), "report"))
    holdout = quality.inputs(args)
    outputs += quality.outputs(args)
    stores = [Named("--budget-store", Path(args.budget_store))] if args.budget_store else []
    workload = [Named("--workload", Path(options["workload"]))] if "workload" in options else []
    inputs = [Named("--schema", Path(args.schema)), *silo_files, *holdout, *federation_inputs(args), *workload]
    check_files(inputs, outputs, force=args.force, stores=stores)
    check_distinct(silo_files + holdout)
    if workload:  # public: the marginals the release must answer well
        options["workload"] = read_json(workload[0].path, "workload", "--workload")
    schema = Schema.load(args.schema)
    if workload:  # its faults named in the file's words, before anything else is checked against the schema
        from ..common import OptionError
        from ..methods import declared_workload

        try:
            declared_workload(options["workload"], schema.names)
        except OptionError as exc:
            raise InputError(f"{workload[0].path}: {exc}") from None
    # across hosts the other parties' names come once they join
    names = None if args.federation and not servers_layout(args) else args.silo_names
    n_silos = len(args.silo_names) if servers_layout(args) else federation_parties(args) or len(args.silo)
    request = ReleaseRequest.of(
        args.method,
        args.epsilon,
        args.delta,
        schema,
        names,
        silos=n_silos,
        **{name: getattr(args, name) for name in OPTIONS},
        **options,
    )
    # headers are public: checked before the reservation
    ignored = {table_name(p): check_table_header(p, schema, args.privacy_unit, args.silo_column) for p in args.silo}
    quality.check_schema(args, schema)
    if args.rows and csv_too_large(out, args.rows, len(schema.columns)):
        raise InputError(f"{out}: {csv_too_large(out, args.rows, len(schema.columns))}; ask for fewer --rows")
    for path, ignored_names in ignored.items():  # once the request passed: for every file, an MPC party's too
        if ignored_names:
            log.warning(ignored_note(path, ignored_names))
    return Request(request, out, ledger, silo_files, options)


def _release(args: argparse.Namespace, request: Request, budget: contextlib.AbstractContextManager) -> tuple:
    """Reserve (``budget``), read the silos (or start the MPC parties) and run the release;
    ``(result, number of silos)``. Under ``--mpc`` every party first checks the release's request
    against its own policy: nothing is reserved or read, here or at any party, until all accept."""
    from ..common import checkpoint

    checkpoint()

    def identical():
        if not args.federation:  # every silo file is on this machine
            check_identical_contents(request.silo_files, args.allow_identical_silos)

    def stage(result, final_ledger):
        return stage_outputs(args, request.out, request.schema, result, final_ledger)

    def release(silos, reservation, aggregator=None):
        checked = request.release
        if aggregator is not None:  # the parties' silo names, by rank (a silo column's as they accepted them)
            site = aggregator.request.site
            checked = checked.with_silo_names(aggregator.silo_names if site is None else site[1])
        return run_release(
            checked,
            silos,
            aggregator=aggregator,
            reservation=reservation,
            stage=stage,
            ledger_path=request.ledger,
            overwrite=args.force,
            progress=not args.quiet,
        )

    if servers_layout(args):
        from .synth_sites import release_over_sites

        return release_over_sites(args, request, budget, release, _logger(args))
    if args.mpc:
        from ..mpc import coordinator

        log = _logger(args)
        with coordinator(
            args.schema,
            args.silo,
            seed=args.seed,
            log=log,
            **coordinator_options(args),
            release=request.release.terms(),  # policies first
            silo_names=args.silo_names,
        ) as agg:
            with budget as reservation:
                request.ledger = used_ledger(request.ledger, reservation, args.budget_store)
                identical()
                agg.begin()  # party 0's silo, then each party reserves in its own store and reads its own
                log(collusion_cost(args, len(args.silo)))
                return release([agg.own], reservation, agg), len(agg.silo_names)
    with budget as reservation:
        request.ledger = used_ledger(request.ledger, reservation, args.budget_store)
        identical()
        return release(args.silo, reservation), len(args.silo)


def _logger(args: argparse.Namespace):
    """One line on stderr per message of the run's progress, unless ``--quiet``."""

    def log(message: str) -> None:
        if not args.quiet:
            print(f"privsyn-fed: {message}", file=sys.stderr)

    return log
