"""Corrupted state and odd repositories (issue 13 item 3, part B), all through the real CLI
and the real hooks: every state file git-lane keeps, broken every way a disk or a person
breaks it (truncated, binary garbage, empty, valid JSON of the wrong shape or types, a
number too big, a negative one, a directory, a symlink out of the state dir, a FIFO), and a
repository changed behind git-lane's back (a lane worktree or branch gone or moved, a
detached HEAD, main deleted, a bare hub, submodules, a read-only or full state dir).

Every outcome is a result or a refusal with a registered code (never exit 3, a traceback
or a hang); every refusal's `next`, run as written, recovers; nothing committed is lost;
every JSON state file parses afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import LaneRun, Repo, git
from enginehelp import add_submodule

from guard.errors import CODES

# codes a result (exit 0, or doctor's ok: false) carries; every other one must be registered
RESULT_CODES = {"doctor_failed"}
TIMEOUT = 40  # a command that takes this long on a FIFO hangs


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> LaneRun:
    """`git lane ARGS --json` as a real process; a hang fails the test, it never blocks it."""
    full = {k: v for k, v in os.environ.items() if k not in ("GITLANE_LANE", "GITLANE_ROLE")}
    full.update(env or {})
    try:
        res = subprocess.run(
            [sys.executable, "-m", "guard", *args, "--json"],
            cwd=cwd,
            text=True,
            errors="replace",
            capture_output=True,
            env=full,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"git lane {' '.join(args)} hung") from None
    return LaneRun(res.returncode, res.stdout, res.stderr)


def sh(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("GITLANE_LANE", "GITLANE_ROLE")}
    try:
        return subprocess.run(
            ["sh", "-c", command],
            cwd=cwd,
            text=True,
            errors="replace",
            capture_output=True,
            env=full,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{command} hung") from None


def outcome(r: LaneRun, what: object) -> dict[str, Any]:
    """A result (exit 0) or a refusal (exit 1) with a registered code: never exit 3, a
    traceback, or a code nobody documents."""
    assert r.rc in (0, 1), (what, r.rc, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, (what, r.stderr)
    out = r.json
    if r.rc == 1 and out["code"] not in RESULT_CODES:
        assert out["code"] in CODES, (what, out)
        assert isinstance(out["next"], list), (what, out)
    return dict(out)


def recovers(
    r: LaneRun, cwd: Path, what: object, by_hand: Callable[[], None] | None = None
) -> None:
    """A refusal's `next`, each entry run as written in order, runs. An entry that opens
    an editor on a file (invalid_config's) is a person's step: `by_hand` does the edit."""
    out = outcome(r, what)
    if r.rc != 1 or out["code"] in RESULT_CODES:
        return
    for cmd in out["next"]:
        if cmd.startswith("${EDITOR:-vi} "):
            assert by_hand is not None, (what, out)
            by_hand()
            continue
        res = sh(cmd, cwd)
        assert res.returncode == 0, (what, out["code"], cmd, res.stdout, res.stderr)


def hooked_commit(where: Path, name: str) -> subprocess.CompletedProcess[str]:
    """A plain `git commit` (our hooks run), of one new file."""
    (where / name).write_text(f"{name}\n")
    git(where, "add", "--", name)
    try:
        return subprocess.run(
            ["git", "commit", "-q", "-m", f"add {name}"],
            cwd=where,
            text=True,
            errors="replace",
            capture_output=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"git commit of {name} in {where} hung") from None


def unstage(where: Path, name: str) -> None:
    """Take back a refused commit's new file (no ref moves: a hook that cannot read its
    config refuses every ref transaction, `git reset` included)."""
    git(where, "rm", "-q", "--cached", "-f", "--", name)
    (where / name).unlink()


def hook_refused(res: subprocess.CompletedProcess[str]) -> str | None:
    """The code of a hook's refusal line, None when the commit went through."""
    assert "Traceback" not in res.stderr, res.stderr
    if res.returncode == 0:
        return None
    assert "git-lane: refused [" in res.stderr, res.stderr
    code = res.stderr.split("git-lane: refused [", 1)[1].split("]", 1)[0]
    assert code in CODES, res.stderr
    return code


def kept(repo: Repo, shas: list[str]) -> None:
    """Nothing committed is lost: every commit is still reachable from some ref."""
    for sha in shas:
        holders = git(repo.path, "for-each-ref", "--contains", sha, "--format=%(refname)").stdout
        assert holders.strip(), f"commit {sha} is reachable from no ref"


def state_parses(repo: Repo) -> None:
    """Every JSON state file (what git-lane set aside apart) parses; the log line by line."""
    for p in repo.state_dir.rglob("*"):
        if ".corrupt-" in str(p) or p.is_symlink() or not p.is_file():
            continue
        if p.name.endswith(".json"):
            json.loads(p.read_bytes())
        elif p.name.startswith("events.jsonl"):
            for line in p.read_bytes().splitlines():
                json.loads(line)
        assert not p.name.endswith(".tmp"), f"a temporary file was left: {p}"


def unhooked(repo: Repo, *args: str) -> None:
    """A git command behind git-lane's back: the hooks moved away while it runs."""
    hooks = repo.common_dir / "hooks"
    off = repo.common_dir / "hooks.off"
    hooks.rename(off)
    try:
        git(repo.path, *args)
    finally:
        off.rename(hooks)


@pytest.fixture
def world(repo: Repo, gitlane_on_path: Path) -> tuple[Repo, Path, list[str]]:
    """Hooks installed, gate off, lane alpha landed once (epoch.json, a landed ref) and
    with one more commit, marked ready (a ready mark)."""
    assert cli("install", cwd=repo.path).rc == 0
    assert cli("config", "set", "gate", "off", cwd=repo.path).rc == 0
    lp = repo.create("alpha")
    shas = [repo.commit(lp, "a.txt", "a\n")]
    assert cli("land", "alpha", cwd=repo.path).code == "landed"
    shas.append(repo.commit(lp, "b.txt", "b\n"))
    assert cli("ready", "alpha", cwd=repo.path).rc == 0
    return repo, lp, shas


