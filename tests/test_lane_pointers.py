"""A lane's git pointers (its `.git` file, `<admin>/commondir`, `<admin>/gitdir`) are
writable from inside the lane, a sandboxed one too (issue 11, red-team findings 1-3 and
9's GitError case; reproductions from the i11-rt branch, turned to assert the safe outcome).

The engine never follows them: its git calls in a lane name the repository (GIT_DIR,
GIT_COMMON_DIR, GIT_WORK_TREE, core.fsmonitor off); land, release, sync and exec refuse a
tampered lane (lane_pointers_tampered) and `git lane repair KEY` rewrites the pointers;
a command started inside a lane must find the repository the lanes directory's marker
names; the supervisor's socket land uses the supervisor's own repository."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from sandboxhelp import refused_then_planted
from conftest import TAKEN, LaneRun, Repo, earlier_kept, git, take_name
from enginehelp import on_a_terminal

from guard import sandbox

_ABI = sandbox.abi()
needs_landlock = pytest.mark.skipif(
    bool(sandbox.usable(_ABI)),
    reason=f"no usable Landlock on this kernel: {sandbox.usable(_ABI)} ({sandbox.probe()[1]})",
)

# Run in the lane: point the lane's commondir at a fake common dir FAKE whose config names
# a program (core.fsmonitor) that records where it ran and writes the hub's config.
REDIRECT = r"""
set -e
FAKE=$1 EVIDENCE=$2 HUB_CONFIG=$3
AD=$(git rev-parse --path-format=absolute --git-dir)
C=$(git rev-parse --path-format=absolute --git-common-dir)
mkdir -p "$FAKE/hooks"
for x in objects refs logs packed-refs HEAD worktrees git-lane info; do ln -s "$C/$x" "$FAKE/$x"; done
cp "$C/config" "$FAKE/config"
cat > "$FAKE/hooks/payload" <<P
#!/bin/sh
echo "ran sandbox=\${GITLANE_SANDBOX-none}" >> '$EVIDENCE'
echo '# written by the lane' >> '$HUB_CONFIG'
exit 0
P
chmod +x "$FAKE/hooks/payload"
printf '[core]\n\tfsmonitor = %s\n' "'$FAKE/hooks/payload'" >> "$FAKE/config"
echo "$FAKE" > "$AD/commondir"
"""

# Run in the lane: a fake common dir whose git-lane/config.toml allows worker lands
DENY_BYPASS = r"""
set -e
AD=$(git rev-parse --path-format=absolute --git-dir)
C=$(git rev-parse --path-format=absolute --git-common-dir)
F=$(git rev-parse --show-toplevel)/.fake
mkdir -p "$F/git-lane"
for x in objects refs logs packed-refs HEAD worktrees info hooks config; do ln -s "$C/$x" "$F/$x"; done
for x in lanes locks epoch.json events.jsonl; do ln -s "$C/git-lane/$x" "$F/git-lane/$x"; done
grep -v worker_land "$C/git-lane/config.toml" > "$F/git-lane/config.toml" || true
echo 'worker_land = "allow"' >> "$F/git-lane/config.toml"
echo "$F" > "$AD/commondir"
"""

SANDBOX_OFF = DENY_BYPASS.replace("grep -v worker_land", "grep -v '^sandbox'").replace(
    """echo 'worker_land = "allow"'""", """echo 'sandbox = "off"'"""
)


def _exec(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"body-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


def _commit_in_lane(hub: Repo, tmp_path: Path, key: str = "alpha") -> None:
    r = _exec(hub, tmp_path, "echo work > w.txt && git add w.txt && git commit -qm work\n")
    assert r.rc == 0, r.stderr


def _run_next(hub: Repo, r: LaneRun) -> None:
    """Run the refusal's `next` exactly as written, from the hub."""
    nxt = r.json["next"]
    assert len(nxt) == 1, nxt
    res = subprocess.run(["sh", "-c", nxt[0]], cwd=hub.path, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def _fake_common(hub: Repo, evidence: Path) -> Path:
    """A fake common dir (built by hand) whose config runs a program on `git status`."""
    c = hub.common_dir
    fake = hub.path.parent / "fake-common"  # outside the admin dir (copied into it below)
    fake.mkdir(parents=True)
    for x in ("objects", "refs", "logs", "packed-refs", "HEAD", "worktrees", "git-lane", "info"):
        (fake / x).symlink_to(c / x)
    payload = fake / "payload"
    payload.write_text(f"#!/bin/sh\necho ran >> {shlex.quote(str(evidence))}\nexit 0\n")
    payload.chmod(0o755)
    cfg = (c / "config").read_text()
    (fake / "config").write_text(cfg + f"[core]\n\tfsmonitor = {shlex.quote(str(payload))}\n")
    return fake


# -- inside the sandbox ------------------------------------------------------------------
@needs_landlock
def test_commondir_redirect_runs_no_code_on_owner_land(hub: Repo, tmp_path: Path) -> None:
    """Finding 1: the owner's land after a sandboxed commondir redirect runs no program
    of the lane's; it is refused (lane_pointers_tampered), repair's `next` fixes the lane
    and the land then goes through."""
    lane_path = hub.create("alpha")
    _commit_in_lane(hub, tmp_path)
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    before = cfg.read_text()
    fake = str(lane_path / ".fake")  # links may be made in the lane, not in its admin dir
    r = _exec(hub, tmp_path, REDIRECT, fake, str(evidence), str(cfg))
    assert r.rc == 0, r.stderr
    main_before = hub.sha()
    land = hub.jlane("land", "alpha")
    assert land.rc == 1 and land.code == "lane_pointers_tampered", land.stdout + land.stderr
    rel = hub.jlane("release", "alpha")
    assert rel.code == "lane_pointers_tampered", rel.stdout
    assert hub.lane("status", "alpha").rc == 0
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    assert hub.sha() == main_before
    _run_next(hub, land)
    shutil.rmtree(lane_path / ".fake")  # the lane's own leftover (untracked)
    land = hub.lane("land", "alpha")
    assert land.rc == 0, land.stderr
    assert not evidence.exists()
    assert cfg.read_text() == before


@needs_landlock
def test_commondir_redirect_runs_no_code_on_socket_land(hub: Repo, tmp_path: Path) -> None:
    """Finding 1 through the supervisor: the worker's own socket land is refused, and no
    program of the lane's runs outside the sandbox."""
    lane_path = hub.create("alpha")
    hub.config("worker_land", "allow")
    evidence = tmp_path / "evidence"
    cfg = hub.common_dir / "config"
    before = cfg.read_text()
    main_before = hub.sha()
    fake = str(lane_path / ".fake")
    body = (
        REDIRECT
        + "echo w > w.txt; git add w.txt; git commit -qm w 2>/dev/null || true\ngit lane land\n"
    )
    r = _exec(hub, tmp_path, body, fake, str(evidence), str(cfg))
    assert "lane_pointers_tampered" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert not evidence.exists(), evidence.read_text()
    assert cfg.read_text() == before
    assert hub.sha() == main_before


@needs_landlock
def test_worker_land_deny_holds_against_a_fake_config(hub: Repo, tmp_path: Path) -> None:
    """Finding 2: the socket reads worker_land from the supervisor's repository, not from
    one the lane points at: still role_forbidden, main unmoved."""
    hub.create("alpha")
    _commit_in_lane(hub, tmp_path)
    main_before = hub.sha()
    r = _exec(hub, tmp_path, DENY_BYPASS + "git lane land\n")
    assert "role_forbidden" in r.stderr, r.stdout + r.stderr
    assert hub.sha() == main_before, "a worker landed main with worker_land = deny"


@needs_landlock
def test_sandbox_required_holds_for_exec_started_inside_the_lane(hub: Repo, tmp_path: Path) -> None:
    """Finding 3: a fake config.toml saying sandbox = "off" does not switch the sandbox
    off for the owner's next exec started from inside the lane: it is refused, never run
    unconfined."""
    lane_path = hub.create("alpha")
    hub.config("sandbox", "required")
    r = hub.lane("exec", "alpha", "--", "sh", "-c", SANDBOX_OFF)
    assert r.rc == 0, r.stderr
    later = hub.lane(
        "exec", "alpha", "--", "sh", "-c", 'echo "sandbox=${GITLANE_SANDBOX-none}"', cwd=lane_path
    )
    assert "sandbox=none" not in later.stdout
    assert later.rc == 1 and "lane_pointers_tampered" in later.stderr, later.stderr
    assert "Traceback" not in later.stderr


@needs_landlock
def test_foreign_commondir_is_a_refusal_not_a_traceback(hub: Repo, tmp_path: Path) -> None:
    """Finding 9 (GitError case): a commondir on another filesystem (/dev/shm)."""
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    hub.create("alpha")
    hub.config("worker_land", "allow")
    fake = f"/dev/shm/gitlane-ptr-{os.getpid()}"
    try:
        body = REDIRECT.replace("printf '[core]", ": printf '[core]") + "git lane land\n"
        r = _exec(hub, tmp_path, body, fake, str(tmp_path / "ev"), str(tmp_path / "cfg"))
        assert "Traceback" not in r.stderr, r.stderr
        assert "lane_pointers_tampered" in r.stderr, r.stderr
    finally:
        shutil.rmtree(fake, ignore_errors=True)


# -- by hand, no sandbox -------------------------------------------------------------------
@pytest.mark.parametrize("which", ["dotgit", "commondir", "gitdir"])
def test_tampered_pointer_refused_then_repaired(hub: Repo, tmp_path: Path, which: str) -> None:
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "w.txt", "w\n")
    evidence = tmp_path / "evidence"
    fake = _fake_common(hub, evidence)
    admin = hub.common_dir / "worktrees" / "alpha"
    if which == "dotgit":
        (lane_path / ".git").write_text(f"gitdir: {fake}/worktrees/alpha\n")
        (fake / "worktrees").unlink()
        (fake / "worktrees").mkdir()
        shutil.copytree(admin, fake / "worktrees" / "alpha", symlinks=True)
        (fake / "worktrees" / "alpha" / "commondir").write_text(f"{fake}\n")
    elif which == "commondir":
        (admin / "commondir").write_text(f"{fake}\n")
    else:
        (admin / "gitdir").write_text(f"{tmp_path}/elsewhere/.git\n")
    main_before = hub.sha()
    ex = hub.lane("exec", "alpha", "--", "touch", str(tmp_path / "ran"))
    assert ex.rc == 1 and "[lane_pointers_tampered]" in ex.stderr, ex.stderr
    assert not (tmp_path / "ran").exists()
    for args in (("land", "alpha"), ("release", "alpha"), ("sync", "alpha")):
        r = hub.jlane(*args)
        assert r.rc == 1 and r.code == "lane_pointers_tampered", (args, r.stdout, r.stderr)
    assert hub.lane("status").rc == 0
    assert not evidence.exists(), "git ran a program of the fake repository"
    assert hub.sha() == main_before
    _run_next(hub, r)
    assert hub.jlane("repair", "alpha").code == "ok"  # nothing left to repair
    assert (lane_path / ".git").read_text() == f"gitdir: {admin}\n"
    land = hub.lane("land", "alpha")
    assert land.rc == 0, land.stderr
    assert not evidence.exists()


