"""`git lane status`: epoch, main, hub, lock and every lane's derived fields, each checked
against the git state that should produce it; the human table without escape codes when
not on a terminal or with NO_COLOR."""

from __future__ import annotations

import json
import os
import pty
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo

LANE_FIELDS = {
    "key",
    "branch",
    "path",
    "state",
    "fresh",
    "sync_required",
    "dirty",
    "ahead",
    "behind",
    "rebase_in_progress",
    "owner_alive",
    "advice",
}


def lanes_by_key(
    repo: Repo, *args: str, env: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    r = repo.jlane("status", *args, env=env)
    assert r.rc == 0, r.stderr
    return {ln["key"]: ln for ln in r.json["lanes"]}


def test_top_level_shape(repo: Repo) -> None:
    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    d = r.json
    assert (d["ok"], d["code"]) == (True, "ok")
    assert d["epoch"] == 0
    assert d["main"] == {"branch": "main", "sha": repo.sha()}
    assert d["hub"] == {"path": str(repo.path), "dirty_paths": [], "out_of_step": False}
    assert d["lock"] is None
    assert d["lanes"] == []


def test_epoch_lock_and_hub_dirt(repo: Repo) -> None:
    (repo.path / "README.md").write_text("changed\n")
    (repo.path / "new dir").mkdir()
    (repo.path / "new dir" / "n é.txt").write_text("n\n")
    (repo.path / "ignored.log").write_text("x\n")
    (repo.path / ".git" / "info" / "exclude").write_text("*.log\n")
    repo.git("add", "README.md")
    repo.state_dir.mkdir(parents=True, exist_ok=True)
    (repo.state_dir / "epoch.json").write_text(
        json.dumps({"epoch": 7, "lane": "x", "paths": ["a"]})
    )
    (repo.state_dir / "locks").mkdir(exist_ok=True)
    (repo.state_dir / "locks" / "integration.owner").write_text(
        f"pid={os.getpid()}\nstart=\nhost={socket.gethostname()}\ntoken=t\nlane=alpha\n"
        "main_before=\ntip=\nsince=2026-01-01T00:00:00Z\n"
    )
    d = repo.jlane("status").json
    assert d["epoch"] == 7
    assert sorted(d["hub"]["dirty_paths"]) == ["README.md", "new dir/n é.txt"]
    lock = d["lock"]
    assert (lock["pid"], lock["lane"], lock["since"]) == (
        os.getpid(),
        "alpha",
        "2026-01-01T00:00:00Z",
    )


def test_fresh_lane_then_ahead_then_stale(repo: Repo) -> None:
    lp = repo.create("alpha")
    ln = lanes_by_key(repo)["alpha"]
    assert set(ln) >= LANE_FIELDS
    assert (ln["branch"], ln["path"], ln["state"]) == ("lane/alpha", str(lp), "active")
    assert (ln["fresh"], ln["sync_required"], ln["dirty"], ln["ahead"], ln["behind"]) == (
        True,
        False,
        False,
        0,
        0,
    )
    assert (ln["rebase_in_progress"], ln["owner_alive"]) == (False, False)
    assert isinstance(ln["advice"], str) and ln["advice"]

    repo.commit(lp, "a.txt", "a\n")
    repo.commit(lp, "a2.txt", "a\n")
    ln = lanes_by_key(repo)["alpha"]
    assert (ln["fresh"], ln["ahead"], ln["behind"], ln["sync_required"]) == (True, 2, 0, False)

    repo.commit(repo.path, "m.txt", "m\n")
    ln = lanes_by_key(repo)["alpha"]
    assert (ln["fresh"], ln["ahead"], ln["behind"], ln["sync_required"]) == (False, 2, 1, True)
    # fresh is derived from git, whatever the epoch file claims
    repo.git("rebase", "-q", "main", cwd=lp)
    ln = lanes_by_key(repo)["alpha"]
    assert (ln["fresh"], ln["ahead"], ln["behind"], ln["sync_required"]) == (True, 2, 0, False)


@pytest.mark.parametrize(
    ("policy", "main_file", "required"),
    [
        ("on_land_mandatory", "other.txt", True),
        ("overlap_mandatory", "other.txt", False),
        ("overlap_mandatory", "a.txt", True),
        ("land_time_only", "a.txt", False),
    ],
)
def test_sync_required_follows_policy(
    repo: Repo, policy: str, main_file: str, required: bool
) -> None:
    repo.config("sync_policy", policy)
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "lane\n")
    repo.commit(repo.path, main_file, "main\n")
    ln = lanes_by_key(repo)["alpha"]
    assert (ln["fresh"], ln["behind"], ln["sync_required"]) == (False, 1, required)


