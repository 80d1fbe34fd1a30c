"""Roles and records that cannot be forged, and every state file and repository path
handled without an internal error (exit 3): a worker is refused every owner command with
a `next` the owner can run as written; the owner is who the engine recorded, never an
environment variable; a corrupt or misplaced state file is a refusal or a repair; release
keeps ignored files and per-worktree refs unless confirmed, and never acts on what it did
not inspect; a repository whose path holds a newline, a quote and a leading dash works."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import LaneRun, Repo, git
from enginehelp import (
    epoch,
    is_ancestor,
    events,
    landing_file,
    owner_file,
    racing_git,
    rebase_dir,
    spawn_lane,
    status_porcelain,
    wait_for,
)

CONFIRM = ("--confirm", "yes-discard-lane")
WORKERS = [{"GITLANE_ROLE": "worker"}, {"GITLANE_LANE": "alpha"}]
WORKER_IDS = ["role", "bound"]


def ok_or_refused(r: LaneRun, *cmd: str) -> None:
    """Exit 0 or 1, never an internal error, and no traceback on stderr."""
    assert r.rc in (0, 1), (cmd, r.rc, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, (cmd, r.stderr)
    if r.stdout:
        assert r.json["code"] != "internal_error", (cmd, r.stdout)


def sh(
    command: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one `next` entry exactly as written, in a shell."""
    full = {k: v for k, v in os.environ.items() if k not in ("GITLANE_LANE", "GITLANE_ROLE")}
    full.update(env or {})
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, text=True, capture_output=True, env=full, timeout=120
    )


def hooks_dir_state(repo: Repo) -> dict[str, bytes]:
    d = repo.common_dir / "hooks"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def refs(repo: Repo, cwd: Path | None = None) -> str:
    return git(cwd or repo.path, "for-each-ref", "--format=%(refname) %(objectname)").stdout


