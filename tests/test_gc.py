"""`git lane gc`: landed clean lanes are released (through release), every lane with work
is kept and `git worktree lock`ed with a reason that says why, a lock someone else put
there stays, `--dry-run` changes nothing, disk figures are reported."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import Repo, git
from enginehelp import spawn_lane, wait_for

from guard.commands.gc import disk_usage


def locks(repo: Repo) -> dict[str, str | None]:
    """worktree path -> its lock reason ("" for a bare `locked`), from git itself."""
    out: dict[str, str | None] = {}
    for block in repo.worktrees().strip().split("\n\n"):
        lines = block.splitlines()
        path = lines[0].removeprefix("worktree ")
        reason = None
        for ln in lines[1:]:
            if ln == "locked":
                reason = ""
            elif ln.startswith("locked "):
                reason = ln.removeprefix("locked ")
        out[path] = reason
    return out


def landed_lane(repo: Repo, key: str) -> Path:
    path = repo.create(key)
    repo.commit(path, f"{key}.txt", f"{key}\n")
    r = repo.jlane("land", key)
    assert r.rc == 0, r.stderr
    return path


def by_lane(items: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(x["lane"]): x for x in items}


def snapshot(repo: Repo) -> tuple[str, str, dict[str, str], str]:
    refs = repo.git("for-each-ref", "--format=%(refname) %(objectname)").stdout
    records = {p.name: p.read_text() for p in sorted((repo.state_dir / "lanes").iterdir())}
    kept = repo.state_dir / "kept"
    listing = " ".join(sorted(os.listdir(kept))) if kept.is_dir() else ""
    return repo.worktrees(), refs, records, listing


def test_gc_releases_landed_clean_lanes_and_locks_the_kept_ones(repo: Repo) -> None:
    repo.config("gate", "off")
    alpha = landed_lane(repo, "alpha")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    tip_beta = repo.commit(beta, "b2.txt", "b2\n")
    gamma = repo.create("gamma")
    (gamma / "notes.txt").write_text("uncommitted\n")
    delta = repo.create("delta")  # nothing of its own, never landed
    r = repo.jlane("gc")
    assert r.rc == 0, r.stderr
    res = r.json
    assert res["code"] == "ok" and res["dry_run"] is False
    assert [x["lane"] for x in res["released"]] == ["alpha"]
    assert res["released"][0]["bytes"] > 0
    assert res["reclaimed_bytes"] == res["released"][0]["bytes"]
    # released through release: worktree, branch and record gone the release way
    assert not alpha.exists() and repo.sha("refs/heads/lane/alpha") is None
    rec = json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())
    assert rec["status"] == "released"
    kept = by_lane(res["kept"])
    assert set(kept) == {"beta", "gamma", "delta"}
    assert (kept["beta"]["code"], kept["gamma"]["code"]) == ("unlanded_work", "lane_dirty")
    assert kept["delta"]["code"] == "never_landed"
    assert all(int(str(k["bytes"])) > 0 for k in kept.values())
    assert res["kept_bytes"] == sum(int(str(k["bytes"])) for k in kept.values())
    # each lane with work is locked, with a reason that says why; the empty one is not
    wt = locks(repo)
    assert wt[str(beta)] == "git-lane: unlanded work (2 commits)"
    assert wt[str(gamma)] == "git-lane: lane has uncommitted work"
    assert wt[str(delta)] is None
    assert (kept["beta"]["locked"], kept["gamma"]["locked"]) == (wt[str(beta)], wt[str(gamma)])
    # nothing of theirs was touched
    assert repo.sha("refs/heads/lane/beta") == tip_beta
    assert (gamma / "notes.txt").read_text() == "uncommitted\n"
    assert kept["beta"]["next"] == ["git lane land beta"]
    # text: one line per lane, the figures
    t = repo.lane("gc", "--dry-run")
    assert t.rc == 0 and "kept" in t.stdout and "beta" in t.stdout


def test_a_lane_gc_locked_lands_and_is_released_by_the_next_gc(repo: Repo) -> None:
    repo.config("gate", "off")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    assert repo.jlane("gc").rc == 0
    assert locks(repo)[str(beta)] == "git-lane: unlanded work (1 commits)"
    assert repo.jlane("land", "beta").rc == 0  # the lock does not stand in a land's way
    r = repo.jlane("gc")
    assert [x["lane"] for x in r.json["released"]] == ["beta"], r.json
    assert str(beta) not in locks(repo) and not beta.exists()


def test_dry_run_changes_nothing(repo: Repo) -> None:
    repo.config("gate", "off")
    landed_lane(repo, "alpha")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    (beta / "dirty.txt").write_text("x\n")
    before = snapshot(repo)
    r = repo.jlane("gc", "--dry-run")
    assert r.rc == 0, r.stderr
    assert r.json["dry_run"] is True
    assert [x["lane"] for x in r.json["released"]] == ["alpha"]
    assert r.json["reclaimed_bytes"] > 0
    assert by_lane(r.json["kept"])["beta"]["lock_reason"] == "git-lane: lane has uncommitted work"
    assert by_lane(r.json["kept"])["beta"]["locked"] is None
    assert snapshot(repo) == before
    assert all(v is None for v in locks(repo).values())


def test_someone_elses_lock_is_left_as_it_is(repo: Repo) -> None:
    repo.config("gate", "off")
    alpha = landed_lane(repo, "alpha")  # landed and clean, but locked by its user
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "b\n")
    repo.git("worktree", "lock", "--reason", "on a USB disk", str(alpha))
    repo.git("worktree", "lock", "--reason", "mine, do not touch", str(beta))
    r = repo.jlane("gc")
    assert r.rc == 0, r.stderr
    assert r.json["released"] == []
    kept = by_lane(r.json["kept"])
    assert kept["alpha"]["code"] == "worktree_locked" and kept["alpha"]["locked_by_other"]
    assert kept["beta"]["locked"] == "mine, do not touch" and kept["beta"]["locked_by_other"]
    wt = locks(repo)
    assert (wt[str(alpha)], wt[str(beta)]) == ("on a USB disk", "mine, do not touch")
    assert alpha.exists() and repo.sha("refs/heads/lane/alpha") is not None


def test_ignored_files_keep_a_landed_lane_with_release_s_archive_command(
    repo: Repo, gitlane_on_path: Path
) -> None:
    repo.config("gate", "off")
    (repo.path / ".gitignore").write_text("*.log\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore logs")
    alpha = landed_lane(repo, "alpha")
    (alpha / "build.log").write_text("only here\n")
    r = repo.jlane("gc")
    assert r.rc == 0, r.stderr
    kept = by_lane(r.json["kept"])["alpha"]
    assert kept["code"] == "unlanded_work"
    assert str(kept["next"][0]).startswith("tar -C ")  # type: ignore[index]
    assert (alpha / "build.log").read_text() == "only here\n"
    assert locks(repo)[str(alpha)] == "git-lane: lane has uncommitted work"
    # release's next, run as written, keeps the file in kept/ and only then releases
    nxt = [str(c) for c in kept["next"]]  # type: ignore[attr-defined]
    assert nxt[-1] == "git lane release alpha --confirm yes-discard-lane"
    for cmd in nxt:
        assert subprocess.run(cmd, shell=True, cwd=repo.path).returncode == 0, cmd
    assert not alpha.exists()
    archives = repo.jlane("gc").json["archives"]
    assert len(archives) == 1 and archives[0]["bytes"] > 0
    listed = subprocess.run(["tar", "-tf", archives[0]["path"]], capture_output=True, text=True)
    assert "./build.log" in listed.stdout.split()
    # what else git-lane sets aside there (a release's copied git dirs, oversized files) is
    # listed too, with its size, and left where it is
    copied = repo.state_dir / "kept" / "alpha-modules-1" / "worktree-gitdirs" / "sub" / ".git"
    copied.mkdir(parents=True)
    (copied / "HEAD").write_text("x" * 9000)
    listed_all = {a["path"]: a["bytes"] for a in repo.jlane("gc").json["archives"]}
    assert listed_all[str(repo.state_dir / "kept" / "alpha-modules-1")] >= 9000
    assert (copied / "HEAD").stat().st_size == 9000


def test_a_lane_with_a_live_owner_is_kept(repo: Repo, tmp_path: Path) -> None:
    repo.config("gate", "off")
    landed_lane(repo, "alpha")
    proc = spawn_lane("exec", "alpha", "--", "sleep", "30", cwd=repo.path)
    try:
        wait_for(
            lambda: (
                json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())["owner_pid"]
                == proc.pid
            ),
            what="exec to record itself as owner",
        )
        r = repo.jlane("gc")
        assert by_lane(r.json["kept"])["alpha"]["code"] == "lane_owner_conflict"
        assert repo.sha("refs/heads/lane/alpha") is not None
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_gc_is_the_owners(repo: Repo) -> None:
    r = repo.jlane("gc", env={"GITLANE_ROLE": "worker"})
    assert (r.rc, r.code) == (1, "role_forbidden")
    assert r.json["next"][0].startswith("git lane gc")


def test_disk_usage_counts_as_du_does(tmp_path: Path) -> None:
    top = tmp_path / "tree"
    (top / "d").mkdir(parents=True)
    (top / "d" / "big").write_bytes(os.urandom(300_000))
    os.link(top / "d" / "big", top / "hardlink")  # counted once
    (top / "link").symlink_to("/usr")  # never followed
    (top / "small").write_text("x")
    du = subprocess.run(["du", "-s", "-B1", str(top)], capture_output=True, text=True, check=True)
    assert disk_usage(top) == int(du.stdout.split()[0])
    assert disk_usage(tmp_path / "missing") == 0


def test_a_lane_whose_branch_was_moved_by_hand_is_kept_for_repair(repo: Repo) -> None:
    repo.config("gate", "off")
    alpha = landed_lane(repo, "alpha")
    repo.git("update-ref", "refs/heads/lane/alpha", "HEAD~1")  # by hand, outside the lane
    r = repo.jlane("gc")
    assert r.rc == 0, r.stderr
    assert r.json["released"] == []
    kept = by_lane(r.json["kept"])["alpha"]
    assert kept["code"] == "lane_branch_moved" and kept["next"][0] == "git lane repair alpha"  # type: ignore[index]
    assert alpha.exists()


def test_a_lane_whose_branch_delete_the_hook_refuses_is_kept_with_the_hooks_refusal(
    repo: Repo,
) -> None:
    """main made a symbolic ref: the hook refuses the lane branch's delete. gc keeps the
    lane with the hook's code and next, never as a lane whose branch moved."""
    assert repo.lane("install").rc == 0
    repo.config("gate", "off")
    alpha = landed_lane(repo, "alpha")
    tip = repo.sha("refs/heads/lane/alpha")
    repo.git("branch", "aside")
    repo.git("symbolic-ref", "refs/heads/main", "refs/heads/aside")
    r = repo.jlane("gc")
    assert r.rc == 0, r.stderr
    assert r.json["released"] == []
    kept = by_lane(r.json["kept"])["alpha"]
    assert kept["code"] == "main_mutation_refused", kept
    assert kept["next"] == ["git lane restore-main", "git lane release alpha"], kept
    assert repo.sha("refs/heads/lane/alpha") == tip and (alpha / "alpha.txt").is_file()


def test_gc_text_prints_no_line_or_escape_a_lane_wrote_into_its_lock_reason(repo: Repo) -> None:
    """`<admin>/locked` is the lane's to write (exec --sandbox grants its admin dir): gc
    shows it as the reason of a lock by someone else on one line, escaped (as release's
    refusal does), so a newline cannot forge a line of gc's advice (a `next` that
    discards another lane's work) nor an ESC drive the owner's terminal."""
    alpha = repo.create("alpha")
    repo.create("beta")
    admin = Path(git(alpha, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip())
    forged = "  beta: next: git lane release beta --confirm yes-discard-lane"
    (admin / "locked").write_bytes(b"x\x1b]0;pwned\x07\n" + forged.encode() + b"\n")
    r = repo.lane("gc")
    assert r.rc == 0, r.stderr
    assert "\x1b" not in r.stdout, r.stdout
    assert forged not in r.stdout.splitlines(), r.stdout
    assert "alpha: worktree locked by someone else, left as it is: " in r.stdout, r.stdout
