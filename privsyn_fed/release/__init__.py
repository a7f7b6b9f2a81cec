"""One release: its request, checked once (``request.ReleaseRequest``), its lifecycle (``run.run_release``:
read, run, stage, settle, publish) and what it returns (``result.SynthResult``). The Python API
(``api.synthesize``), the object API and the command line all build a ``ReleaseRequest`` and run it."""

from .request import OPTIONS, ReleaseRequest, method_options
from .result import SynthResult, refuse_existing
from .run import run_release

__all__ = ["OPTIONS", "ReleaseRequest", "SynthResult", "method_options", "refuse_existing", "run_release"]
