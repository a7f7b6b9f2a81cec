"""Utility of a release, computed from real rows and not differentially private: workload error,
associations, TSTR and DCR (``evaluate``), SDNist's k-marginal score (``kmarginal_score``), the
HTML quality report (``quality``), and the non-IID splits used in experiments (``partitioning``)."""

from .kmarginal import kmarginal_score
from .numeric_summary import summary_lines
from .partitioning import check_partition_folder, partition, write_partition
from .per_silo import check_silo_column_for_evaluation, with_silo_names
from .quality import Sources, build_report, check_report_path, read_union, write_report
from .utility import (
    as_text,
    encode,
    evaluate,
    label_auc,
    label_probabilities,
    marginal_shares,
    tstr_auc,
    workload_error,
)

__all__ = [
    "Sources",
    "as_text",
    "build_report",
    "check_partition_folder",
    "check_report_path",
    "check_silo_column_for_evaluation",
    "encode",
    "evaluate",
    "kmarginal_score",
    "label_auc",
    "label_probabilities",
    "marginal_shares",
    "partition",
    "read_union",
    "summary_lines",
    "tstr_auc",
    "with_silo_names",
    "workload_error",
    "write_partition",
    "write_report",
]