# -- 4. roles --------------------------------------------------------------------------------
@pytest.mark.parametrize("env", WORKERS, ids=WORKER_IDS)
def test_a_worker_is_refused_every_owner_command(
    repo: Repo, env: dict[str, str], gitlane_on_path: Path
) -> None:
    assert repo.lane("install").rc == 0
    repo.create("alpha")
    repo.create("beta")
    repo.config("max_lanes", "7")
    hooks, before, config = (
        hooks_dir_state(repo),
        refs(repo),
        (repo.state_dir / "config.toml").read_bytes(),
    )
    commands = [
        ("uninstall",),
        ("install",),
        ("install", "--force"),
        ("config", "set", "max_lanes", "9"),
        ("config", "unset", "max_lanes"),
        ("release", "alpha"),
        ("release", "beta", *CONFIRM),
        ("reconcile",),
    ]
    nexts = []
    for cmd in commands:
        r = repo.jlane(*cmd, env=env)
        assert (r.rc, r.code) == (1, "role_forbidden"), (cmd, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        nxt = r.json["next"]
        assert len(nxt) == 1, nxt
        # the owner's own command, not a request to someone: it runs as written
        assert shlex.split(nxt[0], comments=True)[:2] == ["git", "lane"], nxt
        nexts.append(nxt[0])
    assert hooks_dir_state(repo) == hooks and refs(repo) == before
    assert (repo.state_dir / "config.toml").read_bytes() == config
    # the repository owner (outside the lane) runs each `next` exactly as printed
    for cmd in nexts:
        res = sh(cmd, repo.path)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert repo.sha("refs/heads/lane/alpha") is None and repo.sha("refs/heads/lane/beta") is None


def test_the_install_script_refuses_a_worker_too(repo: Repo) -> None:
    script = Path(__file__).resolve().parent.parent / "install" / "install-hooks"
    env = {**os.environ, "GITLANE_PYTHON": sys.executable, "GITLANE_ROLE": "worker"}
    r = subprocess.run(
        ["sh", str(script), "--json"], cwd=repo.path, text=True, capture_output=True, env=env
    )
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["code"] == "role_forbidden"
    assert not (repo.common_dir / "hooks" / "reference-transaction").exists()


def test_the_owner_pid_variable_makes_no_owner(repo: Repo) -> None:
    repo.config("gate", "off")
    owner = subprocess.Popen(["sleep", "60"])
    try:
        r = repo.jlane("create", "alpha", "--owner-pid", str(owner.pid))
        assert r.rc == 0, r.stderr
        path = Path(r.json["lane"]["path"])
        tip = repo.commit(path, "a.txt", "a\n")
        main = repo.sha()
        forged = {"GITLANE_OWNER_PID": str(owner.pid)}
        for cmd in (("land", "alpha"), ("release", "alpha", *CONFIRM)):
            r = repo.jlane(*cmd, env=forged)
            assert (r.rc, r.code) == (1, "lane_owner_conflict"), (cmd, r.stdout)
        assert repo.sha() == main and repo.sha("refs/heads/lane/alpha") == tip
        # nor does the variable record an owner at create
        r = repo.jlane("create", "beta", env=forged)
        assert r.rc == 0 and r.json["lane"]["owner_pid"] is None
    finally:
        owner.kill()
        owner.wait()


# -- 5. lane records ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    ["", 5, None, ["x"], "relative/lane", "/nul\u0000path"],
    ids=["empty", "int", "null", "list", "relative", "nul"],
)
def test_a_lane_record_with_a_bad_path_is_corrupt(repo: Repo, bad: Any) -> None:
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    recp = repo.state_dir / "lanes" / "alpha.json"
    rec = json.loads(recp.read_text())
    rec["path"] = bad
    recp.write_text(json.dumps(rec))
    main = repo.sha()
    for cmd in (("status",), ("log",), ("create", "beta")):
        r = repo.jlane(*cmd)
        assert r.rc == 0, (cmd, r.stdout, r.stderr)
    for cmd in (
        ("status", "alpha"),
        ("land", "alpha"),
        ("release", "alpha", *CONFIRM),
        ("create", "alpha"),
    ):
        r = repo.jlane(*cmd)
        ok_or_refused(r, *cmd)
        assert (r.rc, r.code) == (1, "state_corrupt"), (cmd, r.stdout)
        assert r.json["next"][0] == "git lane reconcile"
    assert repo.sha() == main and repo.sha("refs/heads/lane/alpha") == tip and lp.is_dir()
    # reconcile sets the record aside (kept) and adopts the lane's worktree again
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    assert list((repo.state_dir / "lanes").glob("alpha.json.corrupt-*"))
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), r.stdout
    assert repo.sha() == tip


# -- 5. landing.json ------------------------------------------------------------------------
def crash_land(repo: Repo, key: str, point: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "guard", "land", key, "--json"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "GITLANE_TEST_CRASH_AT": point},
        timeout=60,
    )
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)


CORRUPTIONS: dict[str, Any] = {
    "wrong_types": lambda d: {**d, "pid": "x", "paths": "all", "epoch_after": "1"},
    "missing_keys": lambda d: {"token": d["token"], "stage": d["stage"]},
    "unknown_stage": lambda d: {**d, "stage": "half-way"},
    "not_an_object": lambda d: [d],
    "option_as_sha": lambda d: {**d, "main_before": "--all", "tip": "-p"},
}


def corrupt_landing(repo: Repo, how: str) -> bytes:
    d = json.loads(landing_file(repo).read_text())
    data = json.dumps(CORRUPTIONS[how](d)).encode()
    landing_file(repo).write_bytes(data)
    return data


def kept_aside(repo: Repo, data: bytes) -> bool:
    return any(p.read_bytes() == data for p in repo.state_dir.glob("landing.json.corrupt-*"))


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
@pytest.mark.parametrize("via", ["reconcile", "land"])
def test_a_bad_landing_record_before_main_moved_is_set_aside(
    repo: Repo, how: str, via: str
) -> None:
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    main = repo.sha()
    crash_land(repo, "alpha", "prepared")
    data = corrupt_landing(repo, how)
    r = repo.jlane("status")
    assert r.rc == 0 and r.json["landing"] is True
    r = repo.jlane(via, *(["alpha"] if via == "land" else []))
    assert r.rc == 0, (r.stdout, r.stderr)
    assert not landing_file(repo).exists() and kept_aside(repo, data)
    if via == "reconcile":
        assert repo.sha() == main
        assert any(c["action"] == "landing_set_aside" for c in r.json["changes"])
        assert repo.jlane("land", "alpha").code == "landed"
    assert repo.sha() == tip and epoch(repo) == 1