# -- 1. corrupted state ------------------------------------------------------------------------
def admin_dir(lp: Path) -> Path:
    return Path(git(lp, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())


def where(repo: Repo, lp: Path, name: str) -> Path:
    if name.startswith("ADMIN/"):  # the lane's admin dir: the hooks' own data
        return admin_dir(lp) / name[len("ADMIN/") :]
    if name == "MARKER":  # beside the lanes: the repository a lane belongs to
        return lp.parent / ".git-lane-repo"
    return repo.state_dir / name


KINDS = [
    "truncated",
    "garbage",
    "empty",
    "list",
    "wrong_types",
    "huge_int",
    "negative",
    "directory",
    "symlink_out",
    "fifo",
]


def _retype(v: Any, kind: str) -> Any:
    if isinstance(v, dict):
        return {k: _retype(x, kind) for k, x in v.items()}
    number = isinstance(v, int | float) and not isinstance(v, bool)
    if kind == "wrong_types":
        return [v] if number else ("1" if v is None else {"x": v} if isinstance(v, str) else 7)
    if kind == "huge_int":
        return 10**400 if number else v
    return -7 if number else v  # negative


def break_file(path: Path, good: bytes | None, kind: str, outside: Path) -> None:
    """Put the `kind` of damage where `path` belongs (its good content was `good`)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    body = good if good else b'{"epoch": 3, "schema": 1}'
    try:
        obj: Any = json.loads(body)
    except ValueError:  # key=value text (the lock owner), a bare key (the hooks' marker)
        obj = {"text": body.decode("utf-8", "replace"), "pid": 1}
    if kind == "truncated":
        path.write_bytes(body[: max(1, len(body) // 2)])
    elif kind == "garbage":
        path.write_bytes(b"\x00\xff\xfe\x80garbage\xc3\x28\n\x1b[31m\x00")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "list":
        path.write_bytes(b"[1, 2, null]")
    elif kind in ("wrong_types", "huge_int", "negative"):
        path.write_text(json.dumps(_retype(obj, kind)))
    elif kind == "directory":
        (path / "inside").mkdir(parents=True)
        (path / "inside" / "keep.txt").write_text("someone's\n")
    elif kind == "symlink_out":  # to a good copy outside the state dir: never written through
        outside.write_bytes(body)
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        raise AssertionError(kind)


def put_back(path: Path, good: bytes | None) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if good is not None:
        path.write_bytes(good)


# what each damaged file is read by: the hooks read these (a commit on main and in a lane)
HOOK_READ = {
    "config.toml",
    "epoch.json",
    "locks/integration.owner",
    "ADMIN/gitlane-lane",
    "ADMIN/gitlane-fresh",
}
FILES = [
    "lanes/alpha.json",
    "epoch.json",
    "events.jsonl",
    "locks/integration.owner",
    "locks/integration.flock",
    "ready/alpha.json",
    "setup/alpha.json",
    "config.toml",
    "landing.json",
    "ADMIN/gitlane-lane",
    "ADMIN/gitlane-fresh",
    "MARKER",
]
# one command per damage, rotated per file, so every file meets every command and every
# damage meets every command across the files
ROTATION = ["status", "land", "sync", "create", "doctor", "reconcile", "list", "lane", "release"]


def exercise(repo: Repo, lp: Path, which: str, what: object, by_hand: Callable[[], None]) -> None:
    """Run one command of the rotation; a refusal's next is run and must run."""
    hub = repo.path
    if which == "status":
        r = cli("status", cwd=hub)
    elif which == "land":
        r = cli("land", "alpha", cwd=hub)
    elif which == "sync":
        r = cli("sync", "alpha", cwd=hub)
    elif which == "create":
        r = cli("create", "beta", cwd=hub)
        outcome(r, (what, "create"))
        if r.rc == 0:
            r = cli("release", "beta", cwd=hub)
    elif which == "doctor":
        r = cli("doctor", cwd=hub)
    elif which == "reconcile":
        r = cli("reconcile", cwd=hub)
    elif which == "list":
        r = cli("config", "list", cwd=hub)
    elif which == "lane":  # from inside the lane: discovery through its marker
        r = cli("status", cwd=lp)
    else:  # release: the lane has work, so it is kept (unlanded_work), never lost
        r = cli("release", "alpha", cwd=hub)
        outcome(r, (what, "release"))
        assert (r.rc, r.code) != (0, "released"), (what, r.stdout)
        return  # its next lands and then discards the lane: not run here (tested apart)
    if which == "land" and r.rc == 1 and r.code == "nothing_to_land":
        outcome(r, (what, which))  # its next releases the lane this test goes on using
        return
    recovers(r, hub, (what, which), by_hand)


def damage_every_way(repo: Repo, lp: Path, shas: list[str], name: str) -> Path:
    """Every kind of damage to one state file, each met by a hooked commit and one command
    of the rotation; returns the lane's path (a fresh lane when a next released it)."""
    path = where(repo, lp, name)
    good = path.read_bytes() if path.is_file() else None
    if name == "landing.json":  # only a land killed part way leaves one: a record of it
        good = json.dumps({"token": "t", "stage": "prepared", "lane": "alpha"}).encode()
    outside = repo.path.parent / f"outside-{name.replace('/', '-')}"
    start = FILES.index(name)
    for i, kind in enumerate(KINDS):
        what = (name, kind)
        put_back(path, good)
        break_file(path, good, kind, outside)
        if name in HOOK_READ:
            # a hooked commit on main is refused whatever the state says (fail closed)
            res = hooked_commit(repo.path, "m.txt")
            assert hook_refused(res) in ("main_mutation_refused", "hook_facts_unknown"), what
            unstage(repo.path, "m.txt")
        # a commit in the lane is made, or refused with a code: never a hang or a crash
        w = f"w-{name.replace('/', '-')}-{i}.txt"
        res = hooked_commit(lp, w)
        if hook_refused(res) is None:
            shas.append(git(lp, "rev-parse", "HEAD").stdout.strip())
        else:
            unstage(lp, w)
        exercise(
            repo, lp, ROTATION[(start + i) % len(ROTATION)], what, lambda p=path: put_back(p, good)
        )
        if outside.exists():  # nothing was written through the symlink
            assert outside.read_bytes() == (good or b'{"epoch": 3, "schema": 1}'), what
        if not (lp / ".git").exists():
            # a next that released the lane (its work landed): take a fresh one
            kept(repo, shas)
            lp = repo.create("alpha")
            path = where(repo, lp, name)
    put_back(path, good if name != "landing.json" else None)
    return lp


@pytest.mark.slow  # ~180 CLI runs: the longest test here (still run by .ci/run)
def test_every_state_file_damaged_every_way(world: tuple[Repo, Path, list[str]]) -> None:
    """One repository for the whole matrix (each file put back after each damage): the
    state a damage left behind is part of what the next one meets."""
    repo, lp, shas = world
    for name in FILES:
        lp = damage_every_way(repo, lp, shas, name)
        # whatever the damage left, reconcile repairs what can be told, status reads it all
        r = cli("reconcile", cwd=repo.path)
        recovers(r, repo.path, (name, "reconcile"))
        r = cli("status", cwd=repo.path)
        assert (r.rc, r.code) == (0, "ok"), (name, r.stdout, r.stderr)
        kept(repo, shas)
        state_parses(repo)
    assert git(repo.path, "rev-list", "--merges", "refs/heads/main").stdout == ""
    # the work of every damage lands in the end
    r = cli("land", "alpha", cwd=repo.path)
    assert r.code in ("landed", "nothing_to_land"), r.stdout
    assert (
        git(repo.path, "merge-base", "--is-ancestor", shas[-1], "refs/heads/main").returncode == 0
    )


# -- 2. odd repository states ------------------------------------------------------------------
def lane_ready(repo: Repo, key: str, shas: list[str]) -> Path:
    lp = repo.create(key)
    shas.append(repo.commit(lp, f"{key}.txt", f"{key}\n"))
    return lp


def refused_then_recovered(repo: Repo, args: tuple[str, ...], code: str) -> None:
    r = cli(*args, cwd=repo.path)
    assert (r.rc, r.code) == (1, code), (args, r.stdout, r.stderr)
    recovers(r, repo.path, args)


def lands(repo: Repo, key: str, shas: list[str]) -> None:
    r = cli("land", key, cwd=repo.path)
    # landed now, or already by the refusal's next (which ends with the land)
    assert (r.rc, r.code) in ((0, "landed"), (1, "nothing_to_land")), (r.stdout, r.stderr)
    kept(repo, shas)
    assert (
        git(repo.path, "merge-base", "--is-ancestor", shas[-1], "refs/heads/main").returncode == 0
    )


def says(repo: Repo) -> tuple[dict[str, Any], dict[str, Any]]:
    """What doctor and reconcile say (each a result or a coded refusal)."""
    return outcome(cli("doctor", cwd=repo.path), "doctor"), outcome(
        cli("reconcile", cwd=repo.path), "reconcile"
    )


def test_a_lane_worktree_deleted_by_hand(world: tuple[Repo, Path, list[str]]) -> None:
    repo, lp, shas = world
    shutil.rmtree(lp)
    st = cli("status", cwd=repo.path).json
    assert [ln["state"] for ln in st["lanes"] if ln["key"] == "alpha"] == ["orphaned"]
    doctor, _ = says(repo)
    assert any("git lane repair alpha" in str(c.get("fix")) for c in doctor["checks"]), doctor
    for args in (("sync", "alpha"), ("release", "alpha")):
        outcome(cli(*args, cwd=repo.path), args)
    refused_then_recovered(repo, ("land", "alpha"), "lane_not_active")
    lands(repo, "alpha", shas)
    state_parses(repo)


@pytest.mark.parametrize("how", ["deleted", "backwards", "sideways"])
def test_a_lane_branch_changed_behind_our_back(
    world: tuple[Repo, Path, list[str]], how: str
) -> None:
    repo, lp, shas = world
    if how == "deleted":
        unhooked(repo, "update-ref", "-d", "refs/heads/lane/alpha")
        code = "lane_branch_missing"
    elif how == "backwards":
        unhooked(repo, "update-ref", "refs/heads/lane/alpha", "refs/heads/main")
        code = "lane_branch_moved"
    else:  # onto a commit of its own elsewhere: kept on a rescue branch by the repair
        other = git(repo.path, "commit-tree", "-p", "HEAD", "-m", "elsewhere", "HEAD^{tree}")
        shas.append(other.stdout.strip())
        unhooked(repo, "update-ref", "refs/heads/lane/alpha", shas[-1])
        code = "lane_branch_moved"
    doctor, _ = says(repo)
    assert doctor["code"] == "doctor_failed", doctor
    outcome(cli("status", cwd=repo.path), "status")
    outcome(cli("release", "alpha", cwd=repo.path), "release")
    assert lp.is_dir()
    refused_then_recovered(repo, ("land", "alpha"), code)
    assert git(lp, "rev-parse", "HEAD").stdout.strip() == shas[1]
    shas.append(shas.pop(1))  # the lane's own commit lands; the sideways one is kept
    lands(repo, "alpha", shas)
    state_parses(repo)


def test_a_detached_head_in_a_lane(world: tuple[Repo, Path, list[str]]) -> None:
    repo, lp, shas = world
    git(lp, "checkout", "-q", "--detach")
    res = hooked_commit(lp, "d.txt")
    assert hook_refused(res) == "lane_branch_mismatch"
    for args in (("status",), ("doctor",), ("reconcile",), ("sync", "alpha")):
        outcome(cli(*args, cwd=repo.path), args)
    refused_then_recovered(repo, ("land", "alpha"), "lane_branch_mismatch")
    assert git(lp, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/lane/alpha"
    # detached again, d.txt still staged: release keeps the work, and its next (back on
    # the branch, commit, land, then release) runs as written and loses nothing
    git(lp, "checkout", "-q", "--detach")
    refused_then_recovered(repo, ("release", "alpha"), "unlanded_work")
    st = cli("status", "alpha", "--all", cwd=repo.path).json
    assert st["lanes"][0]["state"] == "released"
    kept(repo, shas)
    show = git(repo.path, "show", "refs/heads/main:d.txt", check=False)
    assert show.stdout == "d.txt\n", show.stderr


@pytest.mark.parametrize("landed", [True, False])
def test_main_deleted_behind_our_back(repo: Repo, gitlane_on_path: Path, landed: bool) -> None:
    """A new first commit would start a second history beside main's: the next puts main
    back where it was (the last landed tip; before any land, the hub's HEAD reflog)."""
    repo.commit(repo.path, "two.txt", "2\n")  # main is more than a first commit git could redo
    assert cli("install", cwd=repo.path).rc == 0
    assert cli("config", "set", "gate", "off", cwd=repo.path).rc == 0
    shas = [repo.sha() or ""]
    lp = lane_ready(repo, "alpha", shas)
    if landed:
        lands(repo, "alpha", shas)
        shas.append(repo.commit(lp, "more.txt", "more\n"))
    was = repo.sha()
    unhooked(repo, "update-ref", "-d", "refs/heads/main")
    for args in (("land", "alpha"), ("sync", "alpha"), ("create", "beta"), ("reconcile",)):
        r = cli(*args, cwd=repo.path)
        assert (r.rc, r.code) == (1, "no_main_branch"), (args, r.stdout)
    doctor = outcome(cli("doctor", cwd=repo.path), "doctor")
    assert doctor["code"] == "doctor_failed"
    res = hooked_commit(lp, "meanwhile.txt")  # the lane's own work goes on
    assert hook_refused(res) is None
    shas.append(git(lp, "rev-parse", "HEAD").stdout.strip())
    refused_then_recovered(repo, ("status",), "no_main_branch")
    assert repo.sha() == was
    assert git(repo.path, "rev-list", "--max-parents=0", "refs/heads/main").stdout.count("\n") == 1
    lands(repo, "alpha", shas)


def test_a_bare_hub(tmp_path: Path, gitlane_on_path: Path) -> None:
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    (src / "README.md").write_text("hi\n")
    git(src, "add", "README.md")
    git(src, "commit", "-q", "-m", "init")
    git(tmp_path, "clone", "-q", "--bare", str(src), "hub.git")
    hub = Repo(tmp_path / "hub.git")
    for args in (("install",), ("config", "set", "gate", "off"), ("status",), ("doctor",)):
        r = cli(*args, cwd=hub.path)
        assert r.rc == 0, (args, r.stdout, r.stderr)
    r = cli("create", "alpha", cwd=hub.path)
    assert r.rc == 0, r.stdout
    lp = Path(r.json["lane"]["path"])
    shas = [hub.commit(lp, "a.txt", "a\n")]
    res = hooked_commit(hub.path.parent / "src", "direct.txt")  # another repository: its own
    assert res.returncode == 0
    lands(hub, "alpha", shas)
    assert cli("status", cwd=lp).rc == 0
    r = cli("release", "alpha", cwd=hub.path)
    assert (r.rc, r.code) == (0, "released"), r.stdout
    # main still moves by land only, in a bare hub too
    assert hub.sha() == shas[0]
    res = subprocess.run(
        ["git", "update-ref", "refs/heads/main", "HEAD~1"],
        cwd=hub.path,
        capture_output=True,
        text=True,
    )
    assert hook_refused(res) == "main_mutation_refused"


def test_a_lane_with_a_submodule(repo: Repo, tmp_path: Path, gitlane_on_path: Path) -> None:
    sub = add_submodule(repo, tmp_path, "mod")
    assert cli("install", cwd=repo.path).rc == 0
    assert cli("config", "set", "gate", "off", cwd=repo.path).rc == 0
    shas: list[str] = []
    lp = lane_ready(repo, "alpha", shas)
    git(lp, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    assert (lp / "mod" / "s.txt").is_file()
    res = hooked_commit(lp / "mod", "inner.txt")  # a commit inside the submodule: its own repo
    assert hook_refused(res) is None
    inner = git(lp / "mod", "rev-parse", "HEAD").stdout.strip()
    git(lp, "add", "mod")
    git(lp, "commit", "-q", "-m", "move the submodule")
    shas.append(git(lp, "rev-parse", "HEAD").stdout.strip())
    for args in (("status",), ("doctor",), ("sync", "alpha")):
        outcome(cli(*args, cwd=repo.path), args)
    lands(repo, "alpha", shas)
    # release: git will not remove a worktree holding a populated submodule unforced; the
    # refusal's next forces it, and the submodule's commit (main records it, it was never
    # pushed anywhere) is kept: the lane's submodule git dirs are copied aside first
    r = cli("release", "alpha", cwd=repo.path)
    outcome(r, "release")
    if r.rc == 1:
        recovers(r, repo.path, "release")
    assert cli("status", "alpha", "--all", cwd=repo.path).json["lanes"][0]["state"] == "released"
    assert git(sub, "cat-file", "-e", inner, check=False).returncode != 0  # not pushed...
    kept_dirs = list((repo.state_dir / "kept").glob("alpha-modules-*/mod"))
    assert kept_dirs, sorted(str(p) for p in repo.state_dir.rglob("*"))
    assert git(kept_dirs[0], "cat-file", "-e", inner, check=False).returncode == 0  # ...kept
    state_parses(repo)


def release_fifos(root: Path) -> None:
    """Give a reader blocked in open(2) of a FIFO under `root` its writer (then EOF): a
    git a failing test leaves blocked ends."""
    for f in [p for p in root.rglob("*") if p.is_fifo()]:
        with contextlib.suppress(OSError):
            os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))


def fixed_by_next(r: LaneRun, hub: Path, args: tuple[str, ...], fifo: Path) -> None:
    """The command refused admin_unreadable naming `fifo` (doctor: a FAIL line saying so),
    and its next (doctor: its fix), run as printed, recovers."""
    if r.code == "doctor_failed":
        # each check that lists the worktrees says so: the first fix is the fix
        check = next(c for c in r.json["checks"] if "[admin_unreadable]" in c["message"])
        assert str(fifo) in check["message"], check
        res = sh(check["fix"], hub)
        assert res.returncode == 0, (check["fix"], res.stdout, res.stderr)
        return
    if args == ("reconcile",):  # the fix itself: it mends before it lists the worktrees
        assert r.code == "reconciled", r.stdout
        mended = [c for c in r.json["changes"] if c["action"] == "admin_mended"]
        names = [os.path.join(c["admin"], n) for c in mended for n in [*c["removed"], *c["kept"]]]
        names += [
            os.path.join(c["admin"], "HEAD")
            for c in mended
            if "HEAD (written back)" in c["removed"]
        ]
        assert str(fifo) in names, r.stdout
        return
    assert r.code == "admin_unreadable", (args, r.stdout)
    assert r.json["details"]["paths"] == [str(fifo)], r.stdout
    assert r.json["next"] == ["git lane reconcile"], r.stdout
    recovers(r, hub, args)


FIFO_COMMANDS = [("status",), ("doctor",), ("reconcile",), ("land", "alpha"), ("sync", "alpha")]


@pytest.mark.parametrize("args", [*FIFO_COMMANDS, ("release", "alpha")])
def test_a_fifo_at_a_lanes_head_reflog_hangs_no_owner_command(
    world: tuple[Repo, Path, list[str]], args: tuple[str, ...]
) -> None:
    """The admin dir is the lane's to write (exec --sandbox grants it, mkfifo included):
    a FIFO at `<admin>/logs/HEAD` (read for the lane's facts by status, doctor,
    reconcile, land, sync and release) is never opened to block; each command ends with
    a result or a coded refusal (red team 13G)."""
    repo, lp, shas = world
    admin = admin_dir(lp)  # git in the lane would block on the FIFO too
    logs_head = admin / "logs" / "HEAD"
    logs_head.unlink()
    os.mkfifo(logs_head)
    try:
        fixed_by_next(cli(*args, cwd=repo.path), repo.path, args, logs_head)
    finally:
        release_fifos(admin)
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)