@pytest.mark.parametrize("kind", ["untracked", "modified", "staged", "deleted"])
def test_dirty_lane(repo: Repo, kind: str) -> None:
    lp = repo.create("alpha")
    if kind == "untracked":
        (lp / "new.txt").write_text("x\n")
    elif kind == "modified":
        (lp / "README.md").write_text("changed\n")
    elif kind == "staged":
        (lp / "s.txt").write_text("x\n")
        repo.git("add", "s.txt", cwd=lp)
    else:
        (lp / "README.md").unlink()
    ln = lanes_by_key(repo)["alpha"]
    assert ln["dirty"] is True
    assert ln["fresh"] is True and ln["state"] == "active"


def test_rebase_in_progress(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "README.md", "lane side\n")
    repo.commit(repo.path, "README.md", "main side\n")
    res = repo.git("rebase", "main", cwd=lp, check=False)
    assert res.returncode != 0
    ln = lanes_by_key(repo)["alpha"]
    assert ln["rebase_in_progress"] is True and ln["state"] == "active"
    assert ln["dirty"] is True  # the conflicted file
    repo.git("rebase", "--abort", cwd=lp)
    assert lanes_by_key(repo)["alpha"]["rebase_in_progress"] is False


def test_owner_alive(repo: Repo) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert repo.jlane("create", "alpha", "--owner-pid", str(owner.pid)).rc == 0
        assert lanes_by_key(repo)["alpha"]["owner_alive"] is True
    finally:
        owner.kill()
        owner.wait()
    assert lanes_by_key(repo)["alpha"]["owner_alive"] is False


def test_orphaned_and_released_lanes(repo: Repo) -> None:
    a = repo.create("alpha")
    repo.create("beta")
    shutil.rmtree(a)
    assert repo.jlane("release", "beta").rc == 0
    assert "beta" not in lanes_by_key(repo)  # released lanes are listed with --all
    got = lanes_by_key(repo, "--all")
    assert got["alpha"]["state"] == "orphaned"
    assert got["beta"]["state"] == "released"
    assert got["alpha"]["dirty"] is False and got["beta"]["advice"]


def test_status_of_one_lane(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    assert list(lanes_by_key(repo, "beta")) == ["beta"]
    r = repo.jlane("status", "gamma")
    assert (r.rc, r.code) == (1, "unknown_lane")
    r = repo.jlane("status", "../beta")
    assert (r.rc, r.code) == (1, "invalid_lane_key")


# -- the human table ------------------------------------------------------------------------
def _setup_table(repo: Repo) -> None:
    a = repo.create("alpha")
    repo.commit(a, "a.txt", "a\n")
    repo.commit(repo.path, "m.txt", "m\n")  # alpha is now stale: a yellow row on a colour tty
    repo.create("beta")


@pytest.mark.parametrize("no_color", [False, True])
def test_table_without_a_terminal_has_no_escape_codes(repo: Repo, no_color: bool) -> None:
    _setup_table(repo)
    env = {"NO_COLOR": "1"} if no_color else None
    r = repo.lane("status", env=env)
    assert r.rc == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x1b" not in r.stderr
    rows = r.stdout.splitlines()
    assert any(row.split()[:1] == ["alpha"] for row in rows)
    assert any(row.split()[:1] == ["beta"] for row in rows)
    assert not r.stdout.lstrip().startswith("{")


def _on_tty(repo: Repo, env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "guard", "status"],
            cwd=repo.path,
            stdout=slave,
            stderr=subprocess.PIPE,
            env={**os.environ, "TERM": "xterm", **env},
            timeout=60,
        )
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.returncode == 0, proc.stderr
        return b"".join(chunks).decode()
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def test_table_on_a_terminal_is_coloured_unless_no_color(repo: Repo) -> None:
    _setup_table(repo)
    assert "\x1b[" in _on_tty(repo, {})  # the NO_COLOR test above would be vacuous otherwise
    assert "\x1b" not in _on_tty(repo, {"NO_COLOR": "1"})
    assert "\x1b" not in _on_tty(repo, {"TERM": "dumb"})


