"""Secure computation among silos (CrypTen over torch.distributed).

Only the import shim is here so far; the parties, the secure aggregator and the secure select and
measure steps are not available yet.
"""
