"""Commands on data, not releases: ``partition`` (experiments) and ``evaluate``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..common import InputError, terminal_text
from .common import number, positive_int, seed_arg


class Once(argparse.Action):
    """An option that takes one value: given twice, a usage error naming both (never the last one
    silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        """Store ``values``; exit 2 if the option was given already."""
        before = getattr(namespace, self.dest, None)
        if before is not None:
            parser.error(f"{option_string} given twice ({before!r} and {values!r}); it takes one value")
        setattr(namespace, self.dest, values)


def add_parsers(sub) -> None:
    """Add the command's parser to ``sub`` (the subcommands of ``privsyn-fed``)."""
    pa = sub.add_parser(
        "partition",
        help="split one table into client CSVs (experiments)",
        description="Split one table into K client CSVs for experiments, IID or with "
        "label, feature or quantity skew, plus manifest.json (rows and label "
        "histogram per client). Deterministic for a seed; every row lands in "
        "exactly one client and no client is empty. Not a private operation.",
        epilog="example:\n  privsyn-fed partition adult.csv --clients 100 --scheme cluster "
        "--label income --out clients/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pa.add_argument("data", metavar="DATA.csv", help="the table to split")
    pa.add_argument("--clients", type=positive_int, required=True, metavar="K", help="number of clients")
    pa.add_argument(
        "--scheme",
        choices=["iid", "dirichlet", "cluster", "quantity"],
        required=True,
        help="iid: random equal split; dirichlet: label skew, client shares of each label "
        "~ Dir(alpha); cluster: feature skew, one k-means cluster of standardised rows "
        "per client; quantity: client sizes ~ Dir(alpha)",
    )
    pa.add_argument("--label", metavar="COL", help="label column (needed by dirichlet; histograms in the manifest)")
    pa.add_argument(
        "--alpha",
        type=number,
        default=0.5,
        metavar="A",
        help="Dirichlet concentration for dirichlet and quantity (default 0.5; smaller = more skew)",
    )
    pa.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="seed of the split (default 0)")
    pa.add_argument("--out", required=True, metavar="DIR", help="folder for client_000.csv ... and manifest.json")
    pa.add_argument(
        "--force",
        action="store_true",
        help="replace DIR's client files and manifest from an earlier split, as a whole (DIR must hold nothing else)",
    )

    ev = sub.add_parser(
        "evaluate",
        help="compare a synthetic CSV with the real data",
        description="Utility and disclosure measures of a synthetic table against the "
        "real one: workload error on a seeded workload of 3-way marginals, "
        "per-column total variation and Kolmogorov-Smirnov, pairwise "
        "correlation and contingency similarity; with --holdout also "
        "train-on-synthetic/test-on-real ROC-AUC (--label) and distance to "
        "closest record; with --report also a page of figures. Tables may be CSV, gzip "
        "CSV or Parquet. Reads real data: run it where that is allowed.",
        epilog="example:\n  privsyn-fed evaluate --real train.csv --synthetic synthetic.csv "
        "--schema schema.json --holdout test.csv \\\n      --label income --json eval.json --report quality.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument(
        "--real",
        required=True,
        action="append",
        metavar="REAL",
        help="the real rows the release was made from (CSV, gzip-compressed CSV or Parquet, or a DuckDB, "
        "SQLite, PostgreSQL, MySQL or Spark table by URL); repeat it for "
        "several files, e.g. one per silo: their rows are compared as one table (the union). NAME=REAL names "
        "a silo for --silo-column (default: the file's name without its extensions)",
    )
    ev.add_argument(
        "--silo-column",
        action=Once,
        metavar="COLUMN",
        help="the release's silo column (`synth --silo-column`): also compare the rows within each silo (its "
        "share of the rows, mean total variation, workload error); a --real file without the column takes its "
        "silo's name there",
    )
    ev.add_argument(
        "--synthetic", required=True, action=Once, metavar="SYN", help="the synthetic table (CSV, gzip CSV or Parquet)"
    )
    ev.add_argument("--schema", required=True, action=Once, metavar="SCHEMA", help="the public schema of both")
    ev.add_argument(
        "--holdout",
        action="append",
        metavar="HOLDOUT",
        help="real rows NOT used for the release (CSV, gzip CSV or Parquet); repeat it for several files (their union)",
    )
    ev.add_argument("--label", action=Once, metavar="COL", help="label column for train-on-synthetic/test-on-real")
    ev.add_argument(
        "--workload-size",
        type=int,
        default=64,
        metavar="M",
        help="3-way marginals in the error workload (default 64; 0 means all)",
    )
    ev.add_argument("--workload-seed", type=seed_arg, default=0, metavar="S", help="seed of the workload (default 0)")
    ev.add_argument(
        "--model",
        action=Once,
        metavar="MODEL.npz",
        help="the model saved by `synth --model-out`: adds the holdout negative log-likelihood",
    )
    ev.add_argument(
        "--baseline",
        action=Once,
        metavar="BASELINE",
        help="another release of the same data to report beside this one, typically "
        "`synth --method independent` at the same budget: the error a release should beat",
    )
    ev.add_argument(
        "--kmarginal",
        action="store_true",
        help="also report SDNist v2.3's k-marginal score (the NIST CRC benchmark's headline measure, 0 to "
        "1000, higher is better): every pair of columns (less PUMA and INDP), joined with PUMA when the "
        "tables have it, with a score per PUMA in the JSON; and two more SDNist measures: pMSE (how well a "
        "depth-5 tree tells real from synthetic rows, 0 is best) and unique exact matches (real rows unique "
        "in the real table that the synthetic rows repeat exactly). Always reported when the schema has a "
        "PUMA column",
    )
    ev.add_argument("--json", action=Once, metavar="OUT.json", help="also write the full result as JSON")
    ev.add_argument(
        "--report",
        action=Once,
        metavar="QUALITY.html",
        help="also write a visual quality report: one self-contained HTML page of figures (each column's real "
        "and synthetic distributions, pairwise association, the error of each workload marginal; with "
        "--holdout, TSTR and distance to closest record). Computed from the real rows: NOT differentially "
        "private, handle it like the real data",
    )
    ev.add_argument("--force", action="store_true", help="replace --json and --report if they already exist")


def run_partition(args: argparse.Namespace) -> int:
    """``partition``: split DATA.csv into client CSVs and ``manifest.json`` under ``--out``; 0."""
    from ..common import Named, check_input
    from ..evaluation import check_partition_folder, partition, write_partition
    from ..silo import read_csv

    out = Path(args.out)
    check_input(Named("DATA.csv", Path(args.data)))
    check_partition_folder(out, Path(args.data), force=args.force)
    df = read_csv(args.data)
    if args.label is not None and args.label not in df.columns:
        raise InputError(f"{args.data}: label column '{args.label}' is not in the file")
    part = partition(df, args.clients, args.scheme, label=args.label, alpha=args.alpha, seed=args.seed)
    manifest = write_partition(
        df, part, out, source=str(args.data), scheme=args.scheme, label=args.label, alpha=args.alpha, seed=args.seed
    )
    sizes = [f["rows"] for f in manifest["files"]]
    print(
        f"wrote {len(sizes)} client CSVs and manifest.json to {out}: {sum(sizes)} rows, "
        f"client sizes {min(sizes)} to {max(sizes)}"
    )
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """``evaluate``: print the synthetic CSV's measures (with ``--json``, also write them); 0."""
    from ..common import (
        Named,
        Progress,
        check_distinct,
        check_files,
        named_files,
        read_table,
        table_source,
        write_atomic,
    )
    from ..evaluation import evaluate
    from ..schema import Schema
    from ..silo import check_table_header, silo_names

    named = silo_names(args.real) if args.silo_column else [("", p) for p in args.real]
    real_names = [name for name, _ in named]
    reals = [("--real", table_source(p)) for _, p in named]  # files, or engines' tables by URL
    holdouts = [("--holdout", table_source(p)) for p in args.holdout or []]
    tables = named_files(reals + holdouts)  # the files among them
    inputs = [t for t in tables if t.option == "--real"] + [Named("--synthetic", Path(args.synthetic))]
    inputs += [Named("--schema", Path(args.schema))] + [t for t in tables if t.option == "--holdout"]
    inputs += [Named(opt, Path(v)) for opt, v in (("--model", args.model), ("--baseline", args.baseline)) if v]
    outputs = [(Named("--json", Path(args.json)), "evaluation JSON")] if args.json else []
    if args.report:
        from ..evaluation import check_report_path

        check_report_path(args.report, "--report")
        outputs.append((Named("--report", Path(args.report)), "quality report"))
    check_files(inputs, outputs, force=args.force)
    check_distinct(tables)  # a file counted twice, or both fitted on and held out
    schema = Schema.load(args.schema)
    if args.workload_size < 0:
        raise InputError(f"--workload-size must be 0 (all) or positive, not {args.workload_size}")
    if args.label is not None and args.label not in schema.names:
        raise InputError(f"--label: column '{args.label}' is not in the schema")
    if args.silo_column:
        from ..evaluation import check_silo_column_for_evaluation

        check_silo_column_for_evaluation(schema, args.silo_column)
    if args.label is not None and not holdouts:
        raise InputError("--label needs --holdout (the real rows to test the classifier on)")
    if args.model is not None and not holdouts:
        raise InputError("--model needs --holdout (the real rows to compute the likelihood of)")
    ignored = []
    for option, source in reals + holdouts:  # headers first: a wrong table is named before any is read
        extra = check_table_header(source, schema, site_column=args.silo_column if option == "--real" else None)
        if extra:
            s = "s" if len(extra) > 1 else ""
            names = ", ".join(f"'{n}'" for n in extra)
            ignored.append(f"{source} ({option}): column{s} not in the schema, ignored: {names}")
    model = None
    if args.model is not None:
        from ..saved_model import likelihood_model

        model = likelihood_model(args.model)
    holdout = _read_union(holdouts, schema) if holdouts else None
    real = _read_union(reals, schema, args.silo_column, real_names)
    synthetic = read_table(args.synthetic)
    for note in ignored:  # once every table has been read and checked: an error stays one line
        print(f"privsyn-fed: note: {terminal_text(note)}", file=sys.stderr)
    common = dict(
        holdout_df=holdout, label=args.label, workload_size=args.workload_size or None, workload_seed=args.workload_seed
    )
    shown = {**common, "progress": Progress("evaluate")}  # a line on stderr now and then, when it runs long
    report = evaluate(
        real, synthetic, schema, model=model, kmarginal=args.kmarginal or None, silo_column=args.silo_column, **shown
    )
    report["files"] = {"real": list(args.real), "synthetic": str(args.synthetic), "holdout": list(args.holdout or [])}
    base = None
    if args.baseline:
        base = evaluate(real, read_table(args.baseline), schema, kmarginal=args.kmarginal or None, **shown)
        report["baseline"] = {"file": str(args.baseline), **base}
    print(_rows_line(report["rows"], len(reals), len(holdouts)))

    def show(value, key, digits=4):
        """``value``, and the baseline's beside it when there is one."""
        text = "n/a" if value is None else f"{value:.{digits}f}"
        other = key(base) if base is not None else None
        return text if other is None else f"{text} (baseline {other:.{digits}f})"

    w, p = report["workload"], report["pairs"]
    print(
        f"workload error {show(w['error'], lambda b: b['workload']['error'])} "
        f"({w['size']} {w['degree']}-way marginals, seed {w['seed']})"
    )
    print(
        f"mean total variation {show(report['mean_tv'], lambda b: b['mean_tv'])}"
        + (f", mean KS {show(report['mean_ks'], lambda b: b['mean_ks'])}" if report["mean_ks"] is not None else "")
    )
    for key in ("correlation_similarity", "contingency_similarity"):
        if p[key] is not None:
            print(f"{key.replace('_', ' ')} {show(p[key], lambda b, k=key: b['pairs'][k])}")
    if report.get("numeric"):
        from ..evaluation import summary_lines

        print("numeric columns (present values; point masses as shares of all rows):")
        for line in summary_lines(report["numeric"], terminal_text):
            print(f"  {line}")
    if "kmarginal" in report:
        k = report["kmarginal"]
        other = base["kmarginal"]["score"] if base is not None else None
        print(
            f"k-marginal score: {k['score']:.1f} ({k['definition']} definition; 0-1000, higher is better)"
            + ("" if other is None else f" (baseline {other:.1f})")
        )
        pm, um = report["pmse"], report["unique_exact_matches"]
        share = um["matched_share"]
        print(
            f"pMSE {pm['score']:.4f} (0: a depth-{pm['depth']} tree cannot tell the tables apart; "
            f"{pm['largest']:.4f}: it tells every row); unique exact matches: {um['matched']:,} of the "
            f"{um['unique_real']:,} real rows unique in the real table"
            + ("" if share is None else f" ({share:.1%}; lower is better)")
        )
    if "per_silo" in report:
        column = terminal_text(report["per_silo"]["column"])
        print(f"per silo ('{column}'): share of rows real/synthetic, mean TV, workload error")
        for name, e in report["per_silo"]["silos"].items():
            print(
                f"  {terminal_text(name)}: {e['share']['real']:.1%} / {e['share']['synthetic']:.1%}, "
                f"{'n/a' if e['mean_tv'] is None else format(e['mean_tv'], '.4f')}, "
                f"{'n/a' if e['workload_error'] is None else format(e['workload_error'], '.4f')}"
            )
    if "tstr" in report:
        t = report["tstr"]
        print(
            f"ROC-AUC for {terminal_text(t['label'])}: trained on synthetic "
            f"{show(t['auc_synthetic'], lambda b: b['tstr']['auc_synthetic'])}, "
            f"on real {show(t['auc_real'], lambda b: None)}"
        )
    if "dcr" in report:
        d = report["dcr"]
        print(
            f"distance to closest record: median {d['median_to_train']:.3f} to real, "
            f"{d['median_to_holdout']:.3f} to holdout; {d['share_closer_to_train']:.1%} closer to real"
        )
    if "nll" in report:
        print(
            f"holdout negative log-likelihood {report['nll']['mean']:.3f} nats per row "
            f"(median {report['nll']['median']:.3f})"
        )
    for c in report.get("constraints", []):
        print(
            f"{terminal_text(c['constraint'])} ({terminal_text(c['rule'])}): broken by {c['real']['rows']:,} real rows "
            f"({c['real']['share']:.2%}) and {c['synthetic']['rows']:,} synthetic rows ({c['synthetic']['share']:.2%})"
        )
    if base is not None:
        verdict = "better than" if w["error"] < base["workload"]["error"] else "NOT better than"
        print(f"this release is {verdict} the baseline {args.baseline} on workload error")
    if args.json:
        write_atomic(Path(args.json), lambda fh: fh.write(json.dumps(report, indent=2) + "\n"))
        print(f"wrote {args.json}")
    if args.report:
        from ..evaluation import Sources, build_report, write_report

        held = ", ".join(args.holdout) if args.holdout else None
        sources = Sources(list(args.real), str(args.synthetic), str(args.schema), held)
        if args.baseline:
            sources.extra["Baseline (summary only)"] = str(args.baseline)
        page = build_report(real, synthetic, schema, sources, evaluation=report, **common)
        write_report(args.report, page)
        print(f"wrote {args.report}: the quality report, computed from the real rows (NOT differentially private)")
    return 0


def _read_union(files: list, schema, silo_column: str | None = None, names=()):
    """The rows of every table in ``files`` (``(option, path or URL)``) as one frame, each checked on ``schema``
    first so that a bad value is reported with its own file and line. One file is read as it is.
    With a ``silo_column``, a file without it takes its silo's name there (``names``, by position)."""
    import pandas as pd

    from ..common import read_table
    from ..evaluation import as_text, encode, with_silo_names

    frames = []
    for i, (option, source) in enumerate(files):
        frame = read_table(source)
        if silo_column is not None:
            frame = with_silo_names([frame], [names[i]], silo_column)[0]
        encode(frame, schema, f"{source} ({option})")
        frames.append(frame)
    if len(frames) == 1:
        return frames[0]
    return pd.concat([as_text(f) for f in frames], ignore_index=True)


def _rows_line(rows: dict, n_real: int, n_holdout: int) -> str:
    """How many rows were compared: the real rows (the union of ``n_real`` files), the synthetic
    rows and the holdout's."""
    files = lambda n: f" (the union of {n} files)" if n > 1 else ""
    line = f"compared {rows['real']:,} real rows{files(n_real)} with {rows['synthetic']:,} synthetic rows"
    if "holdout" in rows:
        line += f"; holdout {rows['holdout']:,} rows{files(n_holdout)}"
    return line
