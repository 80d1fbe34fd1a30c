"""`git lane checkpoint`: every current change of a lane (untracked included, ignored
left out) as one commit, with the hooks running as for a plain `git commit`; a refusing
hook leaves the commit unmade and the index (staged parts included) as it was."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import Repo, git
from enginehelp import grow_index, lane_capped


def _index(where: Path) -> bytes:
    p = git(where, "rev-parse", "--path-format=absolute", "--git-path", "index").stdout[:-1]
    return Path(p).read_bytes()


def _status(where: Path) -> bytes:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored"],
        cwd=where,
        capture_output=True,
        check=True,
        env=env,
    ).stdout


def _work(lane_path: Path) -> None:
    (lane_path / ".gitignore").write_text("*.log\n")
    git(lane_path, "add", ".gitignore")
    git(lane_path, "commit", "-q", "-m", "ignore logs")
    (lane_path / "README.md").write_text("changed\n")
    (lane_path / "new dir").mkdir()
    (lane_path / "new dir" / "untracked.txt").write_text("untracked\n")
    (lane_path / "tool.sh").write_text("#!/bin/sh\n")
    (lane_path / "tool.sh").chmod(0o755)
    (lane_path / "debug.log").write_text("ignored\n")


def test_checkpoint_commits_everything_but_ignored_files(repo: Repo) -> None:
    repo.lane("install")
    lane_path = repo.create("alpha")
    _work(lane_path)
    git(lane_path, "rm", "-q", "--cached", "README.md")  # a staged deletion, file kept
    r = repo.jlane("checkpoint", "alpha", "-m", "save my work")
    assert r.rc == 0, r.stderr
    res = r.json
    assert res["code"] == "checkpointed" and res["message"] == "save my work"
    head = git(lane_path, "rev-parse", "HEAD").stdout.strip()
    assert (
        res["commit"] == head
        and git(lane_path, "rev-parse", "HEAD^").stdout.strip() == res["parent"]
    )
    assert sorted(res["paths"]) == ["README.md", "new dir/untracked.txt", "tool.sh"]
    tree = git(lane_path, "ls-tree", "-r", "--name-only", "HEAD").stdout.splitlines()
    assert "debug.log" not in tree and "new dir/untracked.txt" in tree
    assert git(lane_path, "ls-tree", "HEAD", "tool.sh").stdout.startswith("100755")
    # the lane is clean but for the ignored file, which stays where it was
    assert _status(lane_path) == b"!! debug.log\0"
    assert git(repo.path, "rev-parse", "main").stdout.strip() != head  # main untouched
    again = repo.jlane("checkpoint", "alpha")
    assert again.rc == 0 and again.code == "nothing_to_checkpoint" and again.json["commit"] is None


def test_default_message_and_key_from_the_cwd(repo: Repo) -> None:
    lane_path = repo.create("alpha")
    (lane_path / "a.txt").write_text("a\n")
    r = repo.lane("checkpoint", cwd=lane_path)
    assert r.rc == 0, r.stderr
    assert "checkpoint" in r.stdout
    msg = git(lane_path, "log", "-1", "--format=%s").stdout.strip()
    assert msg == "Checkpoint of lane alpha (1 path(s))"


def test_our_pre_commit_hook_refuses_with_its_code_and_nothing_is_lost(repo: Repo) -> None:
    repo.lane("install")
    lane_path = repo.create("alpha")
    (lane_path / "README.md").write_text("staged part\n")
    git(lane_path, "add", "README.md")
    (lane_path / "README.md").write_text("staged part\nand an unstaged one\n")
    (lane_path / "conflict.txt").write_text("<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")
    head, index, status = (
        git(lane_path, "rev-parse", "HEAD").stdout,
        _index(lane_path),
        _status(lane_path),
    )
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "conflict_markers_present", r.stdout + r.stderr
    assert r.json["next"] == ["git lane checkpoint alpha"]
    assert git(lane_path, "rev-parse", "HEAD").stdout == head
    assert _index(lane_path) == index and _status(lane_path) == status
    assert (lane_path / "README.md").read_text() == "staged part\nand an unstaged one\n"
    assert not Path(
        git(lane_path, "rev-parse", "--path-format=absolute", "--git-path", "index.lock").stdout[
            :-1
        ]
    ).exists()
    (lane_path / "conflict.txt").write_text("resolved\n")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 0 and r.code == "checkpointed", r.stderr


def test_hooks_run_never_no_verify_and_a_failing_one_refuses(repo: Repo, tmp_path: Path) -> None:
    lane_path = repo.create("alpha")
    hooks = repo.common_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    ran = tmp_path / "ran"
    hook = hooks / "pre-commit"
    hook.write_text(f'#!/bin/sh\necho ran >> "{ran}"\necho "lint: bad style" >&2\nexit 1\n')
    hook.chmod(0o755)
    (lane_path / "a.txt").write_text("a\n")
    index = _index(lane_path)
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "checkpoint_failed"
    assert "lint: bad style" in r.json["details"]["output"]
    assert ran.read_text() == "ran\n"
    assert _index(lane_path) == index
    assert git(lane_path, "log", "--format=%s").stdout.splitlines() == ["init"]
    msg_hook = hooks / "commit-msg"
    msg_hook.write_text(f'#!/bin/sh\necho msg >> "{ran}"\n')
    msg_hook.chmod(0o755)
    hook.write_text(f'#!/bin/sh\necho ran >> "{ran}"\n')
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 0, r.stderr
    assert ran.read_text() == "ran\nran\nmsg\n"


def test_a_stale_lane_is_checkpointed_with_the_hooks_notice(repo: Repo) -> None:
    """A plain `git commit` in a stale lane passes with a notice (the pre-commit hook's
    rule): so does a checkpoint, which saves work and leaves main alone."""
    repo.lane("install")
    repo.config("gate", "off")
    a = repo.create("alpha")
    b = repo.create("beta")
    repo.commit(b, "b.txt", "b\n")
    assert repo.jlane("land", "beta").rc == 0
    (a / "a.txt").write_text("a\n")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 0 and r.code == "checkpointed", r.stderr
    assert any("sync_required" in w for w in r.json["warnings"])
    text = repo.lane("checkpoint", "alpha")
    assert text.rc == 0 and "nothing to checkpoint" in text.stdout


def test_mid_sync_and_wrong_branch_are_refused(repo: Repo) -> None:
    repo.config("gate", "off")
    a = repo.create("alpha")
    repo.commit(a, "f.txt", "alpha\n")
    b = repo.create("beta")
    repo.commit(b, "f.txt", "beta\n")
    assert repo.jlane("land", "beta").rc == 0
    assert repo.jlane("sync", "alpha").code == "sync_conflicts"
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "rebase_in_progress"
    assert repo.jlane("abort", "alpha").rc == 0
    git(a, "switch", "-q", "-c", "other")
    (a / "x.txt").write_text("x\n")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "lane_branch_mismatch"
    assert git(a, "log", "-1", "--format=%s", "other").stdout.strip() == "edit f.txt"


def test_a_worker_checkpoints_its_own_lane_only(repo: Repo) -> None:
    a = repo.create("alpha")
    b = repo.create("beta")
    (a / "a.txt").write_text("a\n")
    (b / "b.txt").write_text("b\n")
    env = {"GITLANE_LANE": "alpha"}
    r = repo.jlane("checkpoint", "beta", env=env, cwd=a)
    assert r.rc == 1 and r.code == "role_forbidden"
    r = repo.jlane("checkpoint", env=env, cwd=a)
    assert r.rc == 0 and r.code == "checkpointed" and r.json["lane"] == "alpha"


def test_a_busy_index_is_refused(repo: Repo) -> None:
    a = repo.create("alpha")
    (a / "a.txt").write_text("a\n")
    lock = Path(
        git(a, "rev-parse", "--path-format=absolute", "--git-path", "index.lock").stdout[:-1]
    )
    lock.write_bytes(b"")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "lane_busy"
    assert lock.exists()  # someone else's lock is left alone


def test_an_index_the_lane_grew_with_a_hole_is_never_written_out(repo: Repo) -> None:
    """Red team 15A F5, at checkpoint: the lane's index grown to 256 MiB of one hole
    (GROW_INDEX, what a sandboxed lane can do) was copied into index.lock with
    copyfileobj, the hole written out as zeros on the owner's disk; under a 64 MiB
    file-size limit, exit 3. The copy keeps holes as holes; one that still cannot be made
    refuses index_copy_failed with nothing done, and its next works as written: nothing
    staged is lost."""
    a = repo.create("alpha")
    (a / "staged.txt").write_text("staged\n")
    git(a, "add", "staged.txt")
    (a / "b.txt").write_text("b\n")
    index = grow_index(a, 256 << 20)
    r = lane_capped(repo.path, "checkpoint", "alpha", "--json", fsize=64 << 20)
    assert r.returncode == 1, (r.returncode, r.stdout[-400:])
    out = json.loads(r.stdout)
    assert out["code"] == "index_copy_failed", out
    assert index.stat().st_size > 256 << 20 and not index.with_name("index.lock").exists()
    for step in out["next"][:-1]:
        subprocess.run(step, shell=True, cwd=repo.path, check=True)
    assert out["next"][-1] == "git lane checkpoint alpha"
    again = lane_capped(repo.path, "checkpoint", "alpha", "--json", fsize=64 << 20)
    assert again.returncode == 0, again.stdout[-400:]
    assert git(a, "ls-tree", "--name-only", "HEAD").stdout.split() == [
        "README.md",
        "b.txt",
        "staged.txt",
    ]


def test_a_file_git_cannot_stage_refuses_and_keeps_the_index(repo: Repo) -> None:
    a = repo.create("alpha")
    (a / ".gitattributes").write_text("*.dat filter=broken\n")
    git(a, "config", "filter.broken.clean", "false")
    git(a, "config", "filter.broken.required", "true")
    (a / "x.dat").write_text("data\n")
    index = _index(a)
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "checkpoint_failed", r.stdout + r.stderr
    assert _index(a) == index
    assert git(a, "log", "--format=%s").stdout.splitlines() == ["init"]


def test_the_message_is_kept_as_git_commit_m_keeps_it(repo: Repo) -> None:
    a = repo.create("alpha")
    (a / "a.txt").write_text("a\n")
    r = repo.jlane("checkpoint", "alpha", "-m", "#42 fixed\n\n- a line that looks like an option")
    assert r.rc == 0, r.stderr
    body = git(a, "log", "-1", "--format=%B").stdout.rstrip("\n")
    assert body == "#42 fixed\n\n- a line that looks like an option" == r.json["message"]


def test_a_message_that_is_not_utf8_is_stored_as_the_bytes_given(repo: Repo) -> None:
    """`-m $'msg \\xff'`: git commit would rewrite the byte as Latin-1 (U+00FF, c3 bf);
    the commit holds the byte ff itself, and a UTF-8 message is stored as before."""
    a = repo.create("alpha")
    for name, msg in (("f.txt", b"msg \xff caf\xc3\xa9"), ("g.txt", "caf\u00e9".encode())):
        (a / name).write_text(name)
        # an argument is handed to the process as bytes: os.fsencode, surrogateescape
        r = repo.jlane("checkpoint", "alpha", "-m", msg.decode("utf-8", "surrogateescape"))
        assert r.rc == 0, r.stderr
        body = subprocess.run(
            ["git", "cat-file", "commit", "HEAD"], cwd=a, capture_output=True, check=True
        ).stdout
        assert body.split(b"\n\n", 1)[1] == msg + b"\n", body
    assert b"\nencoding " not in body  # the UTF-8 message: no encoding header, as ever


def _checkpoint_held_in_its_commit(repo: Repo, path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A checkpoint of lane alpha started and held inside its commit (a commit-msg hook
    that sleeps), once it holds the lane's index.lock."""
    import sys
    import time

    hook = repo.common_dir / "hooks" / "commit-msg"
    hook.write_text("#!/bin/sh\nsleep 60 || :\nexit 0\n")
    hook.chmod(0o755)
    admin = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
    p = subprocess.Popen(
        [sys.executable, "-m", "guard", "checkpoint", "alpha", "--json"],
        cwd=repo.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    held = [admin / "index.lock", repo.state_dir / "locks" / "checkpoint.alpha"]
    deadline = time.monotonic() + 30
    while not all(p.exists() for p in held) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(p.exists() for p in held), "checkpoint never took (and recorded) the index.lock"
    time.sleep(0.3)
    return p, hook


def test_a_checkpoint_killed_while_it_holds_the_lanes_index_lock_is_recovered(
    repo: Repo,
) -> None:
    """checkpoint records the index.lock it holds (pid, start ticks, inode) under
    locks/: killed there with its git (kill -9 of its process group), doctor names the
    stale lock, checkpoint refuses lane_busy with reconcile as its next, and reconcile
    removes that lock (only that one: the process is gone); then checkpoint commits."""
    import signal

    from enginehelp import wait_for

    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    (path / "work.txt").write_text("unsaved work\n")
    p, hook = _checkpoint_held_in_its_commit(repo, path)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    hook.unlink()

    def doctor_names_the_stale_lock() -> bool:
        # the killed group's git may still be exiting (its cwd in the lane) for a moment,
        # and a lock it rewrote is judged by age (2 s): until then the lock counts as held
        doctor = repo.jlane("doctor")
        return any(
            c["name"] == "lane alpha" and c["status"] == "fail" and "index.lock" in c["message"]
            for c in doctor.json["checks"]
        )

    wait_for(doctor_names_the_stale_lock, 15, "doctor to name the stale index.lock")
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "lane_busy" and r.json["details"]["stale"], r.stdout
    assert r.json["next"] == ["git lane reconcile", "git lane checkpoint alpha"]
    rec = repo.jlane("reconcile")
    assert any(c["action"] == "git_lock_removed" for c in rec.json["changes"]), rec.stdout
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 0 and r.code == "checkpointed", r.stdout
    assert git(path, "show", "HEAD:work.txt").stdout == "unsaved work\n"
    assert not (repo.state_dir / "locks" / "checkpoint.alpha").exists()


def _end_hook_sleep(root: int) -> None:
    """Let the held checkpoint go on: end the `sleep` its commit-msg hook runs."""
    from guard import procs

    for pid in procs.descendants(root):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "sleep":
                    os.kill(pid, 15)
        except OSError:
            pass


def test_reconcile_leaves_the_index_lock_of_a_checkpoint_at_work(repo: Repo) -> None:
    """The lock a live checkpoint holds (its git between two commands, or inside one) is
    never removed: reconcile leaves it and the checkpoint then commits."""
    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    (path / "work.txt").write_text("unsaved work\n")
    p, _hook = _checkpoint_held_in_its_commit(repo, path)
    try:
        rec = repo.jlane("reconcile")
        assert not any(c["action"] == "git_lock_removed" for c in rec.json["changes"])
        admin = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
        assert (admin / "index.lock").exists()
    finally:
        _end_hook_sleep(p.pid)
        p.wait(timeout=60)
    assert p.returncode == 0
    assert git(path, "show", "HEAD:work.txt").stdout == "unsaved work\n"


def test_a_checkpoint_killed_while_its_commit_runs_leaves_the_index_at_its_commit(
    repo: Repo, tmp_path: Path
) -> None:
    """SIGKILL of checkpoint's own process (kill -9, the OOM killer) while its `git
    commit` (run with GIT_INDEX_FILE=index.lock) goes on and moves the branch: the lock
    then holds the commit's tree. reconcile moves it over the index, as the commit would
    have, never deletes it: the index is not left behind HEAD (which would have staged
    the checkpointed file's deletion for the next plain commit)."""
    import signal
    import time

    from enginehelp import spawn_lane, wait_for

    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    mark = tmp_path / "in-commit-msg"
    hook = repo.common_dir / "hooks" / "commit-msg"
    hook.write_text(f"#!/bin/sh\ntouch '{mark}'\nsleep 2\n")
    hook.chmod(0o755)
    (path / "new.txt").write_text("checkpointed work\n")
    p = spawn_lane("checkpoint", "alpha", cwd=repo.path)
    try:
        wait_for(mark.exists, what="checkpoint's git commit in its commit-msg hook")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
    hook.unlink()
    wait_for(
        lambda: git(path, "cat-file", "-e", "HEAD:new.txt", check=False).returncode == 0,
        what="the orphaned git commit",
    )
    time.sleep(2.5)  # its index.lock now older than gitlocks.MIN_AGE, no git at work
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    staged = git(path, "diff", "--cached", "--name-status", "HEAD").stdout
    assert staged == "", f"the lane's index is behind its HEAD after reconcile: {staged!r}"
    (lifted,) = [c for c in r.json["changes"] if c["action"] == "git_lock_removed"]
    assert "moved_over_index" in lifted["lifted"][0], r.stdout
    (path / "other.txt").write_text("more\n")
    git(path, "add", "other.txt")
    git(path, "commit", "-q", "-m", "a plain commit")
    assert git(path, "cat-file", "-e", "HEAD:new.txt", check=False).returncode == 0


def test_a_stale_index_lock_holding_a_staged_state_of_its_own_is_kept(repo: Repo) -> None:
    """A stale index.lock that is neither the index nor HEAD's tree (a git killed with a
    staged state no file holds any more): reconcile keeps a copy under kept/ before it
    lifts the lock, and says where."""
    import time

    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    admin = Path(git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
    lock = admin / "index.lock"
    (path / "only-staged.txt").write_text("staged, then deleted\n")
    git(path, "add", "only-staged.txt")
    staged = admin / "staged-index"
    staged.write_bytes((admin / "index").read_bytes())
    git(path, "reset", "-q")
    os.replace(staged, lock)  # the index a git was about to put in place
    (path / "only-staged.txt").unlink()
    old = time.time() - 10
    os.utime(lock, (old, old))
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    assert not lock.exists()
    (lifted,) = [c for c in r.json["changes"] if c["action"] == "git_lock_removed"]
    kept = Path(lifted["lifted"][0]["kept"])
    assert kept.parent == repo.state_dir / "kept"
    shown = git(path, "ls-files", env={"GIT_INDEX_FILE": str(kept)}).stdout
    assert "only-staged.txt" in shown.splitlines()


def test_checkpoint_refuses_a_lane_whose_record_names_a_symlinked_admin_dir(repo: Repo) -> None:
    """A record naming `worktrees/evil -> ..` (the common dir) as the lane's admin dir:
    no admin dir of git's, so the lane's pointers are not intact; checkpoint refuses
    lane_pointers_tampered (as land, sync, exec and release do) and commits nothing,
    in the lane or through the link."""
    import json

    assert repo.lane("install").rc == 0
    path = repo.create("alpha")
    (repo.common_dir / "worktrees" / "evil").symlink_to("..")
    f = repo.state_dir / "lanes" / "alpha.json"
    d = json.loads(f.read_text())
    d["admin"] = "evil"
    f.write_text(json.dumps(d))
    (path / "work.txt").write_text("unsaved\n")
    before = {b: repo.sha(f"refs/heads/{b}") for b in ("main", "lane/alpha")}
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "lane_pointers_tampered", r.stdout
    assert {b: repo.sha(f"refs/heads/{b}") for b in before} == before
    assert (path / "work.txt").read_text() == "unsaved\n"


def test_a_file_another_file_system_reads_as_git_is_moved_aside_by_the_next(repo: Repo) -> None:
    """`.g\u200cit/config` (HFS+ ignores U+200C: `.git/config` on a Mac clone): git on
    Linux stages it; checkpoint commits nothing, and its next, run as printed, moves the
    file into kept/ (a read-tree would leave it to be taken again) and checkpoints."""
    a = repo.create("alpha")
    odd = a / "sub" / ".g\u200cit"
    odd.mkdir(parents=True)
    (odd / "config").write_text("[core]\n\tfsmonitor = evil\n")
    (a / "sub" / "keep.txt").write_text("mine\n")
    index = _index(a)
    r = repo.jlane("checkpoint", "alpha")
    assert r.rc == 1 and r.code == "lane_index_unsafe", r.stdout + r.stderr
    assert _index(a) == index
    assert git(a, "log", "--format=%s").stdout.splitlines() == ["init"]
    for cmd in r.json["next"]:
        res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    kept = Path(r.json["details"]["kept"])
    assert (kept / "sub" / ".g\u200cit" / "config").read_text().startswith("[core]")
    assert git(a, "ls-tree", "-r", "--name-only", "HEAD").stdout.splitlines() == [
        "README.md",
        "sub/keep.txt",
    ]
