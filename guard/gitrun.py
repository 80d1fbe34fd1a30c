"""The one place that spawns git. Runs the real git by absolute path (never a shim),
with an explicit environment carrying GITLANE_INTERNAL=1, and returns frozen results."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from guard.errors import GitError

# Variables git sets for hooks and for `git --git-dir=...`; an engine call names its
# repository with -C, so inherited ones would point it at the wrong place.
_SCRUB = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)

_real_git: str | None = None


def _shim_dirs() -> set[str]:
    dirs = set()
    here = Path(__file__).resolve().parent
    for cand in (here / "_data" / "shims", here.parent / "shims"):
        dirs.add(str(cand))
    extra = os.environ.get("GITLANE_SHIMS_DIR")
    if extra:
        dirs.add(os.path.realpath(extra))
    return dirs


def real_git() -> str:
    """Absolute path of the real git: GITLANE_REAL_GIT, else PATH without our shims."""
    global _real_git
    if _real_git is None:
        forced = os.environ.get("GITLANE_REAL_GIT")
        if forced and os.access(forced, os.X_OK):
            _real_git = forced
        else:
            shims = _shim_dirs()
            path = os.pathsep.join(
                p
                for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                if p and os.path.realpath(p) not in shims
            )
            found = shutil.which("git", path=path)
            _real_git = found or "/usr/bin/git"
    return _real_git


def base_env(extra: Mapping[str, str] | None = None, scrub: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if scrub:
        for k in _SCRUB:
            env.pop(k, None)
    env["GITLANE_INTERNAL"] = "1"
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class GitResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def z(self) -> list[str]:
        """Fields of -z output."""
        return [f for f in self.stdout.split("\0") if f]

    def lines(self) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln]


def run(
    args: Sequence[str],
    cwd: str | os.PathLike[str] | None = None,
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    scrub: bool = True,
) -> GitResult:
    argv = (real_git(), *args)
    proc = subprocess.run(
        argv,
        cwd=os.fspath(cwd) if cwd is not None else None,
        env=base_env(env, scrub=scrub),
        input=input.encode("utf-8", "surrogateescape") if input is not None else None,
        capture_output=True,
        stdin=None if input is not None else subprocess.DEVNULL,
        check=False,
    )
    res = GitResult(
        argv=("git", *args),
        returncode=proc.returncode,
        stdout=proc.stdout.decode("utf-8", "surrogateescape"),
        stderr=proc.stderr.decode("utf-8", "surrogateescape"),
    )
    if check and proc.returncode != 0:
        raise GitError(res.argv, res.returncode, res.stdout, res.stderr)
    return res


def out(args: Sequence[str], cwd: str | os.PathLike[str] | None = None) -> str:
    """stdout of a git command that must succeed, stripped of its final newline."""
    return run(args, cwd).stdout.rstrip("\n")


T = TypeVar("T")
R = TypeVar("R")


def parallel(fn: Callable[[T], R], items: Iterable[T], workers: int = 8) -> list[R]:
    """Map fn over items on a few threads (git calls spend their time in the child)."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(x) for x in todo]
    results: list[R | None] = [None] * len(todo)
    errors: list[BaseException] = []
    nxt = iter(range(len(todo)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None or errors:
                return
            try:
                results[i] = fn(todo[i])
            except BaseException as exc:  # re-raised in the caller's thread
                errors.append(exc)
                return

    threads = [threading.Thread(target=worker) for _ in range(min(workers, len(todo)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]