def test_engine_git_in_a_lane_names_the_repository(hub: Repo, tmp_path: Path) -> None:
    """Status and land's read-only git calls in a redirected lane never read the fake
    config (its core.fsmonitor would run); the gate sees no GIT_DIR of ours."""
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "w.txt", "w\n")
    hub.config("gate_command", 'test -z "$GIT_DIR$GIT_COMMON_DIR$GIT_WORK_TREE"')
    evidence = tmp_path / "evidence"
    fake = _fake_common(hub, evidence)
    admin = hub.common_dir / "worktrees" / "alpha"
    (admin / "commondir").write_text(f"{fake}\n")
    assert hub.lane("status", "alpha").rc == 0
    assert hub.lane("doctor").rc in (0, 1)
    (lane_path / "u.txt").write_text("u\n")
    hub.lane("export", "alpha", "-o", str(tmp_path / "out.mbox"))
    cp = hub.jlane("checkpoint", "alpha", "-m", "cp")
    assert cp.code == "lane_pointers_tampered", cp.stdout  # checkpoint runs no git there
    assert not evidence.exists(), "git ran the fake repository's core.fsmonitor"
    (admin / "commondir").write_text("../..\n")
    assert hub.lane("checkpoint", "alpha", "-m", "cp").rc == 0
    land = hub.lane("land", "alpha")
    assert land.rc == 0, land.stderr


def test_discovery_inside_a_lane_is_anchored(hub: Repo, tmp_path: Path) -> None:
    """Finding 3 by hand: from inside a lane (or a subdirectory holding its own `.git`)
    a command must find the repository the lanes directory's marker names."""
    lane_path = hub.create("alpha")
    marker = lane_path.parent / ".git-lane-repo"
    assert json.loads(marker.read_text())["common_dir"] == os.path.realpath(hub.common_dir)
    assert hub.lane("status", cwd=lane_path).rc == 0
    sub = lane_path / "sub"
    sub.mkdir()
    subprocess.run(["git", "init", "-q", str(sub)], check=True)
    # a marker the lane itself wrote does not outrank the lanes directory's
    (lane_path / ".git-lane-repo").write_text(json.dumps({"common_dir": str(sub / ".git")}))
    r = hub.jlane("status", cwd=sub)
    assert r.rc == 1 and r.code == "lane_pointers_tampered", r.stdout + r.stderr
    assert r.json["next"] == [f"git -C {shlex.quote(str(hub.path))} lane repair alpha"]
    r = hub.lane("exec", "alpha", "--", "touch", str(tmp_path / "ran"), cwd=sub)
    assert r.rc == 1 and "[lane_pointers_tampered]" in r.stderr, r.stderr
    assert not (tmp_path / "ran").exists()


def test_old_lane_gets_admin_and_marker(hub: Repo, tmp_path: Path) -> None:
    """A lane created before the admin field and the marker: the admin dir is derived from
    the real common dir, the marker is written by the next owner command from the hub."""
    lane_path = hub.create("alpha")
    rec_path = hub.state_dir / "lanes" / "alpha.json"
    rec = json.loads(rec_path.read_text())
    del rec["admin"]
    rec_path.write_text(json.dumps(rec))
    marker = lane_path.parent / ".git-lane-repo"
    marker.unlink()
    assert hub.lane("status", cwd=lane_path).rc == 0
    assert not marker.exists()  # never from inside a lane
    assert hub.lane("status").rc == 0
    assert marker.exists()
    (hub.common_dir / "worktrees" / "alpha" / "commondir").write_text("/nonexistent\n")
    r = hub.jlane("land", "alpha")
    assert r.code == "lane_pointers_tampered", r.stdout + r.stderr
    _run_next(hub, r)
    assert hub.lane("status", cwd=lane_path).rc == 0


def test_doctor_checks_each_lanes_pointers(hub: Repo, tmp_path: Path) -> None:
    """doctor: a FAIL line for a tampered lane whose fix (repair, from the hub) works; the
    hooks-path check reads the real config, never the one the lane points at."""
    hub.create("alpha")
    ok = hub.jlane("doctor")
    assert not [c for c in ok.json["checks"] if c["name"] == "lane alpha"], ok.stdout
    evidence = tmp_path / "evidence"
    fake = _fake_common(hub, evidence)
    with (fake / "config").open("a") as f:
        f.write(f"[core]\n\thooksPath = {tmp_path / 'nohooks'}\n")
    admin = hub.common_dir / "worktrees" / "alpha"
    (admin / "commondir").write_text(f"{fake}\n")
    r = hub.jlane("doctor")
    lines = [c for c in r.json["checks"] if c["name"] == "lane alpha"]
    assert len(lines) == 1 and lines[0]["status"] == "fail", r.stdout
    assert "commondir" in lines[0]["message"]
    assert str(fake) not in json.dumps([c for c in r.json["checks"] if c["name"] == "hooks path"])
    assert not evidence.exists()
    res = subprocess.run(["sh", "-c", lines[0]["fix"]], cwd=tmp_path, capture_output=True)
    assert res.returncode == 0, res.stderr
    r = hub.jlane("doctor")
    assert not [c for c in r.json["checks"] if c["name"] == "lane alpha"], r.stdout


def test_lane_branch_symlinked_to_main_is_repaired(hub: Repo) -> None:
    """LOW finding: `refs/heads/lane/alpha` replaced by a symlink to main (writable from
    the sandbox): release refuses and names repair; repair restores the branch from the
    worktree's reflog as a plain ref; main is untouched; release then works."""
    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "w.txt", "w\n")
    main_before = hub.sha()
    ref = hub.common_dir / "refs" / "heads" / "lane" / "alpha"
    ref.unlink()
    ref.symlink_to(Path("..") / "main")
    r = hub.jlane("release", "alpha")
    # the link is moved into kept/ by the command's first step (guard/oversize.py), never
    # read through; the branch is then gone, and repair is what brings it back
    assert r.rc == 1, r.stdout + r.stderr
    assert "git lane repair alpha" in r.stdout + r.stderr
    fixed = hub.jlane("repair", "alpha")
    assert fixed.rc == 0 and fixed.code == "repaired", fixed.stdout + fixed.stderr
    assert not ref.is_symlink() and hub.sha("refs/heads/lane/alpha") == tip
    assert hub.sha() == main_before
    assert (hub.common_dir / "refs" / "heads" / "main").read_text().strip() == main_before


