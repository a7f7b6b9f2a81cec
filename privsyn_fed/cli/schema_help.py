"""The help texts of ``privsyn-fed schema``: its epilogs (examples and the drafting rules)."""

DRAFT_EPILOG = """\
examples:
  privsyn-fed schema draft data.csv --out schema.json
  privsyn-fed schema draft data.parquet --out schema.json --categorical-max 20 --bins 16
  privsyn-fed schema draft data.csv --out schema.json --dp 1 --delta 1e-9
  privsyn-fed schema draft north.csv south.parquet --out schema.json --dp 1 --delta 1e-9
  privsyn-fed schema draft north.csv south.csv east.csv --out schema.json --dp 2 --delta 1e-9 --mpc
  privsyn-fed schema from-dictionary dictionary.csv --out schema.json

how a draft is made (one streaming pass over the rows):
  type      a column with at most K distinct values (--categorical-max, default {k}) is categorical,
            categories sorted; with more it is numeric if every value is a number, or if all but at
            most {codes} distinct codes are (e.g. N for "not applicable", in no more cells than the
            numbers: read as missing values, with a note); else it is left out with a note (free
            text, IDs: a release ignores columns the schema does not list)
  IDs       a column of {ids.MIN_IDENTIFIER_ROWS}+ present cells whose distinct values number
            {ids.MIN_IDENTIFIER_DISTINCT}+ and {ids.IDENTIFIER_SHARE:.0%}+ of its cells (over its first {sample:,}),
            of text or of whole numbers filling {ids.DENSE_SHARE:.0%}+ of their range (row numbers, a
            patient id repeated in a panel, names), is left out with a note: a likely identifier
            (--include COL keeps it; --exclude COL leaves out any column, unread)
  atoms     a numeric column's values that hold {atom:.0%} of its numbers or more (a zero income, a
            detection limit; at most {atoms}) are proposed as "atoms", reproduced exactly
  decimals  a numeric column that is not integer gets "decimals": the most places its values show
            (when at most {decimals})
  bounds    [min, max] widened to multiples of the largest power of ten not above max - min
            (17..90 -> 10..90, 1..99 -> 0..100); whole numbers for an integer column
  bins      --bins of equal width; without --dp, a column whose fullest such bin would hold more
            than a quarter of its numbers (atoms aside) is cut at its quantiles, its least and
            greatest values and 0 instead ("edges", with a note; --edges uniform or quantiles decides
            for every column)
  integer   every value of a numeric column is a whole number
  missing   a cell is one of "", NA, N/A, NaN, nan, null, NULL, None or a --missing-value

WITHOUT --dp THE DRAFT IS NOT PRIVATE: its bounds and category lists are read off the rows. It
says so in its "_draft" note; replace them with public knowledge (a data dictionary, a code list)
or draft with --dp before sharing the schema.

with --dp EPSILON --delta DELTA every fact read from the rows is released under differential
privacy and charged to a ledger (default: the schema's name with .ledger.json; check it with
privsyn-fed audit): a noisy profile of the columns (one Gaussian: rows, and per column missing,
non-number and distinct cells, and numbers by their decimal places); for each numeric column a
noisy histogram over the intervals between the grid's numbers (0, +-1.0, 1.1, ..., 9.9 x 10^k; for
a small table 0, +-1, 2, ..., 9 x 10^k), whose outermost intervals with enough values give the
bounds, and a thresholded histogram of its values that proposes atoms (a value holding {atom:.0%}+
of its numbers); for each text column, and
each whole-number column with at most K noisy distinct values (a code), its values whose noisy
count passes a threshold, plus a catch-all category (thresholded Gaussian histogram: approximate
DP, its delta recorded in the ledger). "missing" and "decimals" are drafted only where their noisy
counts clear the noise; the IDs rule above reads the noisy counts and bounds. --categorical-max
bounds the categories released for a column. A budget so small that an interval would need more
than {rank:,} rows to be found is refused before anything is read or reserved, naming the epsilon needed.

Several tables (silos on this machine, with the same columns) are drafted under --dp as their
union, charged once: a record is in one table, so each count is the sum of the tables' counts and
a category only one silo holds is found like any other.

With --mpc the silos are drafted without pooling them: each DATA is its own party process on this
machine, or with --federation each organisation runs `privsyn-fed mpc-party --draft --silo TABLE`
on its own host. The counts are summed on secret shares with every party's own noise; a text
column's values are listed by each silo from its own rows under its own noise (half the column's
budget), then counted over the union on secret shares. A value is found when it is common enough
in at least one silo. Each party checks the request against its --policy (which must list the
method schema-draft) and keeps its own ledger copy.

A column whose bounds or categories the budget did not find is never written degenerate: no
interval or no value passed its threshold, or only one value did, or the bounds would clip (the
catch-all would take) clearly more than {lost:.0%} of its cells (estimated from the noisy counts).
The draft is then refused (exit 2) naming those columns and about the epsilon that would bring the
thresholds down to the counts they show; the ledger keeps the spend. With --leave-unfound such a
column is written as a placeholder ("{unfound}": why) that the schema refuses to load until its
bounds or categories are filled in and that key deleted; after a refusal, the same command with
--leave-unfound reuses the values the draft released (kept beside its ledger) and spends nothing.
Module privsyn_fed.draft_dp states each sensitivity.""".replace("%%", "%")

DICTIONARY_EPILOG = """\
a data dictionary is a CSV file with one row per column of the table:
  name,type,min,max,categories,bins,integer,missing,missing_values,description
  age,numeric,0,120,,,true,,,Age in years
  income,numeric,0,1000000,,16,,true,N,Yearly income (N: not applicable)
  sex,categorical,,,F|M,,,,,
  region,categorical,,,north|south|east|west,,,true,,
name and type (numeric or categorical) are required; a numeric column needs min and max, a
categorical one its categories separated by '|'. bins (default --bins), edges (a numeric
column's public cut points between bins, '|'-separated, e.g. 0|10000|25000|50000|100000 for an
income), scale (linear, or log: bins of equal width in log(1 + x - min)), integer and missing
(true/false, yes/no, 1/0), missing_values ('|'-separated tokens read as missing; they imply
missing), atoms (a numeric column's values that are cells of their own, '|'-separated, e.g. 0|500)
and decimals (the places its synthetic values are rounded to) are optional; description, label,
notes, comment and source columns are ignored.
The dictionary is public knowledge, so the schema it gives may be shared as is."""
