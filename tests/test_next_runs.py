"""Every refusal's `next` runs as written. For each refusal code we can bring about through
the CLI, the situation is set up in a real repository, the refusal's FIRST `next` entry is
run with `sh -c` exactly as printed, from the same cwd, and it must make progress: exit 0,
or the state moved toward landing, or the refused action now ends differently. Where the
recovery needs a hand edit first (resolving a conflict, fixing what the gate found), the
refusal's message says so; the test does that edit, then runs `next` as printed.

Add a case per new refusal code: `refusal(...)` then `run_next(...)`."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from conftest import TAKEN, LaneRun, Repo, earlier_kept, git, take_name

from guard import git as glgit
from guard.errors import join_next
from enginehelp import (
    flock_holder,
    head,
    lane_with_submodule,
    on_a_terminal,
    owner_file,
    racing_git,
    ready_lane,
)

PLACEHOLDERS = ("<KEY>", "<key>", "<N>", "<value>", "<seconds>", "<another", "<new name>")


@pytest.fixture(autouse=True)
def _gitlane_on_path(gitlane_on_path: Path) -> Path:
    """`git lane` in a `next` runs this checkout (conftest.gitlane_on_path)."""
    return gitlane_on_path


def refusal(
    repo: Repo, code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> LaneRun:
    """Run `git lane ARGS --json`; it must be refused with `code`, and every `next` and
    `alternatives` entry must be a command, not a placeholder."""
    r = repo.jlane(*args, cwd=cwd, env=env)
    assert (r.rc, r.code) == (1, code), (args, r.stdout, r.stderr)
    assert r.json["next"], r.stdout
    for cmd in r.json["next"] + r.json.get("alternatives", []):
        assert not any(p in cmd for p in PLACEHOLDERS), cmd
    return r


def run_next(
    r: LaneRun, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        ["sh", "-c", r.json["next"][0]],
        cwd=cwd,
        text=True,
        capture_output=True,
        env=full,
        timeout=120,
    )


def ok(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode == 0, (res.args, res.stdout, res.stderr)


@pytest.fixture
def gated(repo: Repo) -> Repo:
    repo.config("gate", "off")
    return repo


def test_unknown_lane_from_the_hub(gated: Repo) -> None:
    ready_lane(gated, "alpha")
    for args in (("land",), ("land", "nope"), ("release",), ("sync", "nope"), ("path",)):
        r = refusal(gated, "unknown_lane", *args)
        ok(run_next(r, gated.path))
    # its alternatives name real lanes and run
    r = refusal(gated, "unknown_lane", "land")
    assert r.json["alternatives"] == ["git lane land alpha"]
    ok(run_next(LaneRun(0, json.dumps({"next": r.json["alternatives"]}), ""), gated.path))
    assert gated.sha() == head(gated.lane("path", "alpha").stdout.strip())


def test_invalid_lane_key(gated: Repo) -> None:
    r = refusal(gated, "invalid_lane_key", "create", "Bad_Key")
    ok(run_next(r, gated.path))  # lists the lanes
    assert r.json["alternatives"] == ["git lane create"]
    ok(run_next(LaneRun(0, json.dumps({"next": r.json["alternatives"]}), ""), gated.path))
    assert gated.jlane("status").json["lanes"]  # a lane (auto key) was created
    # naming a lane (not creating one), a bad key never leads to a new lane
    for cmd in (["land"], ["sync"], ["release"], ["status"], ["path"]):
        r = refusal(gated, "invalid_lane_key", *cmd, "Bad_Key")
        assert r.json["next"] == ["git lane status"] and r.json["alternatives"] == [], cmd
        before = gated.jlane("status").json["lanes"]
        ok(run_next(r, gated.path))
        assert gated.jlane("status").json["lanes"] == before


def test_lane_exists_and_branch_exists(gated: Repo) -> None:
    gated.create("alpha")
    r = refusal(gated, "lane_exists", "create", "alpha")
    # one path: a lane of another key; looking at alpha is the other way out
    assert r.json["next"] == ["git lane create"], r.json
    assert r.json["alternatives"] == ["git lane status alpha"], r.json
    ok(run_next(r, gated.path))
    ok(run_next(LaneRun(0, json.dumps({"next": r.json["alternatives"]}), ""), gated.path))
    git(gated.path, "branch", "lane/taken")
    r = refusal(gated, "branch_exists", "create", "taken")
    ok(run_next(r, gated.path))
    ok(run_next(LaneRun(0, json.dumps({"next": r.json["alternatives"]}), ""), gated.path))
    assert gated.jlane("path", "taken").rc == 0


def test_max_lanes(gated: Repo) -> None:
    gated.config("max_lanes", "1")
    gated.create("alpha")
    r = refusal(gated, "max_lanes", "create", "beta")
    ok(run_next(r, gated.path))
    assert gated.jlane("create", "beta").code == "created"


def test_lane_dirty(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    (path / "wip.txt").write_text("wip\n")
    r = refusal(gated, "lane_dirty", "land", "alpha", cwd=path)
    ok(run_next(r, path))
    assert gated.jlane("land", "alpha").code == "landed"
    assert git(gated.path, "show", "main:wip.txt").stdout == "wip\n"


def test_submodule_unreadable_below_a_directory(repo: Repo, tmp_path: Path) -> None:
    """A submodule at `a/sub` whose `.git` names no git dir: its next, printed inside the
    lane and run there as written, moves its files into a new kept/ directory (kept, not
    deleted) and leaves an empty `a/sub`, which git takes as unpopulated (run again, it
    moves nothing more): status reads the lane again, and the lane is clean, so land no
    longer stops at the submodule nor at what was set aside."""
    path, _moddir = lane_with_submodule(repo, tmp_path, "a/sub")
    (path / "a" / "sub" / "s.txt").write_text("work in the submodule\n")
    (path / "a" / "sub" / ".git").write_text(f"gitdir: {tmp_path / 'nowhere'}\n")
    refusal(repo, "submodule_unreadable", "status")
    r = refusal(repo, "submodule_unreadable", "land", "alpha", cwd=path)
    ok(run_next(r, path))
    assert os.listdir(path / "a" / "sub") == []
    [kept] = [k for k in (repo.state_dir / "kept").iterdir() if k.name.startswith("alpha.")]
    aside = kept / "a" / "sub"
    assert (aside / "s.txt").read_text() == "work in the submodule\n"
    assert (aside / ".git").read_text() == f"gitdir: {tmp_path / 'nowhere'}\n"
    ok(run_next(r, path))  # run twice: an empty (unpopulated) directory is left as it is
    assert sorted(os.listdir(path / "a")) == ["sub"]
    st = repo.jlane("status")
    assert st.rc == 0, st.stdout + st.stderr
    [ln] = [x for x in st.json["lanes"] if x["key"] == "alpha"]
    assert not ln["dirty"], ln
    assert repo.jlane("land", "alpha").code not in ("submodule_unreadable", "lane_dirty")


def test_stale_lane_and_no_sync_in_progress(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    gated.commit(gated.path, "m.txt", "m\n")
    r = refusal(gated, "stale_lane", "land", "alpha")
    ok(run_next(r, gated.path))
    r = refusal(gated, "no_sync_in_progress", "continue", "alpha", cwd=path)
    ok(run_next(r, path))  # the lane is fresh: next is land
    assert gated.sha() == head(path)


def test_sync_conflicts_rebase_in_progress_and_conflict_markers(gated: Repo) -> None:
    gated.commit(gated.path, "f.txt", "base\n")
    path = gated.create("alpha")
    gated.commit(path, "f.txt", "lane\n")
    gated.commit(gated.path, "f.txt", "main\n")
    r = gated.jlane("sync", "alpha")
    assert (r.rc, r.code) == (1, "sync_conflicts")
    # next as printed, before the hand edit: continue answers differently (markers)
    res = run_next(r, gated.path)
    assert res.returncode == 1 and "[conflict_markers_present]" in res.stderr
    r = refusal(gated, "rebase_in_progress", "land", "alpha")
    m = refusal(gated, "conflict_markers_present", "continue", "alpha")
    (path / "f.txt").write_text("merged\n")  # the hand edit the message asks for
    ok(run_next(m, gated.path))
    assert gated.jlane("land", "alpha").code == "landed"
    # rebase_in_progress's next is the same continue: it ran above as printed
    assert r.json["next"] == m.json["next"] == ["git lane continue alpha"]


def test_conflict_markers_at_land(gated: Repo) -> None:
    path = gated.create("alpha")
    gated.commit(path, "f.txt", "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")
    r = refusal(gated, "conflict_markers_present", "land", "alpha")
    (path / "f.txt").write_text("a\nb\n")  # the hand edit
    ok(run_next(r, gated.path))
    assert gated.jlane("land", "alpha").code == "landed"


def test_nothing_to_land(gated: Repo) -> None:
    path = gated.create("alpha")
    r = refusal(gated, "nothing_to_land", "land", "alpha", cwd=path)
    ok(run_next(r, path))
    assert gated.jlane("status", "--all").json["lanes"][0]["state"] == "released"


def test_unlanded_work(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    r = refusal(gated, "unlanded_work", "release", "alpha")
    ok(run_next(r, gated.path))
    assert gated.sha() == head(path)
    assert gated.jlane("release", "alpha").code == "released"


def test_gate_failed_and_gate_command_unset(repo: Repo) -> None:
    path = ready_lane(repo, "alpha")
    r = refusal(repo, "gate_command_unset", "land", "alpha")
    ok(run_next(r, repo.path))
    repo.config("gate_command", json.dumps("test -f ok.txt"))
    r = refusal(repo, "gate_failed", "land", "alpha")
    repo.commit(path, "ok.txt", "ok\n")  # the fix the message asks for
    ok(run_next(r, repo.path))
    assert repo.sha() == head(path)


def test_hub_dirty(gated: Repo) -> None:
    ready_lane(gated, "alpha", {"README.md": "lane\n"})
    (gated.path / "README.md").write_text("hub edit\n")
    r = refusal(gated, "hub_dirty", "land", "alpha")
    ok(run_next(r, gated.path))
    assert gated.jlane("land", "alpha").code == "landed"
    assert git(gated.path, "stash", "list").stdout  # the hub's edit is kept


def test_role_forbidden_names_the_own_lane(gated: Repo) -> None:
    ready_lane(gated, "alpha")
    ready_lane(gated, "beta")
    env = {"GITLANE_LANE": "alpha"}
    r = refusal(gated, "role_forbidden", "sync", "beta", env=env)
    ok(run_next(r, gated.path, env))


def test_lane_branch_mismatch(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    git(path, "switch", "-q", "--detach")
    r = refusal(gated, "lane_branch_mismatch", "land", "alpha")
    ok(run_next(r, gated.path))
    assert gated.jlane("land", "alpha").code == "landed"
    # the lane branch deleted meanwhile: a switch to it would fail; next makes it again
    gated.commit(path, "b.txt", "b\n")
    git(path, "switch", "-q", "--detach")
    git(gated.path, "branch", "-D", "lane/alpha")
    r = refusal(gated, "lane_branch_mismatch", "sync", "alpha")
    ok(run_next(r, gated.path))
    assert gated.jlane("land", "alpha").code == "landed"
    assert git(gated.path, "show", "main:b.txt").stdout == "b\n"


def test_worktree_locked(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    assert gated.jlane("land", "alpha").code == "landed"
    git(gated.path, "worktree", "lock", "--reason", "mine", str(path))
    r = refusal(gated, "worktree_locked", "release", "alpha")
    ok(run_next(r, gated.path))
    assert gated.jlane("release", "alpha").code == "released"


def run_every_next(r: LaneRun, cwd: Path) -> None:
    for cmd in r.json["next"]:
        res = subprocess.run(["sh", "-c", cmd], cwd=cwd, text=True, capture_output=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)


def detached_commit(path: Path, at: str, name: str) -> str:
    """A commit made by hand on a detached HEAD at `at` (as an agent might, hooks off)."""
    git(path, "-c", "core.hooksPath=/dev/null", "switch", "-q", "--detach", at)
    (path / name).write_text(name)
    git(path, "add", name)
    git(path, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", name)
    return head(path)


def test_lane_branch_mismatch_never_leaves_detached_commits_on_no_branch(hub: Repo) -> None:
    """Commits on the lane's detached HEAD that build on the lane branch: the next moves
    the branch onto them (compare-and-swap) and switches, so the land lands them."""
    path = ready_lane(hub, "alpha")
    work = detached_commit(path, "HEAD", "two.txt")
    r = refusal(hub, "lane_branch_mismatch", "land", "alpha")
    assert r.json["details"]["commits"] == [work], r.stdout
    run_every_next(r, hub.path)
    assert hub.sha("refs/heads/lane/alpha") == work
    assert hub.jlane("land", "alpha").code == "landed"
    assert git(hub.path, "show", "main:two.txt").stdout == "two.txt"


def test_lane_branch_mismatch_keeps_detached_commits_off_the_branch(hub: Repo) -> None:
    """Commits on a detached HEAD that do not build on the lane branch's tip are named,
    and the next keeps them on a branch of their own before switching back."""
    path = ready_lane(hub, "alpha")
    tip = head(path)
    work = detached_commit(path, "HEAD~1", "side.txt")
    r = refusal(hub, "lane_branch_mismatch", "land", "alpha")
    assert r.json["details"]["commits"] == [work] and work[:12] in r.json["message"]
    run_every_next(r, hub.path)
    kept = r.json["details"]["kept_as"]
    assert hub.sha(f"refs/heads/{kept}") == work
    assert hub.sha("refs/heads/lane/alpha") == tip == head(path)
    assert git(path, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/lane/alpha"


@pytest.mark.parametrize("branch", ["main", "master"])
@pytest.mark.parametrize("installed", [False, True])
def test_no_main_branch_in_an_empty_bare_repository(
    tmp_path: Path, gitlane_on_path: Path, branch: str, installed: bool
) -> None:
    """`git commit` needs a work tree: in a bare repository the next makes the first
    commit with plumbing, on the branch HEAD names, through the hooks when installed."""
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", "-b", branch, str(bare))
    repo = Repo(bare)
    if installed:
        assert repo.lane("install").rc == 0
    r = refusal(repo, "no_main_branch", "status")
    run_every_next(r, bare)
    st = repo.jlane("status")
    assert (st.rc, st.json["main"]["branch"]) == (0, branch), st.stdout


def test_lock_busy_next_waits_and_lands(gated: Repo) -> None:
    path = ready_lane(gated, "alpha")
    holder = flock_holder(gated)
    try:
        start = psutil.Process(holder.pid).create_time()
        owner_file(gated).parent.mkdir(parents=True, exist_ok=True)
        owner_file(gated).write_text(
            f"pid={holder.pid}\nstart={start!r}\nhost={socket.gethostname()}\ntoken=x\n"
            "lane=ghost\nmain_before=\ntip=\nsince=2026-01-01T00:00:00Z\n"
        )
        r = refusal(gated, "lock_busy", "land", "alpha")
        cmd = r.json["next"][0]
        waiting = subprocess.Popen(
            ["sh", "-c", cmd], cwd=gated.path, text=True, stdout=subprocess.PIPE
        )
    finally:
        holder.kill()
        holder.wait()
    waiting.communicate(timeout=60)
    assert waiting.returncode == 0
    assert gated.sha() == head(path)


def test_lane_not_active(gated: Repo) -> None:
    import shutil

    path = ready_lane(gated, "alpha")
    shutil.rmtree(path)  # the worktree vanished: the lane is orphaned
    for args in (("sync", "alpha"), ("land", "alpha")):
        r = refusal(gated, "lane_not_active", *args)
    ok(run_next(r, gated.path))
    for cmd in r.json["next"][1:]:  # the whole path, in order, brings the lane back
        ok(run_next(LaneRun(0, json.dumps({"next": [cmd]}), ""), gated.path))
    assert gated.jlane("land", "alpha").code in ("landed", "nothing_to_land")  # next may land
    assert gated.sha() == head(path)


def test_branch_delete_failed(gated: Repo, tmp_path: Path) -> None:
    """The lane's branch delete fails and the branch did not move (a packed-refs.lock
    appears just then): said so with git's words, never as a branch that moved; the lane
    is as it was, and once the lock is gone the next, as printed, releases it."""
    path = ready_lane(gated, "alpha")
    assert gated.jlane("land", "alpha").rc == 0
    tip = head(path)
    lk = gated.common_dir / "packed-refs.lock"
    race = racing_git(tmp_path, f"touch {shlex.quote(str(lk))}")
    r = refusal(gated, "branch_delete_failed", "release", "alpha", env=race)
    assert "packed-refs.lock" in r.json["details"]["stderr"], r.stdout
    assert r.json["details"]["worktree_restored"] is True
    assert gated.sha("refs/heads/lane/alpha") == tip and head(path) == tip
    assert gated.jlane("status", "alpha").json["lanes"][0]["state"] == "active"
    lk.unlink()  # git's words: remove the file (no git runs)
    ok(run_next(LaneRun(0, json.dumps({"next": [join_next(r.json["next"])]}), ""), gated.path))
    assert gated.sha("refs/heads/lane/alpha") is None and not path.exists()


@pytest.mark.parametrize("kind", TAKEN)
@pytest.mark.parametrize("what", ["file", "dir"])
def test_a_move_aside_never_replaces_nor_moves_into_an_earlier_backup(
    tmp_path: Path, what: str, kind: str | None
) -> None:
    """git.mv_aside, the step every `next` that moves something aside prints, run with sh
    as written: the backup name taken (a file, a directory) gives the first free
    `NAME.N`; the earlier backup is left as it was, nothing moved into it."""
    src = tmp_path / "it's x"
    if what == "dir":
        src.mkdir()
        (src / "f").write_text("mine\n")
    else:
        src.write_text("mine\n")
    backup = tmp_path / "it's x.moved-aside"
    fresh = take_name(backup, kind)
    res = subprocess.run(["sh", "-c", glgit.mv_aside(src, backup)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert not os.path.lexists(src)
    assert (fresh / "f" if what == "dir" else fresh).read_text() == "mine\n"
    earlier_kept(backup, kind)
    if kind is not None:  # taken twice over (NAME.1 is the move above): the next number
        assert glgit.mv_aside(tmp_path / "y", backup).endswith(shlex.quote(f"{backup}.2"))


def test_state_corrupt(gated: Repo) -> None:
    gated.create("alpha")
    (gated.state_dir / "lanes" / "alpha.json").write_text("{not json")
    r = refusal(gated, "state_corrupt", "land", "alpha")
    ok(run_next(r, gated.path))
    assert gated.jlane("land", "alpha").code != "state_corrupt"


def test_no_placeholder_in_any_command_the_code_prints() -> None:
    """`next`/`alternatives` entries are built from real values: no `<KEY>`-style
    placeholder is left anywhere in the engine, the hooks or the install scripts (the
    sentences that describe the key pattern say `lane/<key>` and are not commands)."""
    import guard

    root = Path(guard.__file__).resolve().parent.parent
    found = []
    for d in ("guard", "hooks", "install"):
        assert (root / d).is_dir(), root / d
        for p in sorted((root / d).rglob("*")):
            if not p.is_file() or p.suffix in (".pyc",):
                continue
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                text = line.replace("lane/<key>", "")
                if any(ph in text for ph in PLACEHOLDERS):
                    found.append(f"{p.relative_to(root)}:{n}: {line.strip()}")
    assert found == []


def _root(repo: Repo) -> str:
    return shlex.quote(os.path.realpath(repo.path))


def test_worktree_locked_next_run_in_the_lane_runs_no_program_of_the_lanes(
    gated: Repo, tmp_path: Path
) -> None:
    """Red team 13V, finding 3. `git lane release KEY` run by the owner from inside the
    lane (supported: release says `cd HUB` then), refused worktree_locked: the lane wrote
    `<admin>/locked` itself (its admin dir, granted to a sandboxed CMD). The owner runs
    the printed next in that same shell, after the lane, still running, repointed its
    `.git` at a repository of its own whose config sets `pager.worktree`: a plain `git
    worktree unlock` there would run that program as the owner. Every git a next starts
    from a lane's cwd is `git -C <repository root>`, so git reads no config of the lane's."""
    lane = gated.create("alpha")
    admin = Path(git(lane, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "locked").write_text("held by the agent\n")  # the lane's own admin dir
    r = refusal(gated, "worktree_locked", "release", "alpha", cwd=lane)
    nxt = r.json["next"]
    assert nxt[0] == f"git -C {_root(gated)} worktree unlock {shlex.quote(str(lane))}", nxt
    assert nxt[1] == f"git -C {_root(gated)} lane release alpha", nxt
    # the lane, still running, after the refusal: its .git names a repository of its own
    marker = tmp_path / "ran-as-owner"
    evil = lane / ".x"
    (evil / "objects").mkdir(parents=True)
    (evil / "refs").mkdir()
    (evil / "HEAD").write_text("ref: refs/heads/x\n")
    (evil / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n[pager]\n\tworktree = "touch {marker}; cat"\n'
    )
    (lane / ".git").write_text(f"gitdir: {evil}\n")
    on_a_terminal(nxt[0], lane)  # the owner, in the shell that ran the release
    assert not marker.exists(), "the printed next ran a program the lane named, as the owner"
    assert not (admin / "locked").exists(), "the next did not do what it says"


def test_git_lane_nexts_printed_in_a_lane_name_the_repository_and_run_there(
    gated: Repo,
) -> None:
    """From a lane's cwd (the owner's shell, `-C LANE` too), a `git lane X` next is `git
    -C ROOT lane X`: git's own wrapper reads the cwd's repository config (pager.lane)
    before git-lane starts. Printed so, with the lane's key named, the whole next runs as
    printed from the lane and does what it says; from the hub nothing changes."""
    lane = gated.create("alpha")
    git(gated.path, "worktree", "lock", "--reason", "mine", str(lane))
    r = refusal(gated, "worktree_locked", "release", cwd=lane)  # the key from the cwd
    assert all(n.startswith(f"git -C {_root(gated)} ") for n in r.json["next"]), r.stdout
    plain = gated.lane("-C", str(lane), "release", "alpha")  # -C LANE, as text
    assert plain.rc == 1 and f"Next: git -C {_root(gated)} worktree unlock" in plain.stderr
    hub = refusal(gated, "worktree_locked", "release", "alpha")  # from the hub: as it was
    assert hub.json["next"][0].startswith("git worktree unlock "), hub.stdout
    run_every_next(r, lane)
    assert not lane.exists()
    assert gated.jlane("release", "alpha").code == "already_released"


def test_state_write_failed_in_a_lane_names_the_lane_when_pinned(
    gated: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """state_write_failed's next runs the command again. Run in a lane with no KEY (the
    lane from the cwd), the printed `git -C ROOT lane ...` would lose the cwd, so the
    command again names the directory it ran in: `git -C ROOT lane -C DIR sync`, which
    runs as printed from the lane and syncs that lane."""
    import errno

    from guard import boundary
    from guard.errors import pin_commands

    lane = gated.create("alpha")
    monkeypatch.chdir(lane)
    exc = OSError(errno.ENOSPC, "No space left", str(gated.state_dir / "x.json"))
    r = boundary.state_write_failed(exc, ["sync", "--json"], gated.state_dir, True)
    assert r is not None and r.next == [f"git lane -C {shlex.quote(str(lane))} sync"], r.next
    nxt = pin_commands({"next": r.next}, _root(gated))["next"]
    res = subprocess.run(["sh", "-c", nxt[0] + " --json"], cwd=lane, text=True, capture_output=True)
    assert res.returncode == 0, (nxt, res.stdout, res.stderr)
    assert json.loads(res.stdout)["lane"] == "alpha", res.stdout


def test_a_workers_nexts_in_its_lane_are_left_as_its_shims_take_them(gated: Repo) -> None:
    """Only the owner's commands are pinned: a worker's next is run in its lane, through
    its shims (which refuse a git -C outside the lane), so it is printed as it was."""
    lane = gated.create("alpha")
    r = refusal(gated, "role_forbidden", "release", cwd=lane, env={"GITLANE_LANE": "alpha"})
    assert r.json["next"][0].startswith("git lane release alpha"), r.stdout
    r = refusal(gated, "role_forbidden", "release", cwd=lane, env={"GITLANE_ROLE": "worker"})
    assert r.json["next"][0].startswith("git lane release alpha"), r.stdout


def test_an_env_next_printed_in_a_lane_is_pinned_too(hub: Repo) -> None:
    """exec --sandbox with TMPDIR in the repository prints `env TMPDIR=/tmp git lane exec
    ...`: started from the lane's cwd, its git was left unpinned while its alternative was
    pinned (red team 13W). `env` starts git as much as the shell does."""
    from conftest import lane as run_lane

    lane_path = hub.create("alpha")
    tmpd = hub.path / "tmpd"
    tmpd.mkdir()
    r = run_lane(
        "exec", "alpha", "--sandbox", "--json", "--", "true", cwd=lane_path,
        env={"TMPDIR": str(tmpd)},
    )  # fmt: skip
    assert r.rc == 1, (r.stdout, r.stderr)
    nxt = r.json["next"]
    assert nxt and nxt[0].startswith("env TMPDIR=/tmp git -C "), nxt
