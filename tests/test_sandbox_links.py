"""Hard links planted beforehand in the git dirs `exec --sandbox` grants (the lane refs,
their reflogs, the lane's admin dir and its object store) to a file outside them: the
kernel checks the name, so CMD would write the outside file through it. exec gives each
such name a file of its own before CMD starts (guard/linked.py), and so do exec
--own-objects and agent-setup --for codex; doctor reports one (check `git dir links`).
Real kernel, real processes, the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import Repo, git
from enginehelp import lane_with_submodule
from sandboxhelp import NEEDS_LANDLOCK

EVIL = "[core]\n\thooksPath = /tmp/evil\n"


def _admin(lane_path: Path) -> Path:
    return Path(
        git(lane_path, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip()
    ).resolve()


def _events(hub: Repo, kind: str) -> list[dict[str, object]]:
    p = hub.state_dir / "events.jsonl"
    lines = p.read_text().splitlines() if p.exists() else []
    return [e for e in map(json.loads, lines) if e.get("kind") == kind]


def _place(hub: Repo, lane_path: Path, where: str) -> Path:
    common = hub.common_dir.resolve()
    admin = _admin(lane_path)
    return {
        "lane_refs": common / "refs" / "heads" / "lane" / "planted",
        "lane_logs": common / "logs" / "refs" / "heads" / "lane" / "planted",
        "admin_dir": admin / "planted",
        "lane_store": admin / "objects" / "ab" / ("c" * 38),
    }[where]


@NEEDS_LANDLOCK
@pytest.mark.parametrize("where", ["lane_refs", "lane_logs", "admin_dir", "lane_store"])
def test_planted_link_to_common_config_is_split(hub: Repo, where: str) -> None:
    """`ln <common>/config <granted dir>/NAME` made beforehand, outside the sandbox; CMD
    appends to NAME: the common config is unchanged (CMD wrote its own copy)."""
    lane_path = hub.create("alpha")
    assert hub.lane("exec", "--sandbox", "alpha", "--", "true").rc == 0  # its store exists
    config = hub.common_dir / "config"
    before = config.read_bytes()
    link = _place(hub, lane_path, where)
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(config, link)
    r = hub.lane(
        "exec",
        "--sandbox",
        "alpha",
        "--",
        "sh",
        "-c",
        f"printf %s {shlex.quote(EVIL)} >> {shlex.quote(str(link))}",
    )
    assert r.rc == 0, r.stderr
    assert config.read_bytes() == before
    assert config.stat().st_nlink == 1
    assert link.read_bytes() == before + EVIL.encode()  # CMD wrote its own copy
    assert link.stat().st_ino != config.stat().st_ino
    rel = os.path.relpath(link, hub.common_dir.resolve())
    split = [e for e in _events(hub, "git_dir_links_split") if e["code"] == "split"]
    assert split and rel in split[-1]["files"], split


@NEEDS_LANDLOCK
def test_submodule_clone_hard_linked_objects_are_split(
    repo: Repo, tmp_path: Path, gitlane_on_path: Path
) -> None:
    """A local submodule clone hard-links the objects of the repository it clones (git
    itself makes the link): CMD could chmod and rewrite an object the source shares."""
    _, moddir = lane_with_submodule(repo, tmp_path)
    source = tmp_path / "sub-source" / ".git" / "objects"
    shared = {
        p: p.stat().st_ino
        for p in (moddir / "objects").rglob("*")
        if p.is_file() and p.stat().st_nlink > 1
    }
    assert shared, "the clone hard-linked nothing: the test's premise"
    src = {p: (p.stat().st_ino, p.read_bytes()) for p in source.rglob("*") if p.is_file()}
    obj = next(iter(shared))
    body = f"chmod u+w {shlex.quote(str(obj))} && printf evil >> {shlex.quote(str(obj))}"
    r = repo.lane("exec", "--sandbox", "alpha", "--", "sh", "-c", body)
    assert r.rc == 0, r.stderr
    for p in shared:
        assert p.stat().st_nlink == 1 and p.stat().st_ino != shared[p], p
    assert {p: (p.stat().st_ino, p.read_bytes()) for p in src} == src  # the source as it was
    assert git(tmp_path / "sub-source", "fsck", "--no-dangling").returncode == 0


@NEEDS_LANDLOCK
def test_links_with_every_name_inside_are_left_alone(hub: Repo) -> None:
    """A file whose names all lie in the granted dirs is not copied (CMD may write each of
    them anyway), while one beside it with a name outside is."""
    lane_path = hub.create("alpha")
    common = hub.common_dir.resolve()
    a = common / "refs" / "heads" / "lane" / "inside"
    a.write_bytes(b"x\n")
    b = _admin(lane_path) / "inside"
    os.link(a, b)
    ino = a.stat().st_ino
    config = common / "config"
    out = _place(hub, lane_path, "admin_dir")
    os.link(config, out)
    r = hub.lane("exec", "--sandbox", "alpha", "--", "true")
    assert r.rc == 0, r.stderr
    assert a.stat().st_ino == ino == b.stat().st_ino and a.stat().st_nlink == 2
    assert config.stat().st_nlink == 1 and out.stat().st_ino != config.stat().st_ino
    split = [e for e in _events(hub, "git_dir_links_split") if e["code"] == "split"]
    assert [e["files"] for e in split] == [[os.path.relpath(out, common)]], split


@NEEDS_LANDLOCK
def test_a_link_that_cannot_be_split_refuses_and_cmd_never_runs(hub: Repo) -> None:
    """A git writing the file holds NAME.lock: the split cannot be made, so CMD is not
    started (git_dir_link_failed); the next runs once the lock is gone."""
    lane_path = hub.create("alpha")
    config = hub.common_dir / "config"
    link = _place(hub, lane_path, "lane_refs")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(config, link)
    lock = link.with_name(link.name + ".lock")
    lock.write_text("")
    marker = lane_path / "ran"  # (CMD may write only in the lane)
    r = hub.lane("exec", "--json", "--sandbox", "alpha", "--", "touch", str(marker))
    assert r.rc == 1 and r.code == "git_dir_link_failed", r.stdout + r.stderr
    assert not marker.exists()
    assert config.stat().st_nlink == 2  # nothing changed
    lock.unlink()
    for cmd in r.json["next"]:
        done = subprocess.run(["sh", "-c", cmd], cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stderr)
    assert marker.exists() and config.stat().st_nlink == 1, (r.json["next"], done.stderr)


def test_own_objects_and_codex_setup_split_too(hub: Repo) -> None:
    """exec --own-objects (Codex confines its own commands) and agent-setup --for codex,
    before it prints Codex's grants, split a planted link the same way."""
    lane_path = hub.create("alpha")
    config = hub.common_dir / "config"
    link = _place(hub, lane_path, "admin_dir")
    os.link(config, link)
    r = hub.jlane("agent-setup", "alpha", "--for", "codex")
    assert r.rc == 0, r.stderr
    assert config.stat().st_nlink == 1 and link.stat().st_ino != config.stat().st_ino
    link.unlink()
    os.link(config, link)
    r = hub.lane("exec", "--own-objects", "alpha", "--", "true")
    assert r.rc == 0, r.stderr
    assert config.stat().st_nlink == 1 and link.stat().st_ino != config.stat().st_ino