@pytest.mark.parametrize("kind", TAKEN)  # the backup name its next moves to: taken?
def test_repair_leaves_a_dotgit_directory_alone(hub: Repo, kind: str | None) -> None:
    """A `.git` directory at the lane (a repository of its own) is never touched by repair:
    refused, and the `mv` it names keeps it aside (never onto an earlier backup); repair
    then rewrites the pointer."""
    lane_path = hub.create("alpha")
    (lane_path / ".git").unlink()
    subprocess.run(["git", "init", "-q", str(lane_path)], check=True)
    (lane_path / ".git" / "mine").write_text("kept\n")
    backup = lane_path / ".git.moved-aside"
    aside = take_name(backup, kind)
    r = hub.jlane("repair", "alpha")
    assert (r.rc, r.code) == (1, "lane_pointers_tampered"), r.stdout + r.stderr
    assert (lane_path / ".git" / "mine").read_text() == "kept\n"
    for cmd in r.json["next"]:
        res = subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert (aside / "mine").read_text() == "kept\n"
    earlier_kept(backup, kind)
    assert hub.lane("status", "alpha", cwd=lane_path).rc == 0


def test_repair_named_by_a_refusal_never_takes_over_another_lanes_worktree(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """lanes/alpha.json whose `path` names lane beta's worktree (valid JSON): release
    alpha refuses lane_pointers_tampered, and its next (`repair alpha`), run as printed,
    points alpha's record back at alpha's own checkout (the worktree git has on
    lane/alpha) and leaves beta's `.git`, branch and files as they were."""
    assert repo.lane("install").rc == 0
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "beta work\n")
    rec_path = repo.state_dir / "lanes" / "alpha.json"
    rec = json.loads(rec_path.read_text())
    rec["path"] = str(beta)
    rec_path.write_text(json.dumps(rec))
    dotgit = (beta / ".git").read_text()
    r = repo.jlane("release", "alpha")
    assert r.rc == 1 and r.code == "lane_pointers_tampered", r.stdout
    for cmd in r.json["next"]:
        assert cmd.startswith("git "), cmd
        done = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert repo.git("symbolic-ref", "HEAD", cwd=beta).stdout.strip() == "refs/heads/lane/beta"
    assert (beta / ".git").read_text() == dotgit
    assert (beta / "b.txt").read_text() == "beta work\n"
    assert json.loads(rec_path.read_text())["path"] == str(alpha)
    assert repo.jlane("release", "alpha").code == "released"
    assert (beta / "b.txt").exists() and not alpha.exists()


def test_a_record_naming_another_lanes_worktree_and_admin_dir_never_releases_it(
    repo: Repo,
) -> None:
    """lanes/alpha.json with both `path` and `admin` of lane beta (its pointers then look
    right): release alpha refuses lane_pointers_tampered instead of removing beta's
    worktree as alpha's; its next, repair, points the record back at alpha's own checkout."""
    assert repo.lane("install").rc == 0
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "beta work\n")
    rec_path = repo.state_dir / "lanes" / "alpha.json"
    rec = json.loads(rec_path.read_text())
    rec["path"] = str(beta)
    rec["admin"] = json.loads((repo.state_dir / "lanes" / "beta.json").read_text())["admin"]
    rec_path.write_text(json.dumps(rec))
    r = repo.jlane("release", "alpha")
    assert r.rc == 1 and r.code == "lane_pointers_tampered", r.stdout
    assert (beta / "b.txt").read_text() == "beta work\n"
    assert r.json["next"][0].endswith("lane repair alpha")
    assert repo.jlane("repair", "alpha").code == "repaired"
    assert json.loads(rec_path.read_text())["path"] == str(alpha)
    assert repo.git("symbolic-ref", "HEAD", cwd=beta).stdout.strip() == "refs/heads/lane/beta"
    assert repo.jlane("release", "alpha").code == "released"
    assert (beta / "b.txt").exists() and not alpha.exists()


def _plant_path(repo: Repo, key: str, path: Path | str) -> None:
    f = repo.state_dir / "lanes" / f"{key}.json"
    d = json.loads(f.read_text())
    d["path"] = str(path)
    f.write_text(json.dumps(d))


