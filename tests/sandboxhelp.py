"""What the sandbox tests share: they run only where Landlock can confine (this kernel,
this architecture), and say why they are skipped elsewhere."""

from __future__ import annotations

import pytest

from guard import sandbox

_ABI = sandbox.abi()
NEEDS_LANDLOCK = pytest.mark.skipif(
    bool(sandbox.usable(_ABI)),
    reason=f"no usable Landlock on this kernel: {sandbox.usable(_ABI)} ({sandbox.probe()[1]})",
)