@pytest.mark.parametrize("args", FIFO_COMMANDS)
def test_a_fifo_at_a_lanes_head_hangs_no_owner_command(
    world: tuple[Repo, Path, list[str]], args: tuple[str, ...]
) -> None:
    """A FIFO at `<admin>/HEAD` blocks git itself (`git worktree list` opens every
    worktree's HEAD): the engine's git calls that read lanes' admin dirs are bounded
    (guard/git.py lane_read_timeout) and its own reads never block; each command ends."""
    repo, lp, shas = world
    admin = admin_dir(lp)  # git in the lane would block on the FIFO too
    head = admin / "HEAD"
    head.unlink()
    os.mkfifo(head)
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}
    try:
        # removes the FIFO, writes HEAD back, reconciles
        fixed_by_next(cli(*args, cwd=repo.path, env=env), repo.path, args, head)
    finally:
        release_fifos(admin)
    assert head.read_text() == "ref: refs/heads/lane/alpha\n"
    st = cli("status", cwd=repo.path)
    assert st.rc == 0 and [ln["state"] for ln in st.json["lanes"]] == ["active"], st.stdout
    kept(repo, shas)


@pytest.mark.parametrize("args", [*FIFO_COMMANDS, ("release", "alpha"), ("gc",)])
def test_a_fifo_as_a_per_worktree_ref_hangs_no_owner_command(
    world: tuple[Repo, Path, list[str]], args: tuple[str, ...]
) -> None:
    """Per-worktree refs (refs/worktree/*, refs/bisect/*) live in the lane's admin dir:
    a FIFO at `<admin>/refs/worktree/x` blocked the for-each-ref of release and gc for
    ever (red team 13J). The whole admin dir but its object store is looked at first."""
    repo, lp, shas = world
    fifo = admin_dir(lp) / "refs" / "worktree" / "x"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}
    try:
        fixed_by_next(cli(*args, cwd=repo.path, env=env), repo.path, args, fifo)
    finally:
        release_fifos(admin_dir(lp))
    assert not os.path.lexists(fifo)
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)


