"""The two failure types of git-lane: a Refusal (expected, with a stable code and the
command that recovers) and a GitError (git failed where it should not have)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Refusal(Exception):
    """An expected 'no': stable `code`, a sentence `message`, the exact `next` commands."""

    def __init__(
        self,
        code: str,
        message: str,
        next: Sequence[str] = (),
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message.rstrip(".")
        self.next = list(next)
        self.details = dict(details or {})

    def line(self) -> str:
        nxt = " ; ".join(self.next) if self.next else "nothing to run"
        return f"git-lane: refused [{self.code}]: {self.message}. Next: {nxt}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": False,
            "code": self.code,
            "message": self.message,
            "next": self.next,
            "details": self.details,
        }


class GitError(Exception):
    """git exited non-zero where the caller required success."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(str(self))

    def __str__(self) -> str:
        return (
            f"command: {' '.join(self.argv)}\n"
            f"return code: {self.returncode}\n"
            f"stdout: {self.stdout.rstrip() or '(none)'}\n"
            f"stderr: {self.stderr.rstrip() or '(none)'}"
        )