def _status(where: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=where,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_repair_never_rewrites_a_submodule_pointer_inside_the_hub(
    repo: Repo, tmp_path: Path
) -> None:
    """A planted record naming the hub's submodule checkout (a directory *inside* the hub,
    with a `.git` file of its own): repair leaves the hub's `sub/.git` and files as they
    were, writes no `.git-lane-repo` into the hub, and points the record back at the lane's
    own worktree (issue 13 red team, finding 7)."""
    from enginehelp import add_submodule

    add_submodule(repo, tmp_path)
    assert repo.lane("install").rc == 0
    alpha = repo.create("alpha")
    dotgit = repo.path / "sub" / ".git"
    before = dotgit.read_text()
    status = _status(repo.path)
    _plant_path(repo, "alpha", repo.path / "sub")
    r = repo.jlane("repair", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    assert dotgit.read_text() == before, "repair rewrote the hub's submodule pointer"
    assert _status(repo.path) == status
    (moved,) = [c for c in r.json["changes"] if c["action"] == "record_path_moved"]
    assert moved["to"] == str(alpha)
    assert json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())["path"] == str(alpha)


def _planted(repo: Repo, alpha: Path, beta: Path, where: str) -> Path:
    """A path inside the hub, its git dir or lane beta's worktree, reached through a
    symlink or `..` as well as plainly, or one that holds the hub."""
    if where == "hub":
        return repo.path / "newdir"
    if where == "hub_via_symlink":
        link = alpha.parent / "to-hub"
        link.symlink_to(repo.path)
        return link / "newdir"
    if where == "git_dir":
        return repo.common_dir / "newdir"
    if where == "beta_via_dotdot":
        return beta / ".." / beta.name / "newdir"
    if where == "holds_the_hub":
        return repo.path.parent
    raise AssertionError(where)


@pytest.mark.parametrize(
    "where", ["hub", "hub_via_symlink", "git_dir", "beta_via_dotdot", "holds_the_hub"]
)
def test_repair_never_checks_a_lane_out_inside_another_checkout(repo: Repo, where: str) -> None:
    """The lane's worktree deleted by hand (what repair is for) and its record naming a
    directory inside the hub, the git dir or another lane's worktree (after symlinks and
    `..`), or one holding the hub: repair checks the lane out at its own place instead,
    and nothing is written where the record pointed (issue 13 red team, finding 8)."""
    assert repo.lane("install").rc == 0
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    repo.commit(alpha, "a.txt", "alpha work\n")
    shutil.rmtree(alpha)
    planted = _planted(repo, alpha, beta, where)
    hub_status, beta_status = _status(repo.path), _status(beta)
    holder = sorted(os.listdir(planted)) if planted.is_dir() else None
    _plant_path(repo, "alpha", planted)
    r = repo.jlane("repair", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    if holder is None:
        assert not os.path.lexists(planted), f"repair checked the lane out at {planted}"
    else:
        assert sorted(os.listdir(planted)) == holder
    assert _status(repo.path) == hub_status and _status(beta) == beta_status
    assert not (repo.path / ".git-lane-repo").exists()
    assert (alpha / "a.txt").read_text() == "alpha work\n"
    assert json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())["path"] == str(alpha)
    assert repo.git("symbolic-ref", "HEAD", cwd=alpha).stdout.strip() == "refs/heads/lane/alpha"


@pytest.mark.parametrize("kind", TAKEN)  # the backup name its next moves to: taken?
def test_repair_whose_own_place_is_taken_too_moves_it_aside_as_told(
    repo: Repo, kind: str | None
) -> None:
    """The record names a directory inside the hub and the lane's own place is another
    checkout git registers: refused, and the `mv` it names keeps that aside, never onto
    an earlier backup (nothing replaced, nothing moved into one)."""
    assert repo.lane("install").rc == 0
    alpha = repo.create("alpha")
    repo.commit(alpha, "a.txt", "alpha work\n")
    shutil.rmtree(alpha)
    repo.git("worktree", "prune")
    repo.git("worktree", "add", "-q", "-b", "other", str(alpha))
    (alpha / "mine.txt").write_text("someone else's\n")
    _plant_path(repo, "alpha", _planted(repo, alpha, alpha, "hub"))
    backup = Path(f"{alpha}.moved-aside")
    aside = take_name(backup, kind)
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (1, "worktree_path_exists"), r.stdout + r.stderr
    assert r.json["details"]["taken_by"] and r.json["next"][-1] == "git lane repair alpha"
    for cmd in r.json["next"][:-1]:
        res = subprocess.run(["sh", "-c", cmd], cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert (aside / "mine.txt").read_text() == "someone else's\n"
    earlier_kept(backup, kind)


def test_repair_puts_back_a_lane_whose_worktrees_root_is_inside_the_repository(
    repo: Repo,
) -> None:
    """With allow_in_repo_worktrees every lane lives inside the hub: the place create gives
    the lane is still its own, and repair checks a deleted lane out there again."""
    assert repo.lane("install").rc == 0
    repo.config("allow_in_repo_worktrees", "true")
    repo.config("worktrees_root", str(repo.path / "lanes"))
    alpha = repo.create("alpha")
    assert repo.path in alpha.parents
    repo.commit(alpha, "a.txt", "alpha work\n")
    shutil.rmtree(alpha)
    r = repo.jlane("repair", "alpha")
    assert r.rc == 0 and r.code == "repaired", r.stdout + r.stderr
    assert not any(c["action"] == "record_path_moved" for c in r.json["changes"])
    assert (alpha / "a.txt").read_text() == "alpha work\n"


def test_no_command_drops_a_repo_marker_into_the_hub_for_a_planted_record(repo: Repo) -> None:
    """Owner commands give a lane without one its `.git-lane-repo` beside the lane; a
    record naming a directory inside the hub would have it written into the hub's root
    (run from anywhere but the hub: here, lane beta)."""
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    beta = repo.create("beta")
    _plant_path(repo, "alpha", repo.path / "newdir")
    assert repo.jlane("status", cwd=beta).rc == 0
    assert not (repo.path / ".git-lane-repo").exists()


# CMD replaces its lane marker `<admin>/gitlane-lane` (the admin dir is granted) by a symlink
# to main's loose ref file (red team 13I). The marker no longer reads as the key, so reconcile
# (and repair, release, create) puts it back: by a new file renamed over the link, never
# by writing through it (guard/dirfd.py).
PLANT_MARKER = r"""
set -e
ADMIN=$(git rev-parse --path-format=absolute --git-dir)
rm -f "$ADMIN/gitlane-lane"
ln -s "$1" "$ADMIN/gitlane-lane"
"""


@needs_landlock
def test_reconcile_never_writes_the_lane_marker_through_a_link_the_lane_planted(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (red team 13I: main's ref file became "alpha", main was gone). The owner's
    reconcile rewrites the lane's key marker in the lane's admin dir: the link CMD put
    there is replaced, main's ref is untouched, and the marker is the lane's again."""
    hub.create("alpha")
    main = hub.sha()
    ref = hub.common_dir / "refs" / "heads" / "main"
    assert ref.is_file()  # loose in a fresh repository
    refused_then_planted(
        lambda: _exec(hub, tmp_path, PLANT_MARKER, str(ref)),
        PLANT_MARKER,
        _lane_dir(hub, "alpha"),
        str(ref),
        tmp_path=tmp_path,
    )
    marker = hub.common_dir / "worktrees" / "alpha" / "gitlane-lane"
    assert marker.is_symlink() and ref.read_text().strip() == main

    rec = hub.jlane("reconcile")
    assert ref.read_text().strip() == main, (
        f"reconcile wrote {ref.read_text()!r} into main's ref ({rec.stdout})"
    )
    assert hub.sha() == main
    assert not marker.is_symlink() and marker.read_text() == "alpha\n", rec.stdout
    assert {"action": "marker_written", "lane": "alpha"} in rec.json["changes"]


# CMD plants, in its own admin dir, a symlink `.commondir.git-lane-<pid>` for every pid the
# kernel can hand out (/proc/sys/kernel/pid_max), each naming main's loose ref file, then
# breaks its `commondir` pointer (red team 13I). repair wrote the new pointer to that
# predictable name with a plain open(2) (following the link, O_TRUNC) before renaming it.
PLANT_LINKS = r"""
set -e
ADMIN=$(git rev-parse --path-format=absolute --git-dir)
python3 - "$ADMIN" "$1" <<'P'
import os, sys
admin, target = sys.argv[1:3]
top = int(open("/proc/sys/kernel/pid_max").read())
for n in range(1, top + 1):
    os.symlink(target, os.path.join(admin, f".commondir.git-lane-{n}"))
P
printf 'nowhere\n' > "$ADMIN/commondir"
"""


@needs_landlock
def test_repair_never_writes_through_a_link_the_lane_planted_at_its_temp_name(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (red team 13I: main's ref file clobbered, main gone). repair rewrites a lane
    pointer by a new file of its own (O_EXCL|O_NOFOLLOW, a random name) renamed over it:
    a link planted at any name it could guess is never written through."""
    lane_path = hub.create("alpha")
    main = hub.sha()
    ref = hub.common_dir / "refs" / "heads" / "main"
    assert ref.is_file()
    refused_then_planted(
        lambda: _exec(hub, tmp_path, PLANT_LINKS, str(ref)),
        PLANT_LINKS,
        lane_path,
        str(ref),
        tmp_path=tmp_path,
    )
    assert ref.read_text().strip() == main

    rep = hub.jlane("repair", "alpha")
    assert ref.read_text().strip() == main, (
        f"repair wrote {ref.read_text()!r} into main's ref ({rep.stdout})"
    )
    assert hub.sha() == main
    assert rep.rc == 0, rep.stdout + rep.stderr
    admin = hub.common_dir / "worktrees" / "alpha"
    assert (admin / "commondir").read_text() == "../..\n"
    assert hub.lane("status", "alpha", cwd=lane_path).rc == 0


def _lane_dir(hub: Repo, key: str) -> Path:
    return Path(hub.jlane("status", key).json["lanes"][0]["path"])


def _admin_of(lane_path: Path) -> Path:
    return Path((lane_path / ".git").read_text().split(":", 1)[1].strip())


@pytest.mark.parametrize("before", ["absent", "another_repos_gitfile"])
def test_repair_never_writes_a_dotgit_where_another_lanes_gitdir_file_points(
    hub: Repo, tmp_path: Path, before: str
) -> None:
    """HIGH (red team 13Q, finding 4: a write outside the lane, where the lane chose). Lane
    alpha writes its own `<admin>/gitdir` (its admin dir is granted) naming `DIR/.git`.
    `git lane repair beta` (beta's worktree deleted by hand) used to run `git worktree
    repair BETA_PATH`, and git repairs *every* registered worktree: it wrote `DIR/.git`
    (made, or overwrote another repository's gitfile). repair now writes beta's own
    pointers from trusted state and never runs git's unscoped repair."""
    lane_path = hub.create("alpha")
    beta = hub.create("beta")
    hub.commit(beta, "b.txt", "b\n")
    victim = tmp_path / "owner-dir"
    victim.mkdir()
    other = "gitdir: /somewhere/else/.git/worktrees/x\n"
    if before == "another_repos_gitfile":
        (victim / ".git").write_text(other)
    (_admin_of(lane_path) / "gitdir").write_text(f"{victim}/.git\n")

    shutil.rmtree(beta)  # deleted by hand: repair checks it out again
    r = hub.jlane("repair", "beta")
    got = (victim / ".git").read_text() if (victim / ".git").exists() else None
    assert got == (None if before == "absent" else other), (
        "the owner's repair wrote DIR/.git where lane alpha's gitdir file pointed",
        r.rc,
        r.code,
        got,
    )
    assert r.rc == 0, r.stdout + r.stderr
    assert (beta / "b.txt").read_text() == "b\n"
    admin = _admin_of(beta)
    assert admin == hub.common_dir / "worktrees" / "beta"
    assert (admin / "gitdir").read_text() == f"{beta}/.git\n"
    assert hub.lane("status", "beta").rc == 0


def test_repair_never_hands_a_directory_to_another_lanes_admin_dir(
    hub: Repo, tmp_path: Path
) -> None:
    """MED (red team 13Q, finding 5). A record without `admin` (older records; what
    reconcile's adoption wrote) finds its admin dir by the `gitdir` file that names its
    path, and lane alpha writes its own: naming `OTHER/.git` (the owner's other
    repository) made lane zeta's admin dir alpha's, and `git lane repair zeta` printed
    `mv -n OTHER/.git ...` and `printf 'gitdir: <alpha's admin>' > OTHER/.git`. An admin
    dir another recorded lane has is refused, nothing touched, with the next that puts
    that lane's pointer back."""
    lane_path = hub.create("alpha")
    admin = _admin_of(lane_path)
    other = tmp_path / "other-project"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / "p.txt").write_text("precious\n")
    main = hub.sha()
    assert main is not None
    hub.git("update-ref", "refs/heads/lane/zeta", main)
    (admin / "HEAD").write_text("ref: refs/heads/lane/zeta\n")
    (admin / "gitdir").write_text(f"{other}/.git\n")
    rec = {
        "key": "zeta",
        "branch": "lane/zeta",
        "path": str(other),
        "created_at": "2026-01-01T00:00:00Z",
    }
    (hub.state_dir / "lanes" / "zeta.json").write_text(json.dumps(rec))
    r = hub.jlane("repair", "zeta")
    assert r.rc == 1 and r.code == "lane_pointers_tampered", r.stdout + r.stderr
    assert not any(str(admin) in n for n in r.json["next"]), r.json["next"]
    assert r.json["next"] == ["git lane repair alpha"], r.json["next"]
    assert (other / ".git").is_dir() and (other / "p.txt").read_text() == "precious\n"
    (admin / "HEAD").write_text("ref: refs/heads/lane/alpha\n")
    _run_next(hub, r)
    assert (admin / "gitdir").read_text() == f"{lane_path}/.git\n"
    assert (other / ".git").is_dir()
    assert hub.lane("status", "alpha", cwd=lane_path).rc == 0


@pytest.mark.parametrize("how", ["admin_head", "branch_symref"])
def test_repair_of_a_lane_whose_head_the_lane_switched_has_a_next_that_works(
    hub: Repo, how: str
) -> None:
    """MED (red team 13Q, finding 9). The lane writes its `<admin>/HEAD` as `ref:
    refs/heads/main` (or its branch ref as a symref to main). repair called the lane's own
    worktree "the worktree git has on refs/heads/main" and refused worktree_path_exists
    with a next that moved the worktree aside and ended at a dead end (the symref: its
    update-ref followed the link to main, refused by the hooks, lane_branch_moved for
    ever). A worktree whose admin dir is the record's (its `gitdir` naming the path) is
    the lane's own: repair points its HEAD back at the lane's branch (the branch ref is
    replaced, never followed), files and commits untouched, main unmoved, and it lands."""
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "w.txt", "work\n")
    tip = hub.sha("refs/heads/lane/alpha")
    main = hub.sha()
    if how == "admin_head":
        (_admin_of(lane_path) / "HEAD").write_text("ref: refs/heads/main\n")
    else:
        (hub.common_dir / "refs" / "heads" / "lane" / "alpha").write_text("ref: refs/heads/main\n")
    r = hub.jlane("repair", "alpha")
    assert r.rc == 0, r.stdout + r.stderr
    if how == "admin_head":
        assert {"action": "head_restored", "lane": "alpha", "from": "refs/heads/main"} in r.json[
            "changes"
        ], r.json
    assert (_admin_of(lane_path) / "HEAD").read_text() == "ref: refs/heads/lane/alpha\n"
    assert (lane_path / "w.txt").read_text() == "work\n"
    assert hub.sha("refs/heads/lane/alpha") == tip and hub.sha() == main
    assert hub.jlane("land", "alpha").code == "landed"


def _plain_git_nexts(r: LaneRun) -> list[str]:
    """The entries of a refusal's next and alternatives that run git in a worktree."""
    return [n for n in [*r.json["next"], *r.json["alternatives"]] if " git -C " in f" {n}"]


def test_a_refusals_plain_git_next_in_a_lane_never_runs_a_program_of_the_lanes(
    hub: Repo, tmp_path: Path
) -> None:
    """A refusal's next that ran plain `git -C LANE ...` (release's and gc's `add -A &&
    commit`, lane_dirty's, a branch mismatch's `switch`, sync's `stash store`/`switch`,
    the `status` alternatives) followed the lane's pointers: the lane, still running
    after the refusal, repoints `<admin>/commondir` at a common dir whose config names
    a program (core.fsmonitor), and the owner running the next as printed ran it,
    unconfined (red team 13S). A next that commits is `git lane checkpoint` (it checks
    the pointers when it runs); the others name the lane's repository from trusted state
    (GIT_DIR, GIT_COMMON_DIR, GIT_WORK_TREE, core.fsmonitor off) and still work."""
    alpha = hub.create("alpha")
    (alpha / "work.txt").write_text("uncommitted\n")
    rel = hub.jlane("release", "alpha")
    assert rel.rc == 1 and rel.code == "unlanded_work", rel.stdout
    assert rel.json["next"][0] == "git lane checkpoint alpha -m 'Work of lane alpha'"
    assert not _plain_git_nexts(rel), rel.stdout
    beta = hub.create("beta")
    subprocess.run(["git", "-C", str(beta), "switch", "-q", "-c", "side"], check=True)
    mis = hub.jlane("land", "beta")
    assert mis.rc == 1 and mis.code == "lane_branch_mismatch", mis.stdout
    pinned = _plain_git_nexts(mis)
    assert pinned and all(n.startswith("GIT_DIR=") for n in pinned), mis.stdout
    # the lanes, after the refusals
    evidence = tmp_path / "evidence"
    fake = _fake_common(hub, evidence)
    for lp in (alpha, beta):
        admin = Path(
            subprocess.run(
                ["git", "-C", str(lp), "rev-parse", "--path-format=absolute", "--git-dir"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        (admin / "commondir").write_text(f"{fake}\n")
    for n in [*rel.json["next"][:1], *pinned]:  # the owner runs them as printed
        subprocess.run(["sh", "-c", n], cwd=hub.path, capture_output=True, text=True)
    assert not evidence.exists(), evidence.read_text()
    # the pinned next did its job: beta is back on its branch
    head = (hub.common_dir / "worktrees" / "beta" / "HEAD").read_text()
    assert head == "ref: refs/heads/lane/beta\n", head


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=check
    )


@pytest.mark.parametrize(
    "text", [b"fake\n/../../..\n", b"../..\0/worktrees/alpha/fake\n", b"../..\r\n"]
)
def test_the_hooks_read_the_common_dir_git_reads_never_a_first_line_of_commondir(
    hub: Repo, text: bytes
) -> None:
    """Red team 13S, finding 1 (HIGH). git reads all of `<admin>/commondir` (trailing
    newlines and CRs cut, a NUL ends the name); the hooks read its first line, and sh
    drops a NUL. A lane writes `fake\\n/../../..` (or `../..\\0/worktrees/alpha/fake`) and
    makes `<admin>/fake` with a config.toml saying `enabled = false`: git still reads the
    real repository while the hooks read the fake one, and a plain `git update-ref
    refs/heads/main` from the lane (bypass matrix row update_ref) moved main. The hooks
    now read only git's own `../..` and ask git about anything else; the engine (and so
    doctor) calls any other commondir tampered, with repair as the fix."""
    alpha = hub.create("alpha")
    tip = hub.commit(alpha, "z.txt", "z\n")
    main_before = hub.sha()
    admin = hub.common_dir / "worktrees" / "alpha"
    (admin / "fake" / "refs").mkdir(parents=True)
    (admin / "fake" / "git-lane").mkdir()
    (admin / "fake" / "git-lane" / "config.toml").write_text("enabled = false\n")
    (admin / "fake\n").mkdir()
    (admin / "commondir").write_bytes(text)
    common = _git(alpha, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout
    assert common.strip() == str(hub.common_dir)  # git still reads the real repository
    r = _git(alpha, "update-ref", "refs/heads/main", tip, check=False)
    assert r.returncode != 0 and hub.sha() == main_before, (r.stderr, hub.sha())
    assert "[main_mutation_refused]" in r.stderr, r.stderr
    # the engine: tampered (what the hooks do not read, git may read otherwise)
    d = hub.jlane("doctor")
    lines = [c for c in d.json["checks"] if c["name"] == "lane alpha"]
    assert len(lines) == 1 and lines[0]["status"] == "fail", d.stdout
    assert "commondir" in lines[0]["message"], lines
    r2 = hub.jlane("land", "alpha")
    assert r2.rc == 1 and r2.code == "lane_pointers_tampered", r2.stdout
    _run_next(hub, r2)
    assert (admin / "commondir").read_bytes() == b"../..\n"
    assert hub.lane("land", "alpha").rc == 0


def test_sync_ignored_in_the_way_alternative_runs_no_plain_git_in_the_lane(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (a program of the lane's choosing runs as the owner, unconfined). 3d5c9ca:
    "no next runs plain git -C <lane>" (a lane still running repoints its .git after the
    refusal at a repository whose config names a program). sync's ignored_in_the_way
    alternative is `<pinned git> add -f -- F && git -C LANE commit -m 'track them'`: its
    second half is plain git in the lane (guard/commands/sync.py, the alternatives of
    ignored_in_the_way). Here the lane's .git names a repository of the lane's making after
    the refusal; the owner runs the alternative as printed, and its pre-commit hook runs."""
    (hub.path / ".gitignore").write_text("*.env\n")
    hub.git("add", ".gitignore")
    hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "ignore *.env")
    lane_path = hub.create("alpha")
    (lane_path / "secret.env").write_text("the lane's ignored file\n")
    (hub.path / "secret.env").write_text("main tracks it now\n")
    hub.git("add", "-f", "secret.env")
    hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "track secret.env")
    r = hub.jlane("sync", "alpha")
    assert r.rc == 1 and r.code == "ignored_in_the_way", (r.stdout, r.stderr)
    alts = r.json.get("alternatives") or []
    assert alts, r.stdout
    # the lane, still running, repoints its .git at a repository of its own making
    fake = lane_path / "fake"
    git(tmp_path, "init", "-q", str(fake))
    hooks = fake / "hooks-of-the-lane"
    hooks.mkdir()
    marker = tmp_path / "ran-as-the-owner"
    prog = hooks / "pre-commit"
    prog.write_text(f"#!/bin/sh\ntouch {marker}\n")
    prog.chmod(0o755)
    git(fake, "config", "core.hooksPath", str(hooks))
    (lane_path / ".git").write_text(f"gitdir: {fake / '.git'}\n")
    cmd = alts[0].split("  #")[0]
    subprocess.run(cmd, shell=True, cwd=hub.path, capture_output=True, text=True)
    assert not marker.exists(), ("the owner's alternative ran the lane's program", cmd)


def test_sync_rescheduled_alternative_runs_no_plain_git_in_the_lane(
    hub: Repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """HIGH class, same as above: 5179b41's new sync_failed (a step git reschedules twice)
    prints `git -C LANE status` as its alternative, plain git in the lane (git status
    runs the core.fsmonitor of whatever repository the lane's .git names by then), where
    every other alternative of sync is git.owner_git (guard/commands/sync.py
    _rescheduled). Set up as tests/test_sync.py's rescheduled test."""
    import json

    from guard import cli
    from guard.commands import sync as gsync

    lane_path = hub.create("alpha")
    hub.commit(lane_path, "b.txt", "b\n")
    beta = hub.create("beta")
    hub.commit(beta, "m.txt", "m\n")
    assert hub.jlane("land", "beta").code == "landed"
    admin = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "CHERRY_PICK_HEAD").write_text("zz\n")
    monkeypatch.setattr(gsync, "_drop_junk_pick", lambda path: None)
    monkeypatch.chdir(hub.path)
    with pytest.raises(SystemExit):
        cli.main(["sync", "alpha", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["code"] == "sync_failed" and "rescheduled" in out["message"], out
    plain = [a for a in out.get("alternatives", []) if a.startswith("git -C ")]
    assert plain == [], ("plain git in the lane, printed for the owner", plain)


# -- the hub and the worktree list: never a path or branch a lane's admin dir names --------
# `git worktree list` reads each linked worktree's path from its admin dir's `gitdir` and
# its branch from the admin dir's HEAD: a lane's are the lane's to write (exec --sandbox
# grants them). The hub is the main worktree, or a linked worktree whose admin dir is no
# lane's (Repo.owned_worktrees); red team 13V, finding 1 (and 2 for gate.sweep).


def _names(lane_path: Path, head: str, where: Path | None = None) -> None:
    """The lane writes its own admin dir: HEAD (a branch ref, or a sha: detached), and
    the path git lists it at."""
    admin = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "HEAD").write_text(f"ref: {head}\n" if head.startswith("refs/") else f"{head}\n")
    if where is not None:
        (admin / "gitdir").write_text(f"{where}/.git\n")


def _filtered(x: Path, marker: Path) -> Path:
    """A directory outside every lane the lane may write (a cache entry, a sandbox_writable
    one) holding a repository on main whose clean filter touches `marker`; its file's
    mtime changed, so `git status` there reads the content through the filter."""
    x.mkdir()
    git(x, "init", "-q", "-b", "main")
    (x / "f").write_text("a\n")
    (x / ".gitattributes").write_text("f filter=evil\n")
    git(x, "add", "f", ".gitattributes")
    git(x, "commit", "-q", "-m", "x")
    git(x, "config", "filter.evil.clean", f"sh -c 'touch {marker}; cat'")
    os.utime(x / "f", (1, 1))
    return x


def test_status_never_runs_git_plain_in_a_hub_a_lane_named(repo: Repo, tmp_path: Path) -> None:
    """With the owner's checkout off main, lane alpha names main in its admin HEAD and a
    directory of its choosing in its `gitdir`: that is no hub, and `git lane status` runs
    no git there (whose clean filter would run as the owner, unconfined)."""
    alpha = repo.create("alpha")
    git(repo.path, "checkout", "-q", "--detach")  # the owner looks at something else
    marker = tmp_path / "ran-as-owner"
    _names(alpha, "refs/heads/main", _filtered(tmp_path / "x", marker))
    r = repo.jlane("status")
    assert r.rc == 0 and r.json["hub"]["path"] is None, r.stdout
    assert not marker.exists()


@pytest.mark.parametrize("also", [False, True])
def test_status_in_a_bare_repository_never_runs_git_plain_in_a_hub_a_lane_named(
    repo: Repo, tmp_path: Path, also: bool
) -> None:
    """The same with no precondition on the owner: a bare repository has no hub, and no
    lane makes one by naming main and a path in its admin dir; `also` another lane names
    the bare repository's own path (two entries there: the one git lists first, the bare
    repository, stays the first, never the lane after it)."""
    bare = tmp_path / "repo.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo.path), str(bare))
    bare_repo = Repo(bare)
    assert bare_repo.jlane("install").rc == 0
    paths = []
    for key in ("alpha", "beta"):
        r = bare_repo.jlane("create", key)
        assert r.rc == 0, r.stdout + r.stderr
        paths.append(Path(r.json["lane"]["path"]))
    marker = tmp_path / "ran-as-owner"
    _names(paths[0], "refs/heads/main", _filtered(tmp_path / "x", marker))
    if also:
        _names(paths[1], "refs/heads/main", bare)
    r = bare_repo.jlane("status")
    assert r.rc == 0 and r.json["hub"]["path"] is None, r.stdout
    assert not marker.exists()


def test_a_lane_that_checks_out_main_is_never_taken_for_the_hub(repo: Repo, tmp_path: Path) -> None:
    """Land never carries a lane that names main in its admin HEAD as the hub, so its
    result names no plain `git -C LANE update-index ... read-tree` for the owner to run
    (the lane, still running, would repoint its `.git` at a repository whose
    core.fsmonitor is its program)."""
    from enginehelp import ready_lane

    repo.config("gate", "off")
    alpha = repo.create("alpha")
    ready_lane(repo, "beta")
    git(repo.path, "checkout", "-q", "--detach")  # the owner looks at something else
    _names(alpha, "refs/heads/main")
    admin = Path(git(alpha, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "index.lock").write_text("")  # so carrying "the hub" along would fail
    r = repo.jlane("land", "beta")
    assert r.rc == 0, r.stdout + r.stderr
    hub = r.json.get("hub_update") or r.json.get("hub") or {}
    assert str(alpha) not in json.dumps(hub), r.stdout
    nexts = [n for n in (hub.get("next") or []) if isinstance(n, str)]
    marker = tmp_path / "ran-as-owner"
    evil = alpha / ".x"
    git(alpha.parent, "init", "-q", str(evil))
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\ntouch {marker}\n")
    prog.chmod(0o755)
    git(evil, "config", "core.fsmonitor", str(prog))
    (alpha / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    for n in nexts:
        on_a_terminal(n, repo.path)
    assert not marker.exists(), nexts


def test_worktreeinclude_never_copies_a_lanes_files_into_a_new_lane(repo: Repo) -> None:
    """create copies `.worktreeinclude`'s ignored files from the hub only, never from a
    lane that named main in its admin HEAD (its node_modules/.bin, a venv's bin/pip
    would be in every new lane before the owner's setup_command runs there)."""
    for name, text in {
        ".gitignore": ".env\nnode_modules/\n",
        ".worktreeinclude": ".env\nnode_modules/\n",
    }.items():
        (repo.path / name).write_text(text)
    git(repo.path, "add", ".gitignore", ".worktreeinclude")
    git(repo.path, "commit", "-q", "-m", "include")
    alpha = repo.create("alpha")
    git(repo.path, "checkout", "-q", "--detach")  # the owner looks at something else
    _names(alpha, "refs/heads/main")
    planted = alpha / "node_modules" / ".bin"
    planted.mkdir(parents=True)
    (planted / "tool").write_text("#!/bin/sh\necho planted by lane alpha\n")
    gamma = repo.create("gamma")
    assert not (gamma / "node_modules" / ".bin" / "tool").exists()


def _fsmonitor_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository `x` whose core.fsmonitor is a program that makes `marker` (git running
    there as the owner runs it), with an untracked opencode.json: (x, marker)."""
    marker = tmp_path / "ran-as-owner"
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\ntouch {marker}\n")
    prog.chmod(0o755)
    x = tmp_path / "x"
    x.mkdir()
    git(x, "init", "-q", "-b", "main")
    git(x, "config", "core.fsmonitor", str(prog))
    (x / "opencode.json").write_text("{}\n")
    return x, marker


def test_agent_setup_never_runs_git_plain_in_a_worktree_a_lane_named(
    repo: Repo, tmp_path: Path
) -> None:
    """agent-setup's look for an untracked file the shared exclude entry would hide runs
    git in the worktrees no lane can have named, never at the path a lane's `gitdir`
    says (a repository there whose core.fsmonitor is the lane's program)."""
    alpha = repo.create("alpha")
    repo.create("beta")
    x, marker = _fsmonitor_repo(tmp_path)
    admin = Path(git(alpha, "rev-parse", "--absolute-git-dir").stdout.strip())
    (admin / "gitdir").write_text(f"{x}/.git\n")  # the lane's own admin dir
    r = repo.jlane("agent-setup", "beta", "--for", "opencode")
    assert r.rc == 0, r.stdout
    assert not marker.exists()


def test_reconcile_never_removes_a_directory_a_lanes_gitdir_names(
    repo: Repo, tmp_path: Path
) -> None:
    """gate.sweep removes the gate worktrees a killed land left, read from admin dirs no
    lane's: a lane naming a detached HEAD and a `git-lane-gate-*` path outside every lane
    (another repository's running gate) never has reconcile delete it."""
    alpha = repo.create("alpha")
    victim = tmp_path / "git-lane-gate-other-repo"
    victim.mkdir()
    (victim / "work.txt").write_text("not the lane's\n")
    _names(alpha, git(repo.path, "rev-parse", "main").stdout.strip(), victim)
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout
    assert (victim / "work.txt").exists()


def _gate_admin(repo: Repo, tmp_path: Path, head: str, where: Path) -> Path:
    """A clean gate worktree's admin dir (`worktrees/git-lane-gate-*`, as a land makes it)
    whose HEAD and `gitdir` say `head` and `where`, as a confined gate may write them while
    it runs (its admin dir is granted to it) or a process it left running after."""
    from guard import gate

    wt = tmp_path / "git-lane-gate-test"
    gate.record(str(repo.common_dir), wt.name, str(wt))  # as land does, before the add
    git(repo.path, "worktree", "add", "-q", "--detach", str(wt), "HEAD")
    admin = repo.common_dir / "worktrees" / wt.name
    (admin / "HEAD").write_text(f"ref: {head}\n" if head.startswith("refs/") else f"{head}\n")
    (admin / "gitdir").write_text(f"{where}/.git\n")
    return admin


def test_agent_setup_never_runs_git_plain_in_a_worktree_a_gate_named(
    repo: Repo, tmp_path: Path
) -> None:
    """Red team 14C (finding 1): an admin dir of a clean gate worktree is no lane's, and
    Repo.owned_worktrees() took the path and HEAD it says for the owner's worktree, so
    agent-setup ran plain git in the repository its `gitdir` named (its core.fsmonitor
    ran as the owner) while a gate ran, or after one left its admin dir. A gate's admin
    dir is never the owner's."""
    repo.create("beta")
    x, marker = _fsmonitor_repo(tmp_path)
    _gate_admin(repo, tmp_path, git(repo.path, "rev-parse", "HEAD").stdout.strip(), x)
    r = repo.jlane("agent-setup", "beta", "--for", "opencode")
    assert r.rc == 0, r.stdout
    assert not marker.exists()


def test_a_gate_admin_dir_naming_a_lanes_path_holds_its_create_only_until_reconcile(
    repo: Repo, tmp_path: Path
) -> None:
    """Red team 14C (finding 3, LOW): a gate admin dir whose `gitdir` named the path of a
    lane not made yet (`<worktrees_root>/<slug>/gamma`) made git list a worktree there,
    and `git lane create gamma` was refused worktree_path_exists for good (its next,
    `git lane create`, another key). git itself refuses that path while the admin dir is
    there: the refusal says it is a gate's, and its next (reconcile, which removes the
    admin dir of a land no longer running, then create) works as written."""
    alpha = repo.create("alpha")
    sha = git(repo.path, "rev-parse", "HEAD").stdout.strip()
    _gate_admin(repo, tmp_path, sha, alpha.parent / "gamma")
    r = repo.jlane("create", "gamma")
    assert r.code == "worktree_path_exists" and r.json["details"]["gate"], r.stdout
    assert r.json["next"] == ["git lane reconcile", "git lane create gamma"], r.stdout
    for step in r.json["next"]:
        done = subprocess.run(step, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    assert (alpha.parent / "gamma" / ".git").is_file()


def test_a_gate_admin_dir_too_deep_to_remove_is_reported_and_moved_aside(
    repo: Repo, tmp_path: Path
) -> None:
    """Red team 14C: a confined gate made a tree deeper than dirfd.TREE_DEPTH in its admin
    dir, which no removal through fds takes: it stayed in `worktrees/` (git listed it at
    whatever its `gitdir` said) and doctor said nothing. Doctor names it (next: reconcile),
    and reconcile moves it whole into git-lane's kept/, out of git's list."""
    admin = _gate_admin(
        repo, tmp_path, git(repo.path, "rev-parse", "HEAD").stdout.strip(), tmp_path / "y"
    )
    fd = os.open(admin, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(260):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    r = repo.jlane("doctor")
    hit = [c for c in r.json["checks"] if c["name"] == "gate worktree"]
    assert hit and hit[0]["status"] == "warn" and hit[0]["fix"] == "git lane reconcile", r.stdout
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    done = [c for c in r.json["changes"] if c["action"] == "gate_worktree_removed"]
    assert done and done[0]["kept"], r.stdout
    assert not admin.exists() and Path(done[0]["kept"]).is_dir()
    assert "git-lane-gate-" not in git(repo.path, "worktree", "list", "--porcelain").stdout
    r = repo.jlane("doctor")
    assert not [c for c in r.json["checks"] if c["name"] == "gate worktree"], r.stdout


def test_the_owners_own_linked_worktree_on_main_is_still_the_hub(
    repo: Repo, tmp_path: Path
) -> None:
    """A linked worktree whose admin dir is no lane's (`git worktree add ../hub main`,
    the owner's checkout elsewhere) is the hub, even when a lane names the same path and
    main in its own admin dir or the main worktree's path; a lane naming the main
    worktree's path and main while it is detached makes no hub of it."""
    alpha = repo.create("alpha")
    git(repo.path, "checkout", "-q", "--detach")
    _names(alpha, "refs/heads/main", repo.path)  # the main worktree's path, detached
    r = repo.jlane("status")
    assert r.rc == 0 and r.json["hub"]["path"] is None, r.stdout
    _names(alpha, "refs/heads/lane/alpha", alpha)  # as it was
    own = tmp_path / "own hub"
    git(repo.path, "worktree", "add", "-q", str(own), "main")
    r = repo.jlane("status")
    assert r.rc == 0 and os.path.realpath(r.json["hub"]["path"]) == os.path.realpath(own)
    _names(alpha, "refs/heads/main", own)  # the same path and branch as the owner's
    r = repo.jlane("status")
    assert r.rc == 0 and os.path.realpath(r.json["hub"]["path"]) == os.path.realpath(own)


def test_a_lane_naming_another_lanes_path_never_hides_its_detached_commits(
    repo: Repo,
) -> None:
    """Lane alpha names lane beta's path and beta's branch in its own admin dir: git then
    lists two worktrees at beta's path, and release beta (unconfirmed) took alpha's word
    that beta was on its branch, so beta's commits on a detached HEAD were discarded
    without a word. One entry per path is kept: the one beta's own admin dir says."""
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    git(beta, "checkout", "-q", "--detach")
    (beta / "w.txt").write_text("w\n")
    git(beta, "add", "w.txt")
    git(beta, "commit", "-q", "-m", "detached work")
    _names(alpha, "refs/heads/lane/beta", beta)
    r = repo.jlane("release", "beta")
    assert r.rc == 1 and r.code == "unlanded_work", r.stdout
    assert beta.is_dir() and (beta / "w.txt").exists()


def test_a_corrupt_record_is_never_rebuilt_at_a_path_another_lane_named(
    repo: Repo, tmp_path: Path
) -> None:
    """reconcile rebuilds an unreadable record from the worktree git lists on the lane's
    branch: lane alpha naming lane/beta in its admin HEAD and a directory of its own
    choosing in its `gitdir` (beta's worktree moved away meanwhile) would have beta's
    record name that directory, which repair then checks beta out into and release
    removes. Only a worktree whose `.git` and admin dir name each other, and whose admin
    dir is no other lane's, is taken."""
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    x = tmp_path / "x"
    x.mkdir()
    (x / "mine.txt").write_text("not a lane's\n")
    shutil.rmtree(beta)  # moved away by hand
    _names(alpha, "refs/heads/lane/beta", x)
    admin = Path(git(alpha, "rev-parse", "--absolute-git-dir").stdout.strip())
    (x / ".git").write_text(f"gitdir: {admin}\n")  # the two name each other
    (repo.common_dir / "git-lane" / "lanes" / "beta.json").write_text("{not json")
    r = repo.jlane("reconcile")
    acts = {c["action"]: c for c in r.json["changes"] if c.get("lane") == "beta"}
    assert acts["record_rebuilt"]["path"] != str(x), r.stdout
    assert (x / "mine.txt").exists()


def test_repair_never_moves_a_record_to_a_path_another_lane_named(
    repo: Repo, tmp_path: Path
) -> None:
    """repair moves a record that names a taken path (here the hub) to the worktree git
    lists on the lane's branch: lane alpha naming lane/beta and a directory of its choosing
    in its own admin dir (the directory's `.git` naming alpha's admin dir back) is never
    taken for beta's checkout; beta goes back where create puts it."""
    alpha = repo.create("alpha")
    beta = repo.create("beta")
    x = tmp_path / "x"
    x.mkdir()
    (x / "mine.txt").write_text("not a lane's\n")
    shutil.rmtree(beta)
    _names(alpha, "refs/heads/lane/beta", x)
    admin = Path(git(alpha, "rev-parse", "--absolute-git-dir").stdout.strip())
    (x / ".git").write_text(f"gitdir: {admin}\n")
    _plant_path(repo, "beta", repo.path)
    r = repo.jlane("repair", "beta")
    assert r.rc == 0, r.stdout
    rec = json.loads((repo.state_dir / "lanes" / "beta.json").read_text())
    assert rec["path"] == str(beta) and rec["admin"] != admin.name, rec
    assert (x / "mine.txt").exists() and (x / ".git").read_text() == f"gitdir: {admin}\n"


def test_an_owner_worktree_named_like_a_gate_keeps_its_admin_dir(
    repo: Repo, tmp_path: Path
) -> None:
    """The owner's own `git worktree add ../git-lane-gate-notes -b notes` (git names its
    admin dir `git-lane-gate-notes`): reconcile's sweep took it for a killed land's gate
    leftover by its name and deleted the admin dir, so the worktree was no repository and
    a commit made detached there was unreferenced (red team 14D). A worktree out of the
    temp dir whose `.git` and the admin dir name each other is never swept, nor named by
    doctor as a gate's leftover (gate.leftovers)."""
    wt = tmp_path / "git-lane-gate-notes"
    git(repo.path, "worktree", "add", "-q", "-b", "notes", str(wt))
    git(wt, "switch", "-q", "--detach")
    detached = repo.commit(wt, "n.txt", "notes\n")
    d = repo.jlane("doctor")
    assert not [c for c in d.json["checks"] if c["name"] == "gate worktree"], (
        "doctor took the owner's worktree for a gate's leftover, and named reconcile, "
        f"which leaves it: a warning no next ends\n{d.stdout}"
    )
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stdout
    admin = repo.common_dir / "worktrees" / "git-lane-gate-notes"
    st = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD"], text=True, capture_output=True)
    assert admin.is_dir() and st.stdout.strip() == detached, (
        f"the owner's worktree lost its admin dir: {st.stderr.strip()}\n{r.stdout}"
    )


def test_an_owner_worktree_named_like_a_gate_in_the_temp_dir_is_never_swept(
    repo: Repo,
) -> None:
    """The 14D fix spares an owner's worktree named `git-lane-gate-*` only out of the temp
    dir: the owner's `git worktree add $TMPDIR/git-lane-gate-notes` (a scratch worktree,
    where such things go) is taken for a killed land's gate by the sweep every land and
    reconcile runs: its files, its index and its admin dir are deleted, and a commit made
    on its detached HEAD is referenced by nothing (red team 14E). The sweep takes only the
    gate worktrees land recorded in git-lane's state before making them."""
    import tempfile

    wt = Path(tempfile.gettempdir()) / f"git-lane-gate-notes-{os.getpid()}"
    git(repo.path, "worktree", "add", "-q", "-b", "notes", str(wt))
    try:
        git(wt, "switch", "-q", "--detach")
        detached = repo.commit(wt, "n.txt", "notes\n")
        (wt / "draft.txt").write_text("uncommitted\n")
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stdout
        admin = repo.common_dir / "worktrees" / wt.name
        assert (wt / "draft.txt").exists(), "the sweep deleted the owner's worktree files"
        st = subprocess.run(
            ["git", "-C", str(wt), "rev-parse", "HEAD"], text=True, capture_output=True
        )
        assert admin.is_dir() and st.stdout.strip() == detached, r.stdout
        d = repo.jlane("doctor")  # its HEAD is held by nothing else: surely the owner's
        assert not [c for c in d.json["checks"] if c["name"] == "gate worktree"], d.stdout
    finally:
        shutil.rmtree(wt, ignore_errors=True)


def test_an_unrecorded_gate_worktree_is_never_swept_and_doctor_names_its_removal(
    repo: Repo, tmp_path: Path
) -> None:
    """A gate worktree an older git-lane (which kept no records) left in the temp dir, and
    one whose directory is gone: land and reconcile never remove what git-lane has no
    record of; doctor names each, with a next that removes it, which works as written."""
    import tempfile

    left = Path(tempfile.mkdtemp(prefix="git-lane-gate-"))
    gone = Path(tempfile.mkdtemp(prefix="git-lane-gate-"))
    for d in (left, gone):
        d.rmdir()
        git(repo.path, "worktree", "add", "-q", "--detach", str(d), "HEAD")
    shutil.rmtree(gone)
    try:
        r = repo.jlane("reconcile")
        assert r.rc == 0, r.stdout
        for d in (left, gone):
            assert (repo.common_dir / "worktrees" / d.name).is_dir(), r.stdout
        assert (left / ".git").is_file()
        doc = repo.jlane("doctor")
        hits = [c for c in doc.json["checks"] if c["name"] == "gate worktree"]
        assert sorted(c["fix"] for c in hits) == sorted(
            f"git worktree remove --force {d}" for d in (left, gone)
        ), doc.stdout
        for c in hits:
            assert c["status"] == "warn"
            done = subprocess.run(
                c["fix"], shell=True, cwd=repo.path, capture_output=True, text=True
            )
            assert done.returncode == 0, (c["fix"], done.stderr)
        assert not os.path.lexists(left)
        assert "git-lane-gate-" not in git(repo.path, "worktree", "list", "--porcelain").stdout
        doc = repo.jlane("doctor")
        assert not [c for c in doc.json["checks"] if c["name"] == "gate worktree"], doc.stdout
    finally:
        shutil.rmtree(left, ignore_errors=True)


def test_a_land_records_its_gate_worktree_before_making_it(repo: Repo, tmp_path: Path) -> None:
    """The record of a clean gate worktree is in git-lane's state before `git worktree
    add` runs (a land killed between leaves nothing unrecorded), and gone after the gate."""
    repo.config("gate_worktree", "clean")
    seen = tmp_path / "seen"
    repo.config(
        "gate_command",
        json.dumps(f"ls {shlex.quote(str(repo.common_dir / 'git-lane' / 'gates'))} > {seen}"),
    )
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    r = repo.jlane("land", "alpha")
    assert r.code == "landed", r.stdout
    names = seen.read_text().split()
    assert len(names) == 1 and names[0].startswith("git-lane-gate-"), names
    assert not os.listdir(repo.common_dir / "git-lane" / "gates")


def test_repair_pointers_next_never_writes_through_a_link_the_lane_put_at_dot_git(
    repo: Repo, tmp_path: Path
) -> None:
    """The lane's `.git` is a directory: repair refuses lane_pointers_tampered. Its next
    was `mv -n -T ... .git.moved-aside && printf ... > LANE/.git`: a process of the lane
    took the backup name (GNU `mv -n` then moves nothing, exit 0) and put a link at `.git`
    to a file of the owner's, and the owner's redirect wrote through it (red team 14H-B
    F4). The next is now repair's own `--move-aside`, which writes no path the lane can
    re-point: the owner's file is as it was, the link replaced by the pointer."""
    from guard.errors import join_next

    lp = repo.create("alpha")
    (lp / ".git").unlink()
    (lp / ".git").mkdir()  # a repository of its own at the lane's root (a bare start)
    (lp / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    r = repo.jlane("repair", "alpha")
    assert (r.rc, r.code) == (1, "lane_pointers_tampered"), r.stdout
    victim = tmp_path / "owner-file.txt"  # the owner's, outside every lane
    victim.write_text("the owner's own\n")
    # the lane, after the refusal was printed and before the owner runs it
    (lp / ".git.moved-aside").mkdir()
    shutil.rmtree(lp / ".git")
    (lp / ".git").symlink_to(victim)
    subprocess.run(join_next(r.json["next"]), shell=True, cwd=repo.path, capture_output=True)
    assert victim.read_text() == "the owner's own\n", (
        f"the next of lane_pointers_tampered, run as written, overwrote {victim} (outside "
        f"the lane) through a link the lane put at .git: {victim.read_text()!r}"
    )
    assert not (lp / ".git").is_symlink() and (lp / ".git").read_text().startswith("gitdir: ")
