"""Import CrypTen 0.4.1 on current torch.

CrypTen's ONNX converter imports ``torch.onnx._internal.registration``, which torch 2.9 moved to
``torch.onnx._internal.torchscript_exporter.registration``. The converter is not used for MPC on
tensors, so the moved module is registered under the old name before ``import crypten``.
"""

from __future__ import annotations

import importlib
import sys


def import_crypten():
    """Import and return ``crypten``, first registering the moved ONNX module under its old name."""
    try:
        import torch.onnx._internal.registration  # noqa: F401  (torch <= 2.8)
    except ModuleNotFoundError:
        sys.modules["torch.onnx._internal.registration"] = importlib.import_module(
            "torch.onnx._internal.torchscript_exporter.registration"
        )
    import crypten

    return crypten