def test_a_fifo_at_a_split_index_shared_file_hangs_no_owner_command(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """A split index makes git open `<admin>/sharedindex.<sha>` too: a FIFO there hung
    the owner's status (red team 13L). The next removes it and the index naming it,
    reads the index back from the lane's commit: the worktree's files are kept."""
    repo, lp, shas = world
    (lp / "b.txt").write_text("uncommitted\n")
    git(lp, "update-index", "--split-index")
    admin = admin_dir(lp)
    shared = sorted(p for p in admin.iterdir() if p.name.startswith("sharedindex."))
    assert len(shared) == 1, sorted(os.listdir(admin))
    shared[0].unlink()
    os.mkfifo(shared[0])
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}
    try:
        fixed_by_next(cli("status", cwd=repo.path, env=env), repo.path, ("status",), shared[0])
    finally:
        release_fifos(admin)
    assert (lp / "b.txt").read_text() == "uncommitted\n"
    assert git(lp, "status", "--porcelain").stdout == " M b.txt\n"
    kept(repo, shas)


def _unreadable_index(lp: Path, how: str) -> Path:
    """Make the lane's index one git cannot read, `how`: a bad header (`corrupt`), or a
    split index whose shared index was emptied (`shared_emptied`). Returns the index."""
    admin = admin_dir(lp)
    if how == "corrupt":
        (admin / "index").write_bytes(b"DIRC" + b"\0" * 40)
    else:
        git(lp, "update-index", "--split-index")
        shared = sorted(p for p in admin.iterdir() if p.name.startswith("sharedindex."))
        assert len(shared) == 1, sorted(os.listdir(admin))
        shared[0].write_bytes(b"")
    return admin / "index"


