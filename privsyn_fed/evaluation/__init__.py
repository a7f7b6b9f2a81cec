"""Utility of a release, computed from real rows and not differentially private: workload error,
associations, TSTR and DCR (``evaluate``), SDNist's k-marginal score (``kmarginal_score``), the
HTML quality report (``quality``), and the non-IID splits used in experiments (``partition``)."""

from .kmarginal import kmarginal_score
from .quality import Sources, build_report, check_report_path, read_union, write_report
from .splits import check_partition_folder, partition, write_partition
from .utility import encode, evaluate, marginal_shares, tstr_auc, workload_error

__all__ = [
    "Sources",
    "build_report",
    "check_partition_folder",
    "check_report_path",
    "encode",
    "evaluate",
    "kmarginal_score",
    "marginal_shares",
    "partition",
    "read_union",
    "tstr_auc",
    "workload_error",
    "write_partition",
    "write_report",
]