def test_doctor_reports_a_planted_link_and_its_fix_works(hub: Repo) -> None:
    lane_path = hub.create("alpha")
    config = hub.common_dir / "config"
    link = _place(hub, lane_path, "lane_logs")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(config, link)
    r = hub.jlane("doctor")
    checks = [c for c in r.json["checks"] if c["name"] == "git dir links"]
    assert len(checks) == 1 and checks[0]["status"] == "fail", checks
    assert os.path.relpath(link, hub.common_dir.resolve()) in checks[0]["message"]
    assert config.stat().st_nlink == 2  # doctor only looks
    done = subprocess.run(
        ["sh", "-c", checks[0]["fix"]], cwd=hub.path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert config.stat().st_nlink == 1
    r = hub.jlane("doctor")
    assert [c["status"] for c in r.json["checks"] if c["name"] == "git dir links"] == ["ok"]


def test_two_names_inside_and_one_outside_each_get_a_file_and_the_outside_keeps_its_own(
    hub: Repo,
) -> None:
    """Two names of one file in the lane's store and one outside: both inside are split
    (each its own copy, same bytes and mode), the outside file keeps its inode and bytes,
    and no NAME.lock is left."""
    lane_path = hub.create("alpha")
    assert hub.lane("exec", "--own-objects", "alpha", "--", "true").rc == 0  # its store
    store = _admin(lane_path) / "objects"
    outside = hub.path.parent / "outside-object"
    outside.write_bytes(b"\0" * 100 + b"object\n")
    outside.chmod(0o444)
    (store / "ab").mkdir(exist_ok=True)
    a, b = store / "ab" / ("1" * 38), store / "ab" / ("2" * 38)
    os.link(outside, a)
    os.link(outside, b)
    ino = outside.stat().st_ino
    r = hub.lane("exec", "--own-objects", "alpha", "--", "true")
    assert r.rc == 0, r.stderr
    assert outside.stat().st_ino == ino and outside.stat().st_nlink == 1
    inodes = {a.stat().st_ino, b.stat().st_ino, ino}
    assert len(inodes) == 3
    for p in (a, b):
        assert p.read_bytes() == outside.read_bytes() and p.stat().st_mode & 0o777 == 0o444
    assert not list(store.rglob("*.lock"))


# -- F3: linked.find counts a planted link's one name twice when a directory is exchanged ----
def test_f3_a_planted_link_is_split_though_its_directory_is_exchanged_during_the_walk(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ln .git/config .git/refs/heads/lane/d1/p` made beforehand outside the sandbox (the
    class linked.py closes): config has 2 names, one in the walked dirs. Another lane's
    sandboxed CMD (refs/heads/lane/ is granted to every lane; a renameat2 RENAME_EXCHANGE
    of two directories in one parent needs no REFER, and works under exec --sandbox)
    exchanges d1 and d2 while this lane's exec walks: the walk lists [d1, d2], counts
    d1/p, the exchange puts that directory at d2, and it counts d2/p: 2 names found for a
    link count of 2, "all inside", nothing split, and CMD starts with a name that writes
    the repository's config. Here the exchange is made at the moment a racing process
    hits (just before the walk opens d2), in-process so it is deterministic."""
    import ctypes

    from guard import dirfd, linked, sandbox

    assert repo.lane("install").rc == 0
    repo.create("alpha")
    common = os.path.realpath(repo.common_dir)
    lanes = Path(common, "refs/heads/lane")
    (lanes / "d1").mkdir()
    (lanes / "d2").mkdir()
    # the directory scandir lists first holds the planted link; the exchange falls just
    # before the walk opens the second
    one, two = [e.name for e in os.scandir(lanes) if e.name in ("d1", "d2")]
    os.link(Path(common, "config"), lanes / one / "p")  # planted beforehand
    assert os.stat(Path(common, "config")).st_nlink == 2
    admin = next(Path(common, "worktrees").iterdir())
    libc = ctypes.CDLL(None, use_errno=True)
    real_open = dirfd.open_dir
    fired = []

    def racing_open(dfd: int, name: str, *a: object, **k: object) -> int:
        if name == two and not fired:  # the other lane's exchange lands here
            fired.append(1)
            r = libc.renameat2(dfd, one.encode(), dfd, two.encode(), 2)  # RENAME_EXCHANGE
            assert r == 0, os.strerror(ctypes.get_errno())
        return real_open(dfd, name, *a, **k)

    monkeypatch.setattr(linked.dirfd, "open_dir", racing_open)
    dirs = sandbox.lane_git_dirs(common, str(admin))
    linked.split(common, dirs)
    assert fired, "the walk never opened d2"
    assert os.stat(Path(common, "config")).st_nlink == 1, (
        "the planted link to .git/config is left in refs/heads/lane/: a sandboxed CMD "
        "writes the repository's config through it"
    )


# -- F4: a hard link planted in CMD's private cache dir (kept between runs) is not split ------
@NEEDS_LANDLOCK
def test_f4_a_link_planted_in_cmds_kept_cache_dir_does_not_write_the_repository_config(
    hub: Repo,
) -> None:
    """exec --sandbox grants CMD its own cache dir (XDG_CACHE_HOME, 0700, kept between
    runs). linked.py splits planted links only in the git dirs; a link to .git/config made
    in that cache dir beforehand, outside the sandbox (an unconfined run of the same
    agent), lets the next sandboxed CMD append `[core] hooksPath` to the repository's
    config. Must be split (or refused) before CMD starts, as in the git dirs."""
    import subprocess

    lane = hub.create("alpha")
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c", "echo $XDG_CACHE_HOME"],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    cache = Path(res.stdout.strip().splitlines()[-1])
    assert cache.is_dir(), res.stdout + res.stderr
    config = hub.common_dir / "config"
    os.link(config, cache / "planted")  # beforehand, outside the sandbox
    before = config.read_text()
    subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c",
         'printf "[core]\\n\\thooksPath = /dev/null\\n" >> "$XDG_CACHE_HOME/planted"'],
        cwd=lane, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert config.read_text() == before, "a sandboxed CMD wrote the repository's config"
    assert os.stat(config).st_nlink == 1  # split: the cache's name has a file of its own


# -- F6: another lane's `gitdir` makes exec split (and store) in the wrong admin dir ---------
@NEEDS_LANDLOCK
def test_f6_exec_splits_the_admin_dir_the_sandbox_grants_not_one_another_lane_names(
    hub: Repo,
) -> None:
    """The sandbox grants the admin dir the lane's `.git` names, checked against that
    admin dir's `gitdir` (sandbox.facts). The split walks objects.admin_dir's answer
    instead: the first `worktrees/*/gitdir`, in sorted order, that names the lane's .git.
    Lane alpha's sandboxed CMD may write its own `worktrees/alpha/gitdir` (its admin dir
    is granted) to name lane zulu's `.git`: zulu's exec then splits worktrees/alpha, while
    its CMD is granted worktrees/zulu, where a link to .git/config planted beforehand
    (the class linked.py closes) is left, and CMD appends `[core] hooksPath` to the
    repository's config through it."""
    import subprocess

    zulu = hub.create("zulu")
    alpha = hub.create("alpha")
    common = hub.common_dir
    assert (common / "worktrees" / "alpha").is_dir() and (common / "worktrees" / "zulu").is_dir()
    # alpha's own sandboxed CMD rewrites its own admin dir's gitdir (granted to it)
    target = common / "worktrees" / "alpha" / "gitdir"
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "alpha", "--", "sh", "-c",
         f"printf '%s\\n' '{zulu}/.git' > '{target}'"],
        cwd=alpha, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert target.read_text().strip() == f"{zulu}/.git", r.stdout + r.stderr
    planted = common / "worktrees" / "zulu" / "planted"
    os.link(common / "config", planted)  # beforehand, outside the sandbox
    before = (common / "config").read_text()
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "zulu", "--", "sh", "-c",
         f"printf '[core]\\n\\thooksPath = /dev/null\\n' >> '{planted}'"],
        cwd=zulu, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (common / "config").read_text() == before, (
        "zulu's sandboxed CMD wrote .git/config through a link the split never walked: "
        + r.stderr[-400:]
    )
    # refused (two gitdirs name zulu's .git), and the refusal's next works as written
    assert r.returncode != 0 and "[lane_pointers_tampered]" in r.stderr, r.stderr
    assert "lane repair alpha" in r.stderr, r.stderr
    assert subprocess.run(["git", "lane", "repair", "alpha"], cwd=hub.path).returncode == 0
    assert target.read_text().strip() == str(alpha / ".git")
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "zulu", "--", "sh", "-c",
         f"printf '[core]\\n\\thooksPath = /dev/null\\n' >> '{planted}'"],
        cwd=zulu, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (common / "config").read_text() == before
    assert os.stat(common / "config").st_nlink == 1  # zulu's own admin dir was split


def test_doctor_names_the_lane_whose_gitdir_names_another_and_its_fix_works(hub: Repo) -> None:
    """16B F6 in doctor: alpha's `gitdir` rewritten to name zulu's `.git` (alpha's CMD may
    write it): which admin dir exec walks for zulu is not certain, so `git dir links`
    fails for zulu, and its fix (repair alpha) puts alpha's pointer back."""
    zulu = hub.create("zulu")
    alpha = hub.create("alpha")
    target = hub.common_dir / "worktrees" / "alpha" / "gitdir"
    target.write_text(f"{zulu}/.git\n")
    r = hub.jlane("doctor")
    checks = [c for c in r.json["checks"] if c["name"] == "git dir links"]
    assert [c["status"] for c in checks] == ["fail"], checks
    assert "lane repair alpha" in checks[0]["fix"]
    done = subprocess.run(
        ["sh", "-c", checks[0]["fix"]], cwd=hub.path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text().strip() == str(alpha / ".git")
    r = hub.jlane("doctor")
    assert [c["status"] for c in r.json["checks"] if c["name"] == "git dir links"] == ["ok"]


def test_a_walk_a_directory_moves_during_every_time_is_refused_never_trusted(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16B F3 kept up: each walk meets an exchange of two lane-ref directories; after
    linked.TRIES walks the names counted are not taken: LinkError (git_dir_link_failed)."""
    import ctypes

    from guard import dirfd, linked

    repo.create("alpha")
    common = os.path.realpath(repo.common_dir)
    lanes = Path(common, "refs/heads/lane")
    (lanes / "d1").mkdir()
    (lanes / "d2").mkdir()
    one, two = [e.name for e in os.scandir(lanes) if e.name in ("d1", "d2")]
    libc = ctypes.CDLL(None, use_errno=True)
    real_open = dirfd.open_dir

    def racing_open(dfd: int, name: str, *a: object, **k: object) -> int:
        if name == two:
            assert libc.renameat2(dfd, one.encode(), dfd, two.encode(), 2) == 0
        return real_open(dfd, name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(linked.dirfd, "open_dir", racing_open)
    with pytest.raises(linked.LinkError) as got:
        linked.find(common, [str(lanes)])
    assert got.value.rel == f"refs/heads/lane/{two}"  # where the move was met


# -- red team 17 F2: CMD's own hard link (cache dir <-> its worktree) and a .lock it left --
def _cache_dir(hub: Repo, key: str) -> Path:
    res = subprocess.run(
        ["git", "lane", "exec", "--sandbox", key, "--", "sh", "-c", "echo $XDG_CACHE_HOME"],
        cwd=hub.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    cache = Path(res.stdout.strip().splitlines()[-1])
    assert cache.is_dir(), res.stdout + res.stderr
    return cache


@NEEDS_LANDLOCK
def test_a_sandboxed_cmd_cannot_lock_its_lane_out_of_every_later_sandboxed_exec(
    hub: Repo, tmp_path: Path
) -> None:
    """F2: CMD's own cache dir and its worktree are both CMD's (granted REFER), so CMD
    hard-links a file of its worktree into the cache dir and leaves `NAME.lock` beside
    it. The next exec --sandbox took the worktree's name for a name outside, could not
    split (the lock existed) and refused git_dir_link_failed with itself as next, for
    ever, while doctor said `git dir links` ok. Now a name in the lane worktree is CMD's
    own: the exec runs, both names keep one file, and doctor agrees."""
    lane_path = hub.create("gamma")
    plant = tmp_path / "plant.sh"
    plant.write_text(
        'echo data > mine.txt && ln mine.txt "$XDG_CACHE_HOME/f" && : > "$XDG_CACHE_HOME/f.lock"\n'
    )
    r = subprocess.run(
        ["git", "lane", "exec", "--sandbox", "gamma", "--", "sh", str(plant)],
        cwd=hub.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    again = hub.lane("exec", "--json", "--sandbox", "gamma", "--", "true")
    assert again.rc == 0, again.stdout + again.stderr
    assert (lane_path / "mine.txt").stat().st_nlink == 2  # both CMD's: left as they are
    checks = [c for c in hub.jlane("doctor").json["checks"] if c["name"] == "git dir links"]
    assert [c["status"] for c in checks] == ["ok"], checks


@NEEDS_LANDLOCK
def test_a_lock_cmd_left_in_its_cache_dir_does_not_stop_the_split_of_a_planted_link(
    hub: Repo,
) -> None:
    """A link to the repository's config planted in CMD's cache dir beforehand, outside the
    sandbox, with `NAME.lock` beside it (CMD's own dir: no git writes there): the split
    goes on (its copy is made under a name of git-lane's own), the config stays one file;
    doctor named it before, with a fix that works, and agrees after."""
    hub.create("gamma")
    cache = _cache_dir(hub, "gamma")
    config = hub.common_dir / "config"
    os.link(config, cache / "planted")
    (cache / "planted.lock").write_text("")
    checks = [c for c in hub.jlane("doctor").json["checks"] if c["name"] == "git dir links"]
    assert [c["status"] for c in checks] == ["fail"], checks
    assert str(cache / "planted") in checks[0]["message"], checks
    before = config.read_text()
    r = hub.lane(
        "exec", "--json", "--sandbox", "gamma", "--",
        "sh", "-c", 'printf "[core]\\n\\thooksPath = /dev/null\\n" >> "$XDG_CACHE_HOME/planted"',
    )  # fmt: skip
    assert r.rc == 0, r.stdout + r.stderr
    assert config.read_text() == before and config.stat().st_nlink == 1
    assert (cache / "planted.lock").exists()  # CMD's, left as it was
    checks = [c for c in hub.jlane("doctor").json["checks"] if c["name"] == "git dir links"]
    assert [c["status"] for c in checks] == ["ok"], checks


@NEEDS_LANDLOCK
def test_a_git_dir_link_refusal_names_a_next_that_changes_something(hub: Repo) -> None:
    """A `.lock` left beside a planted link in the lane refs (a git that died, or a process
    outside the sandbox): the refusal's next is never the command that just refused; run
    as written (the lock still there), it removes the lock and the exec then runs."""
    lane_path = hub.create("alpha")
    config = hub.common_dir / "config"
    link = _place(hub, lane_path, "lane_refs")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(config, link)
    link.with_name(link.name + ".lock").write_text("")
    argv = ["exec", "--json", "--sandbox", "alpha", "--", "true"]
    r = hub.lane(*argv)
    assert (r.rc, r.code) == (1, "git_dir_link_failed"), r.stdout + r.stderr
    nxt = r.json["next"]
    assert nxt and not nxt[0].startswith("git lane exec"), nxt
    for cmd in nxt:
        done = subprocess.run(["sh", "-c", cmd], cwd=hub.path, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr)
    assert config.stat().st_nlink == 1, nxt