@pytest.mark.parametrize("how", ["wrong_types", "missing_keys", "unknown_stage"])
def test_a_bad_landing_record_after_main_moved_is_finished(repo: Repo, how: str) -> None:
    """main moved for the dead land: discarding its record would leave the hub unmoved
    (its files one land behind) and the epoch unbumped; the move is read back from main's
    reflog and the land finished."""
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    crash_land(repo, "alpha", "main_moved")
    assert repo.sha() == tip
    data = corrupt_landing(repo, how)
    r = repo.jlane("reconcile")
    assert r.rc == 0, (r.stdout, r.stderr)
    assert any(c["action"] == "landing_completed" for c in r.json["changes"]), r.json
    assert not landing_file(repo).exists() and kept_aside(repo, data)
    assert status_porcelain(repo.path) == "" and (repo.path / "a.txt").read_text() == "a\n"
    assert epoch(repo) == 1
    assert [e["main_after"] for e in events(repo, "land")] == [tip]


def test_a_bad_landing_record_with_nothing_to_tell_is_refused(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """No usable record and no reflog of main: whether main moved for the dead land cannot
    be established, so reconcile (and land) refuse, the record is kept, and `next` is a
    way out that runs as written."""
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    crash_land(repo, "alpha", "main_moved")
    data = corrupt_landing(repo, "missing_keys")
    (repo.common_dir / "logs" / "refs" / "heads" / "main").unlink()
    for cmd in (("reconcile",), ("land", "alpha")):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "reconcile_ambiguous"), (cmd, r.stdout, r.stderr)
        assert landing_file(repo).read_bytes() == data and repo.sha() == tip
    for cmd in r.json["next"]:
        res = sh(cmd, repo.path)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    assert not landing_file(repo).exists() and kept_aside(repo, data)
    assert repo.jlane("status").json["landing"] is False


# -- 5. the lock owner record ----------------------------------------------------------------
def test_a_lock_owner_record_with_non_utf8_bytes(repo: Repo) -> None:
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    owner_file(repo).parent.mkdir(parents=True, exist_ok=True)
    owner_file(repo).write_bytes(
        b"pid=99999\xff\nstart=\xfe\nhost=\xc3\x28\nlane=al\xffpha\ntoken=\x80\n"
    )
    for cmd in (("status",), ("status", "alpha"), ("log",)):
        r = repo.jlane(*cmd)
        assert r.rc == 0, (cmd, r.stdout, r.stderr)
    # not written by a land (nor passable for another host's): no live owner, taken over
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), (r.stdout, r.stderr)
    assert repo.sha() == tip and not owner_file(repo).exists()
    owner_file(repo).write_bytes(b"pid=1\xff\nhost=\xc3\x28\n")
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    assert not owner_file(repo).exists() and repo.jlane("status").json["lock"] is None


# -- 5. a directory where a state file should be ------------------------------------------------
STATE_PATHS = [
    "lanes/alpha.json",
    "epoch.json",
    "landing.json",
    "events.jsonl",
    "locks/integration.owner",
    "locks/integration.flock",
    "locks/registry.flock",
    "config.toml",
]


@pytest.mark.parametrize("rel", STATE_PATHS)
def test_a_directory_where_a_state_file_should_be(repo: Repo, rel: str) -> None:
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    # the state file's parents exist, as after any land
    assert repo.jlane("status").rc == 0
    (repo.state_dir / "locks").mkdir(parents=True, exist_ok=True)
    target = repo.state_dir / rel
    if target.exists():
        target.unlink()
    (target / "inside").mkdir(parents=True)
    (target / "inside" / "keep.txt").write_text("someone's\n")
    for cmd in (
        ("status",),
        ("status", "alpha"),
        ("log",),
        ("create", "beta"),
        ("release", "beta"),
        ("land", "alpha"),
        ("reconcile",),
    ):
        r = repo.jlane(*cmd)
        ok_or_refused(r, *cmd)
        if r.rc == 1 and cmd != ("land", "alpha"):
            assert r.json["next"], (cmd, r.stdout)
        if rel == "lanes/alpha.json" and cmd in (("status", "alpha"), ("land", "alpha")):
            assert (r.rc, r.code) == (1, "state_corrupt"), (cmd, r.stdout)  # not "unknown_lane"
    if rel == "config.toml":  # the owner's settings went with it: gate off again
        repo.config("gate", "off")
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) in ((0, "landed"), (1, "nothing_to_land")), (r.stdout, r.stderr)
    assert repo.sha() == tip
    # nothing that was in the directory is lost: it was set aside under the state dir
    kept = [p for p in repo.state_dir.rglob("keep.txt") if p.read_text() == "someone's\n"]
    assert kept, sorted(str(p) for p in repo.state_dir.rglob("*"))
    assert repo.jlane("status").rc == 0


