"""The MPC dependencies that `make test` installs are importable (CrypTen through its shim)."""

import subprocess
import sys

from .conftest import run_cli


def test_crypten_imports_through_the_shim():
    code = (
        "from privsyn_fed.mpc.crypten_shim import import_crypten; c = import_crypten(); "
        "import torch; print(c.__version__, torch.__version__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0.4")


def test_console_script_help_lists_commands():
    proc = run_cli("--help", timeout=120)
    assert proc.returncode == 0
    assert "synth" in proc.stdout and "audit" in proc.stdout
