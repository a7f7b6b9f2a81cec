"""Run smartnoise-synth's AIM on an integer-coded table (every column categorical, so its own
preprocessing only label-encodes and spends no budget). Runs inside smartnoise's own virtual
environment (it needs mbi<2, which cannot share ours).

usage: python smartnoise_aim.py CODES.csv OUT.csv EPSILON DELTA DEGREE NUM_MARGINALS
"""

import sys
import time

import pandas as pd
from snsynth import Synthesizer

src, out, eps, delta, degree, num = (
    sys.argv[1],
    sys.argv[2],
    float(sys.argv[3]),
    float(sys.argv[4]),
    int(sys.argv[5]),
    int(sys.argv[6]),
)
df = pd.read_csv(src)
start = time.time()
synth = Synthesizer.create("aim", epsilon=eps, delta=delta, degree=degree, num_marginals=num, max_model_size=80)
synth.fit(df, categorical_columns=list(df.columns), preprocessor_eps=0.0)
sample = synth.sample(len(df))
sample.to_csv(out, index=False)
print(f"smartnoise-aim fit+sample {time.time() - start:.1f}s", flush=True)
