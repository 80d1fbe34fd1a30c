"""The red-team pass over issue 9, each through the real CLI: refusal alternatives one per
line, not_a_git_repo that does not init the cwd, a worker told about a lane that does not
exist, release during a sync, long keys in the text tables, paths with a newline, `path`
of an orphaned lane, setup state once setup_command is unset, and ignored files that
setup left (not work) versus ones a person made (work, with a way out that does not loop)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import Repo, lane

from guard.lane import CONFIRM, OWNER_NOTE
from guard import render


@pytest.fixture(autouse=True)
def _gitlane_on_path(gitlane_on_path: Path) -> Path:
    """`git lane` in a `next` runs this checkout (conftest.gitlane_on_path)."""
    return gitlane_on_path


def test_alternatives_print_one_per_line(repo: Repo) -> None:
    repo.create("alpha")
    repo.create("beta")
    r = repo.lane("land")  # from the hub: no lane named, two to choose from
    assert r.rc == 1
    ors = [ln for ln in r.stderr.splitlines() if ln.startswith("  Or: ")]
    assert ors == ["  Or: git lane land alpha", "  Or: git lane land beta"], r.stderr


def test_not_a_git_repo_does_not_init_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "somewhere else"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    r = lane("status", "--json", cwd=outside)
    assert (r.rc, r.code) == (1, "not_a_git_repo")
    assert not any("git init" in c for c in r.json["next"])  # maybe just the wrong directory
    assert r.json["alternatives"] == ["git init && git lane install"]
    assert "cd into your repository" in r.json["message"]


def test_a_worker_is_not_told_to_create_a_lane(repo: Repo) -> None:
    repo.create("alpha")
    for env in ({"GITLANE_LANE": "ghost"}, {"GITLANE_ROLE": "worker", "GITLANE_LANE": "ghost"}):
        r = repo.jlane("sync", env=env)
        assert (r.rc, r.code) == (1, "unknown_lane"), r.stdout
        assert r.json["next"] == ["git lane status"]
        # creating it is the owner's, and said so (as role_forbidden says it)
        assert r.json["alternatives"] == [f"git lane create ghost{OWNER_NOTE}"]
        st = repo.jlane("status", env=env)  # which runs for the worker, and lists the lanes
        assert st.rc == 0 and [ln["key"] for ln in st.json["lanes"]] == ["alpha"]
    assert repo.jlane("create", "ghost", env=env).code == "role_forbidden"
    r = repo.jlane("sync", "ghost")  # the owner is told to create it
    assert r.json["alternatives"] == ["git lane create ghost"]


def test_release_during_a_sync_points_at_continue(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.commit(repo.path, "f.txt", "base\n")
    path = repo.create("alpha")
    repo.commit(path, "f.txt", "lane\n")
    repo.commit(repo.path, "f.txt", "main\n")
    assert repo.jlane("sync", "alpha").code == "sync_conflicts"
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert r.json["next"][0] == "git lane continue alpha"
    assert "git lane abort alpha" in r.json["alternatives"]
    assert not any("land" in c for c in r.json["next"][:1])


def test_path_of_an_orphaned_lane_is_refused_with_repair(repo: Repo) -> None:
    path = repo.create("alpha")
    shutil.rmtree(path)
    r = repo.jlane("path", "alpha")
    assert (r.rc, r.code) == (1, "lane_not_active"), r.stdout
    assert r.json["next"][0] == "git lane repair alpha"
    assert repo.jlane("repair", "alpha").rc == 0
    r = repo.jlane("path", "alpha")
    assert (r.rc, r.json["path"]) == (0, str(path)) and path.is_dir()


def test_long_keys_are_cut_in_text_tables_only(repo: Repo) -> None:
    repo.config("gate", "off")
    long = "k" * 62 + "z"
    repo.create(long)
    short = repo.create("beta")
    repo.commit(short, "b.txt", "b\n")
    assert repo.jlane("land", "beta").code == "landed"
    text = repo.lane("status").stdout.splitlines()
    header = next(ln for ln in text if ln.startswith("LANE"))
    assert header.index("STATE") <= render.KEY_WIDTH + 2, header
    row = next(ln for ln in text if ln.startswith("kkk"))
    assert row.split()[0] == "k" * (render.KEY_WIDTH - 1) + "…"
    assert long in repo.lane("status").stdout  # whole in its advice line
    assert {ln["key"] for ln in repo.jlane("status").json["lanes"]} == {long, "beta"}
    log = repo.lane("log").stdout.splitlines()
    head = log[0]
    assert head.index("SUMMARY") < render.WIDTH - 30, head
    landed = [ln for ln in log if " land " in ln and "beta" in ln]
    assert landed and all(len(ln) > head.index("SUMMARY") + 5 for ln in landed), log
    assert long in [e.get("lane") for e in repo.jlane("log").json["events"]]


def test_setup_unset_clears_a_failed_setup(repo: Repo) -> None:
    repo.config("setup_command", json.dumps("exit 3"))
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "setup_failed"), r.stdout
    assert repo.lane("config", "unset", "setup_command").rc == 0
    r = repo.jlane("setup", "alpha")
    assert (r.rc, r.code) == (0, "ok"), r.stdout
    assert any("setup_command is unset" in w for w in r.json["warnings"])
    st = repo.jlane("status", "alpha").json["lanes"][0]
    assert st["setup"] is None and "git lane setup" not in st["advice"], st
    assert "failed" not in repo.lane("status").stdout


# -- ignored files: what setup left is not work; the rest has a way out that does not loop ---
def sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, text=True, capture_output=True)


def agent(repo: Repo, *args: str) -> list[str]:
    """Act as a scripted agent: run the command, then every `next` entry in order, as
    printed, until one succeeds where a git lane command was refused; the codes seen."""
    r = repo.jlane(*args)
    seen = [r.code]
    while r.rc == 1 and len(seen) < 8:
        for cmd in r.json["next"]:
            words = shlex.split(cmd)
            if words[:2] == ["git", "lane"] and not set(words) & {"&&", "|", ";"}:
                r = repo.jlane(*words[2:])
                seen.append(r.code)
                if r.rc:
                    break
            else:
                res = sh(cmd, repo.path)
                assert res.returncode == 0, (cmd, res.stderr)
    return seen


def test_ignored_only_work_has_a_way_out_that_does_not_loop(repo: Repo) -> None:
    repo.config("gate", "off")
    (repo.path / ".gitignore").write_text(".venv/\n*.log\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore")
    repo.config("setup_command", json.dumps("mkdir -p .venv/bin && echo py > .venv/bin/python"))
    alpha = repo.create("alpha")
    assert (alpha / ".venv/bin/python").is_file()
    # what setup made is not work: nothing to confirm
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    beta = repo.create("beta")
    (beta / "notes.log").write_text("mine\n")
    (beta / "odd\nname.log").write_text("mine too\n")
    os.makedirs(beta / "new")
    (beta / "new/a.log").write_text("in a new dir\n")
    r = repo.lane("release", "beta")
    assert r.rc == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("git-lane: refused [unlanded_work]") and "Next:" in lines[0]
    assert all(ln.startswith("  Or: ") for ln in lines[1:]), r.stderr
    r = repo.jlane("release", "beta")
    assert sorted(r.json["details"]["ignored_paths"]) == ["new/a.log", "notes.log", "odd\nname.log"]
    assert not any("land" in c for c in r.json["next"]), r.json["next"]
    # an agent that starts at land ends with the lane released, the files kept aside
    assert agent(repo, "land", "beta") == ["nothing_to_land", "unlanded_work", "released"]
    (kept,) = (repo.state_dir / "kept").iterdir()
    with tarfile.open(kept) as tar:
        names = sorted(m.name.removeprefix("./") for m in tar.getmembers() if m.isfile())
    assert names == ["new/a.log", "notes.log", "odd\nname.log"]
    assert not beta.exists()


def test_setup_rerun_does_not_absorb_an_edited_ignored_file(repo: Repo) -> None:
    """A file someone changed before setup ran again stays work; what setup remade is not."""
    (repo.path / ".gitignore").write_text(".venv/\n.env\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore")
    repo.config(
        "setup_command", json.dumps("mkdir -p .venv && date +%N > .venv/stamp && touch .env")
    )
    path = repo.create("alpha")
    (path / ".env").write_text("TOKEN=mine\n")
    assert repo.jlane("setup", "alpha").rc == 0  # touches .env again: setup's now
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    repo.config("setup_command", json.dumps("mkdir -p .venv && date +%N > .venv/stamp"))
    path = repo.create("beta")
    (path / ".env").write_text("TOKEN=mine\n")
    assert repo.jlane("setup", "beta").rc == 0  # leaves .env alone: still someone's
    r = repo.jlane("release", "beta")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert r.json["details"]["ignored_paths"] == [".env"]


def test_a_big_ignored_dir_is_archived_as_one_word(repo: Repo) -> None:
    (repo.path / ".gitignore").write_text("build/\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore")
    path = repo.create("alpha")
    (path / "build").mkdir()
    for n in range(30):
        (path / "build" / f"o{n}.o").write_text(f"{n}\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert r.json["details"]["ignored_count"] == 30  # each file counted once
    words = shlex.split(r.json["next"][0])  # tar -C PATH --sparse --null -T LIST ...
    listing = Path(words[words.index("-T") + 1])
    assert listing.read_bytes() == b"./build\0", r.json["next"]
    assert not any("add -f" in c for c in r.json["alternatives"])  # 30 files: no quick commit
    assert sh(r.json["next"][0], repo.path).returncode == 0
    assert repo.jlane("release", *shlex.split(r.json["next"][1])[3:]).code == "released"
    (kept,) = (repo.state_dir / "kept").iterdir()
    with tarfile.open(kept) as tar:
        assert len([m for m in tar.getmembers() if m.isfile()]) == 30


def test_a_failed_archive_never_runs_the_discard(repo: Repo, tmp_path: Path) -> None:
    """The printed Next line is one path joined with &&: when tar fails (a name list past
    ARG_MAX once did), the lane and its files stay. The names never go on tar's command
    line, so the command does not grow with them."""
    (repo.path / ".gitignore").write_text("*.log\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore")
    path = repo.create("alpha")
    for n in range(300):
        (path / f"f{n:03}.log").write_text(f"{n}\n")
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert all(len(c) < 400 for c in r.json["next"]), r.json["next"]
    line = repo.lane("release", "alpha").stderr.splitlines()[0]
    cmd = line.split(" Next: ", 1)[1]
    assert " ; " not in cmd and cmd.endswith(f"git lane release alpha --confirm {CONFIRM}")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "tar").write_text("#!/bin/sh\necho 'tar: Argument list too long' >&2\nexit 2\n")
    (fake / "tar").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    res = subprocess.run(["sh", "-c", cmd], cwd=repo.path, text=True, capture_output=True, env=env)
    assert res.returncode != 0
    assert (path / "f299.log").is_file()
    assert repo.jlane("status", "alpha").json["lanes"][0]["key"] == "alpha"
    # with the real tar the same line keeps every file, then releases
    res = subprocess.run(["sh", "-c", cmd], cwd=repo.path, text=True, capture_output=True)
    assert res.returncode == 0, res.stderr
    (kept,) = (repo.state_dir / "kept").iterdir()
    with tarfile.open(kept) as tar:
        assert len([m for m in tar.getmembers() if m.isfile()]) == 300
    assert not path.exists()


def test_a_same_size_edit_with_its_mtime_set_back_is_still_work(repo: Repo) -> None:
    """cp -p / touch -r restore the mtime; the ctime (and inode) still tell."""
    (repo.path / ".gitignore").write_text(".env\n")
    repo.git("add", ".gitignore")
    repo.git("commit", "-q", "-m", "ignore")
    repo.config("setup_command", json.dumps("echo TOKEN=aaaa > .env"))
    path = repo.create("alpha")
    env = path / ".env"
    st = env.stat()
    env.write_text("TOKEN=bbbb\n")  # same size
    os.utime(env, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert env.stat().st_size == st.st_size and env.stat().st_mtime_ns == st.st_mtime_ns
    r = repo.jlane("release", "alpha")
    assert (r.rc, r.code) == (1, "unlanded_work"), r.stdout
    assert r.json["details"]["ignored_paths"] == [".env"]
    assert env.read_text() == "TOKEN=bbbb\n"
