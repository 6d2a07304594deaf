"""Validate libvirt domain XML with libvirt's own schema (``virt-xml-validate``, libvirt-clients).

Under CI=true a missing validator fails the test (``make test`` installs it); elsewhere it skips.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

from conftest import require_tool


def require_validator() -> None:
    """Skip (or fail under CI=true) when virt-xml-validate or xmllint is missing."""
    require_tool("virt-xml-validate")
    require_tool("xmllint")


def validate_domain(xml: str) -> None:
    """Assert that ``xml`` is a valid libvirt ``<domain>`` and has no ``None`` in it."""
    assert "None" not in xml, xml
    require_validator()
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as fh:
        fh.write(xml)
    try:
        proc = subprocess.run(["virt-xml-validate", fh.name, "domain"], capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr + xml
