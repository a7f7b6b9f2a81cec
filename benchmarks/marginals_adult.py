"""How long a silo takes to answer all 455 three-way marginals of UCI Adult (48,842 rows).

.venv/bin/python benchmarks/marginals_adult.py
"""

import itertools
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from adult import load_adult  # noqa: E402

import privsyn_fed as pf  # noqa: E402

csv, schema_path = load_adult(HERE / "out")
schema = pf.Schema.load(schema_path)
start = time.perf_counter()
silo = pf.Silo.from_csv(csv, schema)
loaded = time.perf_counter() - start
cliques = list(itertools.combinations(range(len(schema.columns)), 3))
start = time.perf_counter()
cells = sum(silo.marginal(c).size for c in cliques)
elapsed = time.perf_counter() - start
print(
    f"read and encode {csv.name}: {loaded:.2f}s; {len(cliques)} three-way marginals ({cells:,} cells): {elapsed:.2f}s"
)