def test_status_never_writes_an_index(repo: Repo) -> None:
    """Looking must not take index.lock: an agent's `git commit` in the lane would fail."""
    lp = repo.create("alpha")
    gd = Path(repo.git("rev-parse", "--path-format=absolute", "--git-dir", cwd=lp).stdout.strip())
    indexes = [gd / "index", repo.path / ".git" / "index"]
    for f in (lp / "README.md", repo.path / "README.md"):
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # stat-dirty, same content
    before = [(p.read_bytes(), p.stat().st_mtime_ns) for p in indexes]
    d = repo.jlane("status").json
    assert d["lanes"][0]["dirty"] is False and d["hub"]["dirty_paths"] == []
    assert [(p.read_bytes(), p.stat().st_mtime_ns) for p in indexes] == before


def test_a_hub_whose_git_dir_moved_is_a_refusal_not_a_crash(repo: Repo, tmp_path: Path) -> None:
    """`git init --separate-git-dir=DIR` run in a lane moved the hub's repository (the red
    team's reproduction; the shim refuses that now): status refuses, it does not crash."""
    lane_path = repo.create("alpha")
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={tmp_path / 'sep'}"],
        cwd=lane_path,
        check=True,
        capture_output=True,
    )
    r = repo.jlane("status")
    assert r.rc == 1, r.stderr
    assert r.json["code"] == "not_a_git_repo", r.json
    assert "Traceback" not in r.stderr


def test_a_lane_released_while_status_looks_into_it_is_shown_not_a_crash(
    repo: Repo, tmp_path: Path
) -> None:
    """Found by tests/stress/test_lands.py: status lists the worktrees and records, then
    looks into each lane; a `git lane release` removing that lane in between made status
    exit 3 (git run in a directory that is gone). The release is put exactly there: status
    runs git through a wrapper that releases the lane (once) when status asks `git status`
    in it. The lane is then shown as it is now."""
    import shlex

    gone = repo.create("gone")
    repo.create("stays")
    flag = tmp_path / "released"
    real = shutil.which("git") or "git"
    release = [sys.executable, "-m", "guard", "-C", str(repo.path), "release", "gone", "--json"]
    wrapper = tmp_path / "git-wrapper"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$PWD $*" in *"/gone "*"status --porcelain"*)\n'
        f"  if [ ! -e {shlex.quote(str(flag))} ]; then\n"
        f"    : > {shlex.quote(str(flag))}\n"
        f"    env -u GIT_DIR -u GIT_WORK_TREE -u GIT_COMMON_DIR GITLANE_REAL_GIT={shlex.quote(real)} "
        f"{shlex.join(release)} > {shlex.quote(str(flag))} 2>&1\n"
        "  fi;;\n"
        "esac\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    r = repo.jlane("status", env={"GITLANE_REAL_GIT": str(wrapper)})
    assert json.loads(flag.read_text())["code"] == "released"  # it ran, in that window
    assert not gone.exists()
    assert r.rc == 0, r.stdout + r.stderr
    lanes = {ln["key"]: ln for ln in r.json["lanes"]}
    assert lanes["stays"]["state"] == "active"
    assert lanes.get("gone", {"state": "released"})["state"] in ("released", "orphaned")


@pytest.mark.parametrize("kind", ["corrupt", "huge"])
def test_an_unreadable_epoch_is_said_not_shown_as_0(repo: Repo, tmp_path: Path, kind: str) -> None:
    """epoch.json corrupt, or a link to a 3 GB (sparse) file: status says the epoch is not
    known, at once (a huge file is not read whole: it once took 17 s and a MemoryError),
    and reconcile rebuilds it."""
    import time

    epoch_json = repo.state_dir / "epoch.json"
    epoch_json.parent.mkdir(parents=True, exist_ok=True)
    if kind == "corrupt":
        epoch_json.write_text('{"epoch": ')
    else:
        huge = tmp_path / "huge"
        with open(huge, "wb") as f:
            f.truncate(3 << 30)
        epoch_json.symlink_to(huge)
    t0 = time.monotonic()
    st = repo.jlane("status")
    assert st.rc == 0 and time.monotonic() - t0 < 15, st.stdout
    assert st.json["epoch"] == 0
    assert any("epoch is not known" in w and "git lane reconcile" in w for w in st.json["warnings"])
    r = repo.jlane("reconcile")
    assert r.rc == 0 and {"action": "epoch_repaired"} in r.json["changes"], r.stdout
    assert not any("epoch is not known" in w for w in repo.jlane("status").json["warnings"])