@pytest.mark.parametrize("how", ["corrupt", "shared_emptied"])
def test_a_lane_index_git_cannot_read_is_no_exit_3_of_the_owners_commands(
    world: tuple[Repo, Path, list[str]], how: str
) -> None:
    """`<admin>/index` (and a shared index it names) is the lane's to write. One git cannot
    parse (a bad signature or checksum, an emptied `sharedindex.*`) was a regular file
    to the engine's look (git.check_index_file), and the owner's status, release, gc,
    land and sync exited 3 on `fatal: index file corrupt` (red team 13S). Each names it
    as admin_unreadable, whose one fix is reconcile's (the index read back from the
    lane's branch, the worktree's files kept)."""
    repo, lp, shas = world
    index = _unreadable_index(lp, how)
    for args in (
        ("status",),
        ("release", "alpha"),
        ("gc", "--dry-run"),
        ("land", "alpha"),
        ("sync", "alpha"),
        ("doctor",),
    ):
        r = cli(*args, cwd=repo.path)
        assert r.rc != 3, (args, r.stdout, r.stderr)
        if r.code == "doctor_failed":
            assert any("[admin_unreadable]" in c["message"] for c in r.json["checks"]), r.stdout
            continue
        assert r.rc == 1 and r.code == "admin_unreadable", (args, r.stdout)
        assert r.json["details"]["paths"] == [str(index)], r.stdout
        assert r.json["next"] == ["git lane reconcile"], r.stdout
    kept(repo, shas)


