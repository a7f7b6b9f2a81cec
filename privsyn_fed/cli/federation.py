"""``privsyn-fed federation``: provision the certificates of a multi-host MPC federation.

  * ``init``: a new federation CA, and one bundle per member (its private key, its certificate and
    the federation file), like a startup kit for every organisation;
  * ``issue``: a new certificate and key for one member (rotation, or replacing a revoked member),
    with the federation file that pins it;
  * ``describe``: the federation file for certificates issued by an existing CA (no private key
    involved);
  * ``show``: what a federation file says.

Every output is written in full under a temporary name beside its target and renamed into place at
the end, so a failure leaves nothing behind; an existing target is replaced only with ``--force``.
Private keys are created with mode 0600 (``certs.write_private``) and never leave their bundle.

The options and help are in ``federation_args``; what the commands read and check in
``federation_inputs`` and ``federation_ca``; each command in ``federation_init``,
``federation_issue`` and ``federation_describe`` (``describe`` and ``show``); sites in
``federation_sites``; and the README text of the bundles in ``bundle_text``.
"""

from __future__ import annotations

import argparse
from typing import Callable

from .bundle_text import bundle_readme, init_summary, lines_text
from .federation_args import DESCRIBE_EPILOG, INIT_EPILOG, ISSUE_EPILOG, MAX_DAYS, add_parsers
from .federation_ca import ca_facts
from .federation_describe import check_tls_usage, run_describe, run_show
from .federation_init import BUNDLE_FILES, KIT_ENTRIES, run_init, write_bundle
from .federation_inputs import (
    Spec,
    check_addresses,
    check_name,
    check_target,
    checked,
    parse_address,
    parse_member,
    read_file,
    schema_sha256,
)
from .federation_issue import load_ca, run_issue

__all__ = [
    "BUNDLE_FILES",
    "DESCRIBE_EPILOG",
    "INIT_EPILOG",
    "ISSUE_EPILOG",
    "KIT_ENTRIES",
    "MAX_DAYS",
    "Spec",
    "add_parsers",
    "bundle_readme",
    "ca_facts",
    "check_addresses",
    "check_name",
    "check_target",
    "check_tls_usage",
    "checked",
    "init_summary",
    "lines_text",
    "load_ca",
    "parse_address",
    "parse_member",
    "read_file",
    "run",
    "run_describe",
    "run_init",
    "run_issue",
    "run_show",
    "schema_sha256",
    "write_bundle",
]


def run(args: argparse.Namespace) -> int:
    """``federation init``, ``issue``, ``describe`` or ``show``; 0 on success."""
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "init": run_init,
        "issue": run_issue,
        "describe": run_describe,
        "show": run_show,
    }
    return commands[args.federation_command](args)