@pytest.mark.parametrize("rel", ["lanes", "locks", "."])
def test_a_file_where_a_state_directory_should_be(
    repo: Repo, rel: str, gitlane_on_path: Path
) -> None:
    repo.config("gate", "off")
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    target = (repo.state_dir / rel).resolve()
    data = b"someone's file\n"
    if target.exists():  # "." is the whole state directory, the owner's config with it
        shutil.rmtree(target)
    target.write_bytes(data)
    for cmd in (("status",), ("create", "beta"), ("land", "alpha"), ("release", "alpha")):
        r = repo.jlane(*cmd)
        ok_or_refused(r, *cmd)
        assert r.rc == 1 and r.code == "state_corrupt", (cmd, r.stdout)
        # the lane records unreadable, the cwd may be in a lane: pinned to the repository
        pinned = f"git -C {shlex.quote(os.path.realpath(repo.path))} lane reconcile"
        assert r.json["next"] in (["git lane reconcile"], [pinned]), r.stdout
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "state_corrupt"), r.stdout
    assert repo.sha() != tip
    # the refusal's next, run as written, repairs it and keeps the file
    done = sh(r.json["next"][0], cwd=repo.path)
    assert done.returncode == 0, done.stderr
    kept = [p for p in target.parent.glob(target.name + ".corrupt-*") if p.read_bytes() == data]
    assert kept, sorted(str(p) for p in target.parent.iterdir())
    assert repo.jlane("status").rc == 0
    if rel == ".":
        repo.git("worktree", "remove", "--force", str(lp))  # its record went aside too
        return
    repo.config("gate", "off")
    assert repo.jlane("land", "alpha").code == "landed"
    assert repo.sha() == tip


# -- 5. events of the wrong types ----------------------------------------------------------------
def test_events_of_the_wrong_types(repo: Repo) -> None:
    repo.create("alpha")
    bad = [
        {"ts": "yesterday", "kind": 5, "lane": ["alpha"], "code": {"x": 1}, "time": 7},
        {"ts": None, "kind": None, "lane": {"k": "alpha"}, "code": None},
        {"ts": True, "kind": ["land"], "lane": 3, "code": 4.5, "time": ["t"]},
        {"ts": 1e400, "kind": "land", "lane": "alpha", "code": "landed"},
        {"ts": "NaN", "lane": None},
    ]
    with open(repo.state_dir / "events.jsonl", "a") as f:
        for e in bad:
            f.write(json.dumps(e) + "\n")
        f.write('[1, 2]\n"text"\n{"ts": 1e999}\nnot json\n')
    for args in (
        (),
        ("--lane", "alpha"),
        ("--since", "1h"),
        ("--since", "2020-01-01T00:00"),
        ("-n", "3"),
    ):
        for js in (True, False):
            r = repo.jlane("log", *args) if js else repo.lane("log", *args)
            assert r.rc == 0, (args, js, r.stdout, r.stderr)
            assert "Traceback" not in r.stderr
            if js:
                for e in r.json["events"]:
                    assert isinstance(e.get("kind"), str) and isinstance(e.get("ts"), float)
                    assert e.get("lane") is None or isinstance(e["lane"], str)
    only = repo.jlane("log", "--lane", "alpha").json["events"]
    assert only and all(e["lane"] == "alpha" for e in only)