@pytest.mark.parametrize("how", ["corrupt", "shared_emptied"])
def test_the_admin_unreadable_next_reads_back_an_index_git_cannot_read(
    world: tuple[Repo, Path, list[str]], how: str
) -> None:
    """The next of an index git cannot read, run as printed, reads the index back from
    the lane's commit; the worktree's files (an uncommitted change too) are kept."""
    repo, lp, shas = world
    (lp / "b.txt").write_text("uncommitted\n")
    _unreadable_index(lp, how)
    r = cli("status", cwd=repo.path)
    assert r.code == "admin_unreadable", r.stdout
    recovers(r, repo.path, "status")
    assert cli("status", cwd=repo.path).rc == 0
    assert (lp / "b.txt").read_text() == "uncommitted\n"
    assert git(lp, "status", "--porcelain").stdout == " M b.txt\n"
    kept(repo, shas)


def test_the_admin_unreadable_next_rebuilds_an_index_whose_commondir_was_blocked_too(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """FIFOs at both `commondir` and `index`: the next put commondir back before reading
    the index from HEAD (read-tree ran in an admin dir with no commondir: not a git
    dir, the index never rebuilt; red team 13L)."""
    repo, lp, shas = world
    (lp / "b.txt").write_text("uncommitted\n")
    admin = admin_dir(lp)
    for name in ("commondir", "index"):
        (admin / name).unlink()
        os.mkfifo(admin / name)
    env = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}
    try:
        r = cli("status", cwd=repo.path, env=env)
        assert r.code == "admin_unreadable", r.stdout
        recovers(r, repo.path, "status")
    finally:
        release_fifos(admin)
    assert (admin / "index").is_file() and (admin / "commondir").read_text() == "../..\n"
    assert git(lp, "status", "--porcelain").stdout == " M b.txt\n"
    kept(repo, shas)


def test_the_admin_unreadable_next_rebuilds_the_index_of_a_worktree_of_the_owners(
    world: tuple[Repo, Path, list[str]], tmp_path: Path
) -> None:
    """The owner's own `git worktree add` (no lane record): the next reads its index back
    too (it stopped at `rm`, and the next commit there would delete every file)."""
    repo, _lp, shas = world
    git(repo.path, "branch", "rel")
    own = tmp_path / "own-wt"
    git(repo.path, "worktree", "add", "-q", str(own), "rel")
    admin = admin_dir(own)
    (admin / "index").unlink()
    os.mkfifo(admin / "index")
    try:
        fixed_by_next(cli("status", cwd=repo.path), repo.path, ("status",), admin / "index")
    finally:
        release_fifos(admin)
    assert (admin / "index").is_file()
    assert git(own, "diff", "--cached", "--name-status").stdout == ""
    kept(repo, shas)


@pytest.mark.parametrize("args", [*FIFO_COMMANDS, ("release", "alpha")])
def test_a_lane_admin_dir_without_head_is_named_with_its_fix(
    world: tuple[Repo, Path, list[str]], args: tuple[str, ...]
) -> None:
    """`<admin>/HEAD` removed (by hand, or by a sandboxed lane: its admin dir is granted):
    git calls the lane "not a git repository". Every owner command refuses
    admin_unreadable naming it (status crashed with a GitError, exit 3), and the next, run
    as printed, writes HEAD back from the lane's record; nothing committed is lost."""
    repo, lp, shas = world
    head = admin_dir(lp) / "HEAD"
    head.unlink()
    fixed_by_next(cli(*args, cwd=repo.path), repo.path, args, head)
    assert head.read_text() == "ref: refs/heads/lane/alpha\n"
    st = cli("status", cwd=repo.path)
    assert st.rc == 0 and [ln["state"] for ln in st.json["lanes"]] == ["active"], st.stdout
    kept(repo, shas)


