"""Crash points: named stages where the crash tests SIGKILL a real `git lane` process
(land, sync, create, release) through GITLANE_TEST_CRASH_AT, to prove that `reconcile`
(or the next command) copes with a process that died right there. Standard library only;
a no-op unless that variable names the stage."""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("GITLANE_TEST_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