# -- 5. a gate command too long to exec -------------------------------------------------------------
def test_a_gate_command_too_long_to_exec(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    main = repo.sha()
    r = repo.jlane("config", "set", "gate_command", "x" * 70_000)
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout
    cfg = repo.state_dir / "config.toml"
    cfg.write_text('gate_command = "' + "x" * 3_000_000 + '"\n')
    r = repo.jlane("land", "alpha")
    ok_or_refused(r, "land")
    assert (r.rc, r.code) in ((1, "invalid_config"), (1, "gate_failed")), r.stdout
    assert repo.sha() == main and not owner_file(repo).exists()
    cfg.write_text('gate_command = "true"\n')
    assert repo.jlane("land", "alpha").code == "landed"


def test_an_environment_too_big_for_the_gate_is_a_failed_gate(repo: Repo) -> None:
    """E2BIG at the gate's exec (the environment plus the command past ARG_MAX, which is a
    quarter of the stack limit) is the gate failing, not a crash, and main stays."""
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    main = repo.sha()
    repo.config("gate_command", "true " + "y" * 60_000)
    big = "x" * 100_000
    cmd = f"ulimit -s 1024 && exec {shlex.quote(sys.executable)} -m guard land alpha --json"
    r = subprocess.run(
        ["sh", "-c", cmd],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "BIG1": big, "BIG2": big},
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    obj = json.loads(r.stdout)
    assert obj["code"] == "gate_failed", r.stdout[:500]
    assert "could not be started" in r.stderr and len(r.stderr) < 2_000
    assert repo.sha() == main and not owner_file(repo).exists()
    repo.config("gate_command", "true")
    assert repo.jlane("land", "alpha").code == "landed"


# -- 5. release keeps what git would not ------------------------------------------------------------
def test_release_keeps_ignored_files_unless_confirmed(repo: Repo) -> None:
    repo.commit(repo.path, ".gitignore", ".env\nbuild/\n")
    lp = repo.create("alpha")
    (lp / ".env").write_text("SECRET=1\n")
    (lp / "build").mkdir()
    (lp / "build" / "out.o").write_text("obj\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert sorted(r.json["details"]["ignored_paths"]) == [".env", "build/out.o"]
    assert (lp / ".env").read_text() == "SECRET=1\n" and repo.sha(
        "refs/heads/lane/alpha"
    ) is not None
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert sorted(r.json["discarded_ignored"]) == [".env", "build/out.o"]
    assert not lp.exists()


def test_release_keeps_commits_only_under_per_worktree_refs(repo: Repo) -> None:
    lp = repo.create("alpha")
    kept = repo.commit(lp, "k.txt", "kept\n")
    git(lp, "update-ref", "refs/worktree/keep", kept)
    git(lp, "reset", "-q", "--hard", "HEAD~1")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert r.json["details"]["worktree_refs"] == [
        {"ref": "refs/worktree/keep", "sha": kept, "commits": 1}
    ]
    assert git(lp, "rev-parse", "refs/worktree/keep").stdout.strip() == kept
    r = repo.jlane("release", "alpha", *CONFIRM)
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert [w["ref"] for w in r.json["discarded_worktree_refs"]] == ["refs/worktree/keep"]
    # the object is still there to recover with the printed command
    assert git(repo.path, "cat-file", "-t", kept).stdout.strip() == "commit"


# -- 5. races with release ---------------------------------------------------------------------------
def test_release_racing_a_branch_move_deletes_nothing(repo: Repo, tmp_path: Path) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")  # landed: release needs no confirmation
    # from the hub: release removes the lane's worktree through fds before its first git
    # call that deletes anything (the branch's), so the lane's path is gone by then
    q = shlex.quote(str(repo.path))
    race = (
        f"new=$(git -C {q} commit-tree -p lane/alpha -m raced 'lane/alpha^{{tree}}') && "
        f"git -C {q} update-ref refs/heads/lane/alpha $new && echo $new > {shlex.quote(str(tmp_path / 'new'))}"
    )
    r = repo.jlane("release", "alpha", env=racing_git(tmp_path, race))
    ok_or_refused(r, "release")
    new = (tmp_path / "new").read_text().strip()
    # the commit made while release ran is on the lane's branch, and the lane is intact
    # (its worktree put back)
    assert (r.rc, r.code) == (1, "lane_changed_during_release"), r.stdout
    assert r.json["details"]["worktree_restored"] is True
    assert repo.sha("refs/heads/lane/alpha") == new and (lp / "a.txt").is_file()
    assert repo.jlane("status", "alpha").json["lanes"][0]["state"] == "active"


def test_release_racing_a_commit_loses_nothing(repo: Repo, tmp_path: Path) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    repo.git("merge", "-q", "--ff-only", "lane/alpha")
    q = shlex.quote(str(lp))
    out = shlex.quote(str(tmp_path / "commit-rc"))
    race = f"git -C {q} commit -q --allow-empty -m raced >/dev/null 2>&1; echo $? > {out}"
    r = repo.jlane("release", "alpha", env=racing_git(tmp_path, race))
    ok_or_refused(r, "release")
    committed = (tmp_path / "commit-rc").read_text().strip() == "0"
    if committed:  # then it must still be on a branch
        assert r.rc == 1
        assert git(repo.path, "log", "--format=%s", "refs/heads/lane/alpha").stdout.startswith(
            "raced"
        )
    else:  # the lane was frozen while release looked at it, and release went on
        assert (r.rc, r.code) == (0, "released"), r.stdout
    assert "raced" not in git(repo.path, "log", "--all", "--format=%s").stdout or committed


def test_two_releases_of_one_lane(repo: Repo, tmp_path: Path) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    other = tmp_path / "other.json"
    race = (
        f"{shlex.quote(sys.executable)} -m guard release alpha --confirm yes-discard-lane --json "
        f"> {shlex.quote(str(other))} 2>&1 & pid=$!; "
        "i=0; while [ $i -lt 30 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i+1)); done"
    )
    env = racing_git(tmp_path, race)
    r = repo.jlane("release", "alpha", *CONFIRM, env=env)
    ok_or_refused(r, "release")
    wait_for(
        lambda: other.exists() and other.read_text().strip().endswith("}"), what="the other release"
    )
    second = json.loads(other.read_text().strip().splitlines()[-1])
    assert sorted([r.code, second["code"]]) == ["already_released", "released"], (r.stdout, second)
    assert repo.sha("refs/heads/lane/alpha") is None and not lp.exists()


def test_sync_racing_a_release_loses_nothing(repo: Repo, tmp_path: Path) -> None:
    """A sync of the lane started while release is removing it: either the sync is refused
    (the lane is frozen) and the release goes on, or release sees the lane change and keeps
    it. Never a crash, never a half-rebased lane deleted."""
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    repo.commit(repo.path, "m.txt", "m\n")  # main moves: alpha is stale, sync has work
    other = tmp_path / "sync.json"
    race = (
        f"{shlex.quote(sys.executable)} -m guard sync alpha --json "
        f"> {shlex.quote(str(other))} 2>{shlex.quote(str(tmp_path / 'sync.err'))}"
    )
    r = repo.jlane("release", "alpha", *CONFIRM, env=racing_git(tmp_path, race))
    ok_or_refused(r, "release")
    assert (tmp_path / "raced").is_dir(), "the race never ran"
    synced = json.loads(other.read_text())
    assert "Traceback" not in (tmp_path / "sync.err").read_text()
    assert synced["code"] != "internal_error", synced
    if r.rc == 0:  # the release won: the sync must have been refused, not half-done
        assert synced["ok"] is False, synced
        assert r.code == "released" and not lp.exists()
    else:  # the lane stays, whole: on its old tip or cleanly rebased
        assert lp.is_dir() and (lp / "a.txt").is_file()
        head = repo.sha("refs/heads/lane/alpha")
        assert head == tip or is_ancestor(repo.path, "main", str(head))
        assert not rebase_dir(lp)
    # the work is still reachable from somewhere git keeps it, or release was confirmed
    assert r.rc == 0 or repo.sha("refs/heads/lane/alpha") is not None


def test_release_while_the_lane_lands_is_refused(repo: Repo) -> None:
    lp = repo.create("alpha")
    tip = repo.commit(lp, "a.txt", "a\n")
    flag = lp.parent / "gate-started"
    repo.config("gate_command", f"touch {shlex.quote(str(flag))}; sleep 3")
    land = spawn_lane("land", "alpha", "--json", cwd=repo.path)
    try:
        wait_for(flag.exists, what="the gate to start")
        r = repo.jlane("release", "alpha", *CONFIRM)
        ok_or_refused(r, "release")
        assert (r.rc, r.code) == (1, "lock_busy"), r.stdout
        out, err = land.communicate(timeout=60)
    finally:
        if land.poll() is None:
            land.kill()
            land.wait()
    assert land.returncode == 0 and json.loads(out)["code"] == "landed", (out, err)
    assert repo.sha() == tip
    assert repo.jlane("release", "alpha").code == "released"


# -- 5. a repository path with a newline, a quote and a leading dash ------------------------------
def test_a_repository_at_a_path_with_a_newline_quote_and_dash(
    tmp_path: Path, gitlane_on_path: Path
) -> None:
    decoy = Repo(tmp_path / "-re'po")  # what splitting rev-parse's output on lines would find
    decoy.path.mkdir()
    git(decoy.path, "init", "-q", "-b", "main")
    git(decoy.path, "commit", "-q", "--allow-empty", "-m", "decoy")
    decoy_refs = refs(decoy)

    path = tmp_path / "-re'po\nx"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "h.txt").write_text("base\n")
    git(path, "add", "h.txt")
    git(path, "commit", "-q", "-m", "init")
    repo = Repo(path)
    assert repo.lane("config", "set", "gate", "off").rc == 0
    assert (repo.common_dir / "git-lane" / "config.toml").is_file()

    la = repo.create("alpha")
    tip = repo.commit(la, "a.txt", "a\n")
    r = repo.jlane("land", "alpha")
    assert (r.rc, r.code) == (0, "landed"), (r.stdout, r.stderr)
    assert repo.sha() == tip
    st = repo.jlane("status")
    assert st.rc == 0 and st.json["hub"]["path"] == str(path) and st.json["main"]["sha"] == tip

    def follow(r: LaneRun, code: str) -> None:
        assert (r.rc, r.code) == (1, code), (r.stdout, r.stderr)
        for cmd in r.json["next"]:
            res = sh(cmd, path)
            assert res.returncode == 0, (code, cmd, res.stdout, res.stderr)

    # stale_lane: sync, then land
    lb = repo.create("beta")
    repo.commit(lb, "b.txt", "b\n")
    lc = repo.create("gamma")
    c_tip = repo.commit(lc, "c.txt", "c\n")
    assert repo.jlane("land", "gamma").code == "landed"
    follow(repo.jlane("land", "beta"), "stale_lane")
    assert repo.sha("refs/heads/lane/beta") == repo.sha() and c_tip != repo.sha()
    # hub_dirty: stash the overlapping path, then land
    ld = repo.create("delta")
    d_tip = repo.commit(ld, "h.txt", "lane\n")
    (path / "h.txt").write_text("hub edit\n")
    follow(repo.jlane("land", "delta"), "hub_dirty")
    assert repo.sha() == d_tip
    # unlanded_work: land, then release
    le = repo.create("eps")
    e_tip = repo.commit(le, "e.txt", "e\n")
    follow(repo.jlane("release", "eps"), "unlanded_work")
    assert repo.sha() == e_tip and repo.sha("refs/heads/lane/eps") is None

    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), (r.stdout, r.stderr)
    assert repo.sha("refs/heads/lane/alpha") is None and not la.exists()
    assert refs(decoy) == decoy_refs and not (decoy.path / "git-lane").exists()
    assert not (decoy.path / ".git" / "git-lane").exists()


@pytest.mark.parametrize("role", ["WORKER", " worker", "wrker"])
def test_a_role_that_cannot_be_read_grants_nothing(repo: Repo, role: str) -> None:
    r = repo.jlane("config", "set", "max_lanes", "4", env={"GITLANE_ROLE": role})
    assert (r.rc, r.code) == (1, "role_forbidden"), r.stdout
    assert repo.jlane("config", "set", "max_lanes", "4", env={"GITLANE_ROLE": "owner"}).rc == 0