@pytest.mark.parametrize("bad", ["garbage\n", "", "ref: heads/x\n", "dir", "link"])
def test_a_lane_head_git_cannot_take_is_named_with_its_fix(
    world: tuple[Repo, Path, list[str]], bad: str
) -> None:
    """A HEAD that names no branch or commit, or is a directory or a link: the same."""
    repo, lp, shas = world
    head = admin_dir(lp) / "HEAD"
    head.unlink()
    if bad == "dir":
        (head / "x").mkdir(parents=True)
    elif bad == "link":
        head.symlink_to(repo.path / ".git" / "HEAD")
    else:
        head.write_text(bad)
    fixed_by_next(cli("status", cwd=repo.path), repo.path, ("status",), head)
    assert head.read_text() == "ref: refs/heads/lane/alpha\n"
    assert (repo.path / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    kept(repo, shas)


LANE_READ_ENV = {"GITLANE_TEST_LANE_READ_TIMEOUT": "3"}


def test_a_lane_head_naming_no_object_is_no_exit_3_of_status_release_or_gc(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """A detached HEAD of the right form (40 hex digits) naming no commit passes git's look
    at the admin dir and fails every later call in the lane (`bad object HEAD`): status,
    release and gc exited 3 (red team 13S). It is a HEAD git cannot take: the same
    refusal, whose next writes it back naming the lane's branch."""
    repo, lp, shas = world
    head = admin_dir(lp) / "HEAD"
    head.write_text("1" * 40 + "\n")
    for args in (("status",), ("release", "alpha"), ("gc", "--dry-run")):
        r = cli(*args, cwd=repo.path)
        assert r.rc == 1 and r.code == "admin_unreadable", (args, r.stdout, r.stderr)
        assert r.json["details"]["paths"] == [str(head)], r.stdout
    fixed_by_next(cli("status", cwd=repo.path), repo.path, ("status",), head)
    assert head.read_text() == "ref: refs/heads/lane/alpha\n"
    kept(repo, shas)


def test_a_lane_head_symlinked_to_a_fifo_is_fixed_by_the_printed_next(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """`<admin>/HEAD` a symlink (the lane writes its admin dir) to a FIFO in the lane's
    worktree: admin_unreadable names HEAD, but the next only says `rm -f HEAD` and
    `git lane reconcile`: admin_blocked compares the *realpath* of each path with "HEAD"
    (realpath(<admin>/HEAD) is the link's target), so the printf that writes HEAD back is
    left out and the printed `git lane reconcile` refuses admin_unreadable again (HEAD
    now missing). The same for any HEAD link (tests/test_hostile_state.py::
    test_a_lane_head_git_cannot_take_is_named_with_its_fix[link] fails on main too)."""
    repo, lp, shas = world
    admin = admin_dir(lp)
    os.mkfifo(lp / "f")
    (admin / "HEAD").unlink()
    os.symlink(lp / "f", admin / "HEAD")
    try:
        r = cli("status", cwd=repo.path, env=LANE_READ_ENV)
        assert r.code == "admin_unreadable", r.stdout
        recovers(r, repo.path, "status")  # fails: `git lane reconcile` refuses again
    finally:
        release_fifos(lp)
    assert (admin / "HEAD").read_text() == "ref: refs/heads/lane/alpha\n"
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)


def test_a_deep_directory_in_a_lane_admin_dir_is_no_internal_error(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """A lane (exec --sandbox grants its admin dir) makes `<admin>/refs/junk/a/a/...`
    1100 deep (under PATH_MAX): the walk (recursive then) made every owner command that
    lists the worktrees exit 3 with RecursionError (red team 13N). Past 24 levels it is a
    tree git-lane cannot vouch for: admin_unreadable, and reconcile moves it into kept/
    whole. A directory of the admin dir git never enters (`junk/`) is left alone."""
    repo, lp, shas = world
    admin = admin_dir(lp)
    (admin / "refs").mkdir(exist_ok=True)
    for parent in ("refs", "."):
        top = os.open(admin / parent, os.O_RDONLY | os.O_DIRECTORY)
        os.mkdir("junk", dir_fd=top)
        cur = os.open("junk", os.O_RDONLY | os.O_DIRECTORY, dir_fd=top)
        os.close(top)
        for _ in range(1100):
            os.mkdir("a", dir_fd=cur)
            nxt = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
            os.close(cur)
            cur = nxt
        os.close(cur)
    for args in (("status",), ("land", "alpha")):
        r = cli(*args, cwd=repo.path)
        assert r.code == "admin_unreadable", (args, r.rc, r.stdout)
    recovers(r, repo.path, "land")  # reconcile moves the tree into kept/, whole
    assert not (admin / "refs").exists() and (admin / "junk").is_dir()
    assert list((repo.state_dir / "kept").glob("admin-*/refs/junk/a/a"))
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)
    # rm (fts) removes what Python's recursive rmtree cannot (pytest's own cleanup):
    # wherever a part of the chain went (reconcile's admin-*, the oversize check's
    # oversized.*: past 24 levels it moves a directory whole), all of kept/ goes
    for deep in [admin / "junk", repo.state_dir / "kept"]:
        subprocess.run(["rm", "-rf", "--", str(deep)], check=True)


def test_a_fifo_behind_a_symlinked_admin_subdir_hangs_no_owner_command(
    world: tuple[Repo, Path, list[str]],
) -> None:
    """admin_blockers' walk does not go into a symlinked directory (`if not
    e.is_symlink()`), but git does: `<admin>/refs/worktree` a link to a directory of the
    lane's worktree holding a FIFO `x` hangs `git lane gc` (its for-each-ref opens x) past
    the lane read timeout, as 13J's FIFO at refs/worktree/x did before its fix (the same
    with `<admin>/refs` itself a link)."""
    repo, lp, shas = world
    admin = admin_dir(lp)
    linked, leaf = "refs/worktree", "x"
    hidden = lp / ".hidden"
    hidden.mkdir()
    os.mkfifo(hidden / leaf)
    link = admin / linked
    if link.is_dir() and not link.is_symlink():
        for p in link.iterdir():
            p.rename(hidden / p.name) if p.name != leaf else p.unlink()
        link.rmdir()
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(hidden, link)
    try:
        for args in (("gc",), ("release", "alpha"), ("status",), ("land", "alpha")):
            r = cli(*args, cwd=repo.path, env=LANE_READ_ENV)  # a hang is an AssertionError
            assert r.code == "admin_unreadable", (args, r.rc, r.stdout, r.stderr)
        recovers(r, repo.path, "land")
    finally:
        release_fifos(lp)
    assert (hidden / leaf).is_fifo()  # the link went, never what it named
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)


def test_the_admin_unreadable_next_removes_nothing_outside_the_admin_dir(
    world: tuple[Repo, Path, list[str]], tmp_path: Path
) -> None:
    """admin_blockers now reports FIFOs anywhere under the admin dir (refs/worktree/NAME,
    with NAME the lane's choice), and the next removes each by its path, `rm -f --
    <admin>/refs/worktree/NAME`, through directories a sandboxed CMD still running can
    write (the docs' 'engine's own writes where CMD writes' goes through directory fds
    for exactly this). CMD swaps `refs/worktree` for a link to an owner's directory after
    the refusal: the owner's next, run as printed, deletes the owner's file NAME there."""
    repo, lp, shas = world
    admin = admin_dir(lp)
    owners = tmp_path / "owners-dir"
    owners.mkdir()
    (owners / "precious.txt").write_text("the owner's\n")
    wt = admin / "refs" / "worktree"
    wt.mkdir(parents=True)
    os.mkfifo(wt / "precious.txt")
    try:
        r = cli("status", cwd=repo.path, env=LANE_READ_ENV)
    finally:
        release_fifos(admin)
    assert r.code == "admin_unreadable", r.stdout
    # CMD, still running in the sandbox, after the refusal was printed
    (wt / "precious.txt").unlink()
    wt.rmdir()
    os.symlink(owners, wt)
    for cmd in r.json["next"]:
        subprocess.run(["sh", "-c", cmd], cwd=repo.path, check=False)
    assert (owners / "precious.txt").read_text() == "the owner's\n", r.json["next"]
    assert not os.path.lexists(wt)  # the link itself went (reconcile, by fds)
    assert cli("status", cwd=repo.path).rc == 0
    kept(repo, shas)


# -- read-only and full state directories: a filesystem of their own -------------------------
@contextlib.contextmanager
def mounted(target: Path, *opts: str) -> Iterator[None]:
    """A tmpfs at `target` holding what was there (or skip where mount is not allowed)."""
    saved = target.with_name(target.name + ".saved")
    shutil.copytree(target, saved, symlinks=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(("size=256k", *opts)), "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        shutil.rmtree(saved)
        pytest.skip(f"cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): {res.stderr}")
    try:
        shutil.copytree(saved, target, symlinks=True, dirs_exist_ok=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)
        shutil.rmtree(saved, ignore_errors=True)


def remount(target: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(target)], check=True)


def test_a_read_only_state_dir(world: tuple[Repo, Path, list[str]]) -> None:
    """A read-only mount (root ignores mode bits, never a read-only filesystem): reading
    works, every write is a refusal that says so, and once writable the next works."""
    repo, lp, shas = world
    shas.append(repo.commit(lp, "c.txt", "c\n"))
    main = repo.sha()
    with mounted(repo.state_dir):
        remount(repo.state_dir, "ro")
        for args in (("status",), ("doctor",), ("config", "list")):
            assert cli(*args, cwd=repo.path).rc == 0, args
        res = hooked_commit(lp, "ro.txt")  # hooks read the state, never need to write it
        assert hook_refused(res) is None
        shas.append(git(lp, "rev-parse", "HEAD").stdout.strip())
        refusals = {}
        for args in (("ready", "alpha"), ("create", "beta"), ("reconcile",), ("land", "alpha")):
            r = cli(*args, cwd=repo.path)
            outcome(r, args)
            if r.rc == 1:
                refusals[args] = r
        assert refusals[("land", "alpha")].code == "state_write_failed"
        assert repo.sha() == main
        remount(repo.state_dir, "rw")
        for args, r in refusals.items():
            if r.code == "state_write_failed":
                recovers(r, repo.path, args)
        assert repo.sha() == shas[-1]
        kept(repo, shas)
        state_parses(repo)


def test_a_full_state_dir_at_every_write_of_a_land(world: tuple[Repo, Path, list[str]]) -> None:
    """The state dir's filesystem full with 0, 1, 2... pages left: the land stops at each
    of its writes in turn (lock, landing record, epoch, log), as a refusal; freed, its next
    finishes the land; no state file is ever half-written."""
    repo, lp, shas = world
    with mounted(repo.state_dir):
        for free in range(6):
            shas.append(repo.commit(lp, f"full-{free}.txt", f"{free}\n"))
            main = repo.sha()
            filler = repo.state_dir / "filler"
            st = os.statvfs(repo.state_dir)
            room = st.f_bavail * st.f_frsize - free * st.f_frsize
            with open(filler, "wb") as f:
                f.write(b"\0" * max(0, room))
            r = cli("land", "alpha", cwd=repo.path)
            outcome(r, ("land", free))
            status = cli("status", cwd=repo.path)
            outcome(status, ("status", free))
            state_parses(repo)
            filler.unlink()
            if r.rc == 1:
                assert r.code == "state_write_failed", (free, r.stdout)
                recovers(r, repo.path, ("land", free))
            r = cli("reconcile", cwd=repo.path)
            assert r.rc == 0, (free, r.stdout)
            assert repo.sha() == shas[-1] != main, free
            kept(repo, shas)
            state_parses(repo)
