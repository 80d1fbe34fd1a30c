"""A sandboxed lane's private object store (guard/objects.py): real kernel, real processes.

Inside `git lane exec --sandbox` the shared store `<common>/objects/` is not writable, so
CMD cannot rewrite main's history in place (rename over a loose object, overwrite a pack,
the alternates file, the commit-graph); its git writes into `worktrees/<id>/objects`,
which is never an alternate of the shared store: exec re-hashes what CMD commits into the
shared store (absorb), and so does land before main moves (a forged object is refused:
objects_corrupt). tests/test_sandbox_store_shadow.py has the rest."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from sandboxhelp import NEEDS_LANDLOCK
from conftest import LaneRun, Repo, git


pytestmark = NEEDS_LANDLOCK
REAL_GIT = os.path.realpath(shutil.which("git") or "/usr/bin/git")

TRY = r"""
try() {
	name=$1
	shift
	out=$("$@" 2>&1 </dev/null)
	printf 'CASE %s %s\n' "$name" "$?"
	printf '%s\n' "$out" | sed 's/^/    | /'
}
"""

# write a loose object file by hand: python3 - PATH TYPE CONTENT_FILE (rename over it)
LOOSE = r"""
loose() {
python3 - "$@" <<'P'
import os, sys, zlib
path, kind, src = sys.argv[1:4]
body = open(src, "rb").read()
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".x", "wb") as fh:
    fh.write(zlib.compress(kind.encode() + b" %d\0" % len(body) + body))
os.replace(path + ".x", path)
P
}
"""


def _run(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"script-{key}.sh"
    script.write_text(TRY + LOOSE + body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


def _rcs(out: str) -> dict[str, int]:
    return {ln.split()[1]: int(ln.split()[2]) for ln in out.splitlines() if ln.startswith("CASE ")}


def _main_move(hub: Repo, name: str) -> str:
    """The owner moves main (hooks off for one command: the owner's escape hatch)."""
    (hub.path / name).write_text(name + "\n")
    hub.git("add", name)
    hub.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", f"main: {name}")
    return hub.sha() or ""


def _alternates(hub: Repo) -> list[str]:
    f = hub.common_dir / "objects" / "info" / "alternates"
    return f.read_text().splitlines() if f.exists() else []


def _store(hub: Repo, lane_path: Path) -> Path:
    gd = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    return gd.resolve() / "objects"


def _shared_alone(hub: Repo, *args: str) -> str:
    """`git ARGS` in the hub with the lanes' stores out of sight (alternates moved aside)."""
    alt = hub.common_dir / "objects" / "info" / "alternates"
    aside = alt.with_name("alternates.aside")
    if alt.exists():
        alt.rename(aside)
    try:
        return hub.git(*args).stdout
    finally:
        if aside.exists():
            aside.rename(alt)


ATTACKS = r"""
C=$1 M=$2 PACK=$3
printf 'evil\n' > "$TMPDIR/evil"
O="$C/objects/$(echo "$M" | cut -c1-2)/$(echo "$M" | cut -c3-)"
try rename_over_commit loose "$O" commit "$TMPDIR/evil"
try overwrite_commit sh -c 'printf x > "$1"' - "$O"
try truncate_commit truncate -s 0 "$O"
try overwrite_pack sh -c 'printf x > "$1"' - "$PACK"
try rename_over_pack sh -c 'cp "$1" "$2.x" && mv "$2.x" "$1"' - "$TMPDIR/evil" "$PACK"
try alternates sh -c 'printf "/tmp\n" >> "$1/objects/info/alternates"' - "$C"
try commit_graph sh -c 'printf x > "$1/objects/info/commit-graph"' - "$C"
try new_loose sh -c 'mkdir -p "$1/objects/ab" && printf x > "$1/objects/ab/cdef"' - "$C"
try shared_store_env env -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES "$4" hash-object -w "$TMPDIR/evil"
"""


def test_shared_store_cannot_be_rewritten(hub: Repo, tmp_path: Path) -> None:
    """The red-team's attack (finding 4 of issue 11) and its relatives fail with EACCES;
    main's history is intact."""
    _ = hub.create("alpha")
    # a loose main commit, a pack, a commit-graph to aim at
    _main_move(hub, "b.txt")
    hub.git("repack", "-q")
    _main_move(hub, "c.txt")
    hub.git("commit-graph", "write", "--reachable")
    main = hub.sha() or ""
    packs = sorted((hub.common_dir / "objects" / "pack").glob("*.pack"))
    assert packs and (hub.common_dir / "objects" / main[:2] / main[2:]).exists()
    before = {p: p.read_bytes() for p in [*packs, hub.common_dir / "objects/info/commit-graph"]}
    r = _run(hub, tmp_path, ATTACKS, str(hub.common_dir), main, str(packs[0]), REAL_GIT)
    rcs = _rcs(r.stdout)
    assert len(rcs) == 9, r.stdout
    assert all(rc != 0 for rc in rcs.values()), r.stdout
    assert r.stdout.count("Permission denied") >= 8, r.stdout
    assert hub.sha() == main
    assert hub.git("show", "main:a.txt").stdout == "base\n"
    assert hub.git("fsck", "--connectivity-only", "--no-dangling").returncode == 0
    assert all(p.read_bytes() == b for p, b in before.items())


def test_red_team_commit_object_replaced(hub: Repo, tmp_path: Path) -> None:
    """The red-team's script as they wrote it: main keeps its content."""
    hub.create("alpha")
    body = r"""
set -e
C=$(git rev-parse --path-format=absolute --git-common-dir); M=$(git rev-parse refs/heads/main)
B=$(printf 'evil\n' | git hash-object -w --stdin)
T=$(git ls-tree main | sed "s/blob [0-9a-f]*	a.txt/blob $B	a.txt/" | git mktree)
git cat-file commit "$M" | sed "1s/^tree .*/tree $T/" > "$TMPDIR/c"
python3 - "$C/objects/$(echo $M | cut -c1-2)/$(echo $M | cut -c3-)" "$TMPDIR/c" <<'P'
import sys, zlib, os
body = open(sys.argv[2], "rb").read()
open(sys.argv[1] + ".x", "wb").write(zlib.compress(b"commit %d\0" % len(body) + body))
os.replace(sys.argv[1] + ".x", sys.argv[1])
P
"""
    r = _run(hub, tmp_path, body)
    assert r.rc != 0 and "Permission denied" in r.stderr
    assert hub.git("show", "main:a.txt").stdout == "base\n"
    assert hub.git("fsck", "--no-dangling").returncode == 0


def test_lane_work_lands_from_the_lane_store(hub: Repo, tmp_path: Path) -> None:
    """Commits made inside live in the lane's store; the hub sees them (exec absorbed
    them, verified, into the shared store; the lane's store is no alternate); the owner's
    land finds them complete there; gc removes the lane and its store."""
    lane_path = hub.create("alpha")
    body = """
try edit sh -c 'printf "new\\n" > new.txt'
try add git add new.txt
try commit git commit -q -m "sandboxed work"
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0 and set(_rcs(r.stdout).values()) == {0}, r.stdout
    tip = git(lane_path, "rev-parse", "HEAD").stdout.strip()
    store = _store(hub, lane_path)
    assert (store / tip[:2] / tip[2:]).exists()
    assert not (hub.common_dir / "objects" / tip[:2] / tip[2:]).exists()  # packed, not loose
    assert _alternates(hub) == []
    # exec, once CMD ended, copied them (verified) into the shared store too
    assert _shared_alone(hub, "show", f"{tip}:new.txt") == "new\n"
    # unsandboxed, in the hub: the lane's commits are there
    assert hub.git("log", "--format=%s", "-1", "lane/alpha").stdout.strip() == "sandboxed work"
    main = hub.sha()
    land = hub.lane("land", "alpha")
    assert land.rc == 0, land.stderr
    assert hub.sha() == tip and main != tip
    # main is complete in the shared store alone
    assert _shared_alone(hub, "show", "main:new.txt") == "new\n"
    _shared_alone(hub, "fsck", "--connectivity-only", "--no-dangling")
    gc = hub.lane("gc")
    assert gc.rc == 0, gc.stderr
    assert not lane_path.exists() and not store.exists() and _alternates(hub) == []
    res = hub.git("log", "-1", "main")
    assert "alternate" not in res.stderr


def test_batch_fsync_configured_still_stores_cmds_objects(hub: Repo, tmp_path: Path) -> None:
    """The lane's store has no REFER (red team 13U: a rule follows the store's inode, which
    CMD can rename within its admin dir). git renames within one directory there, but
    core.fsyncMethod=batch (git 2.36+) adds objects in a temp dir and renames them into
    their fan-out dirs: refused, git 2.39 says nothing and the index names objects never
    stored. exec sets core.fsyncMethod=fsync for CMD (after the repository's setting)."""
    lane_path = hub.create("alpha")
    hub.git("config", "core.fsyncMethod", "batch")
    hub.git("config", "core.fsync", "loose-object")
    body = """
try add sh -c 'printf "batch\\n" > b.txt && git add b.txt'
try commit git commit -q -m batched
try fsck git fsck --no-dangling
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0 and set(_rcs(r.stdout).values()) == {0}, r.stdout
    assert git(lane_path, "show", "HEAD:b.txt").stdout == "batch\n"


def test_rebase_and_socket_land_inside(hub: Repo, tmp_path: Path) -> None:
    """A rebase onto main (the real git), `git lane sync` and `git lane land` through the
    supervisor's socket (worker_land = "allow") all work with the private store."""
    hub.config("worker_land", "allow")
    lane_path = hub.create("alpha")
    hub.commit(lane_path, "lane.txt", "one\n")  # unsandboxed: in the shared store
    # main moves on by a land (a move by hand past the hooks would leave main ahead of
    # its last landed tip, the install baseline, and the land below refused main_ahead)
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "m\n")
    assert hub.lane("land", "mover").rc == 0
    main1 = hub.sha() or ""
    body = """
try rebase "$1" rebase -q main
try edit sh -c 'printf "two\\n" > lane2.txt'
try add git add lane2.txt
try commit git commit -q -m "inside"
try sync git lane sync
try land git lane land
"""
    r = _run(hub, tmp_path, body, REAL_GIT)
    assert r.rc == 0, r.stderr
    assert set(_rcs(r.stdout).values()) == {0}, r.stdout
    tip = git(lane_path, "rev-parse", "HEAD").stdout.strip()
    assert hub.sha() == tip
    store = _store(hub, lane_path)  # made inside, into the lane's own store, then imported
    assert (store / tip[:2] / tip[2:]).exists() and _alternates(hub) == []
    assert git(lane_path, "merge-base", "--is-ancestor", main1, tip).returncode == 0
    assert _shared_alone(hub, "show", "main:lane2.txt") == "two\n"
    _shared_alone(hub, "fsck", "--connectivity-only", "--no-dangling")


def test_forged_object_in_lane_store_refuses_land(hub: Repo, tmp_path: Path) -> None:
    """An object whose bytes do not hash to its name, written by hand into the lane's own
    store, never becomes main's: the land is refused (objects_corrupt), main unchanged."""
    lane_path = hub.create("alpha")
    body = r"""
set -e
# the forgery first, under the honest blob's name: git add finds the name taken and keeps
# it (written after the commit, exec's absorber could import the honest blob before it)
B=$(printf 'honest\n' | git hash-object --stdin)
printf 'forged\n' > "$TMPDIR/forged"
loose "$GIT_OBJECT_DIRECTORY/$(echo "$B" | cut -c1-2)/$(echo "$B" | cut -c3-)" blob "$TMPDIR/forged"
printf 'honest\n' > w.txt
git add w.txt
git commit -q -m work
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    # the lane (reading its own store) sees its forgery; nothing of it was absorbed
    store = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(_store(hub, lane_path))}
    assert git(lane_path, "show", "HEAD:w.txt", env=store).stdout == "forged\n"
    main = hub.sha()
    land = hub.lane("--json", "land", "alpha")
    assert land.rc == 1 and land.code == "objects_corrupt", land.stdout + land.stderr
    assert land.json["next"] and "fsck" in land.json["next"][0]
    assert hub.sha() == main
    hub.git("rev-list", "--objects", "main")  # main is whole
    # the lane's tip is in its own store only: the owner's fsck says so, nothing hides it
    fsck = hub.git("fsck", "--connectivity-only", "--no-dangling", check=False)
    assert fsck.returncode != 0 and "refs/heads/lane/alpha" in fsck.stderr
    blob = git(lane_path, "rev-parse", "HEAD:w.txt", env=store).stdout.strip()
    assert hub.git("cat-file", "-e", blob, check=False).returncode != 0  # not even packed
    assert not (hub.common_dir / "objects" / blob[:2] / blob[2:]).exists()
    assert _shared_alone(hub, "cat-file", "-e", main or "") == ""


def test_release_drops_the_alternates_entry(hub: Repo, tmp_path: Path) -> None:
    """An entry an older git-lane wrote for the lane's store goes with the lane."""
    lane_path = hub.create("alpha")
    r = _run(hub, tmp_path, "git commit -q --allow-empty -m inside\n")
    assert r.rc == 0, r.stderr
    store = _store(hub, lane_path)
    (hub.common_dir / "objects" / "info" / "alternates").write_text(f"{store}\n")
    rel = hub.lane("release", "alpha", "--confirm", "yes-discard-lane")
    assert rel.rc == 0, rel.stderr
    assert str(store) not in _alternates(hub) and not store.exists()
    res = hub.git("status")
    assert "alternate" not in res.stderr


def test_lane_commits_outlive_a_pruned_admin_dir(hub: Repo, tmp_path: Path) -> None:
    """The lane's worktree deleted by hand and `git worktree prune` (git's advice, and
    git gc's): the admin dir goes with the lane's store, yet the commits made inside
    stay, because exec copied them, verified, into the shared store when CMD ended."""
    lane_path = hub.create("alpha")
    r = _run(hub, tmp_path, "printf 'kept\\n' > k.txt && git add k.txt && git commit -q -m kept\n")
    assert r.rc == 0, r.stderr
    store = _store(hub, lane_path)
    shutil.rmtree(lane_path)
    hub.git("worktree", "prune")
    assert not store.exists()
    assert hub.git("show", "lane/alpha:k.txt").stdout == "kept\n"
    hub.git("fsck", "--connectivity-only", "--no-dangling")
    # an entry an older git-lane wrote: git warns on every run, until reconcile drops it
    (hub.common_dir / "objects" / "info" / "alternates").write_text(f"{store}\n")
    assert "alternate" in hub.git("log", "-1", "lane/alpha").stderr
    assert hub.lane("reconcile").rc == 0
    assert _alternates(hub) == []
    assert "alternate" not in hub.git("log", "-1", "lane/alpha").stderr


def test_symlinks_in_the_lane_store_are_not_followed(hub: Repo, tmp_path: Path) -> None:
    """CMD cannot put a symlink in its own store (the sandbox grants it no MAKE_SYM
    there); one a plain process (or an older git-lane's sandbox) put there, the next exec
    (outside, as the owner) sets aside instead of writing the store's alternates file
    through it."""
    lane_path = hub.create("alpha")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    body = 'rm -rf "$GIT_OBJECT_DIRECTORY/info" && ln -s "$1" "$GIT_OBJECT_DIRECTORY/info"\n'
    assert _run(hub, tmp_path, body, str(elsewhere)).rc != 0  # the kernel says no
    info = _store(hub, lane_path) / "info"
    shutil.rmtree(info, ignore_errors=True)
    info.symlink_to(elsewhere)
    r = _run(hub, tmp_path, "git commit -q --allow-empty -m again\n")
    assert r.rc == 0, r.stderr
    assert list(elsewhere.iterdir()) == []
    assert hub.git("log", "-1", "--format=%s", "lane/alpha").stdout.strip() == "again"


# CMD keeps two names in its own store, `zz` and `zz-x`, and swaps them without pause
# (renameat2 RENAME_EXCHANGE): one is a directory holding a FIFO named `main`, the other a
# symlink to `<common>/refs/heads` (red team 13I). sanitize used to list `<store>/zz/main`
# while that name was the directory and unlink(2) the path later, through the link by then:
# main's loose ref went. It now unlinks through the fd of the directory it listed.
SWAP = r"""
G=$1 HEADS=$2 SECS=$3
cd "$GIT_OBJECT_DIRECTORY"
mkdir zz && mkfifo zz/main && ln -s "$HEADS" zz-x
python3 - "$SECS" "$HEADS" <<'P' &
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
heads = sys.argv[2]
end = time.time() + float(sys.argv[1])
while time.time() < end:
    if libc.renameat2(-100, b"zz", -100, b"zz-x", 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        # sanitize removed the link (or the FIFO): put back what is missing, go on
        names = [n for n in ("zz", "zz-x") if os.path.lexists(n)]
        if not any(os.path.islink(n) for n in names):
            free = "zz" if "zz" not in names else "zz-x"
            os.symlink(heads, free)
            names.append(free)
        if not any(os.path.isdir(n) and not os.path.islink(n) for n in names):
            free = "zz" if "zz" not in names else "zz-x"
            os.mkdir(free)
        for n in ("zz", "zz-x"):
            if os.path.isdir(n) and not os.path.islink(n) and not os.path.lexists(n + "/main"):
                os.mkfifo(n + "/main")
P
cd - >/dev/null
n=0
while [ $n -lt "$SECS" ]; do  # a commit a second: exec's Absorber sanitizes at each
    n=$((n + 1))
    printf '%s\n' "$n" > n.txt
    $G add n.txt && $G -c core.hooksPath=/dev/null commit -q -m "n $n"
    sleep 1
done
wait
"""


def test_sanitize_never_unlinks_through_a_directory_the_lane_swapped_for_a_link(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (red team 13I: main's ref deleted). A race CMD runs alone, as often as it likes,
    while it runs and the owner looks at the lane (status sanitizes the lane's store):
    sanitize removes what it finds through the fd of the directory it found it in, so a
    directory swapped for a symlink meanwhile leads nowhere."""
    import subprocess
    import sys
    import time

    from enginehelp import events

    lane_path = hub.create("alpha")
    main = hub.sha()
    ref = hub.common_dir / "refs" / "heads" / "main"
    assert ref.is_file()
    script = tmp_path / "swap.sh"
    script.write_text(SWAP)
    secs = 20
    # the sandbox no longer lets CMD make the link or the FIFO (no MAKE_SYM/MAKE_FIFO in
    # its store); a plain process in the lane still can, and sanitize still faces it
    tried = _run(hub, tmp_path, 'ln -s "$1" "$GIT_OBJECT_DIRECTORY/zz-x"\n', str(ref.parent))
    assert tried.rc != 0 and "ermission denied" in tried.stderr, tried.stderr
    env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(_store(hub, lane_path))}
    cmd = subprocess.Popen(
        ["sh", str(script), REAL_GIT, str(ref.parent), str(secs)],
        cwd=lane_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.time() + secs
    while time.time() < end and ref.exists():  # the owner looks at the lane meanwhile
        subprocess.run(
            [sys.executable, "-m", "guard", "status", "alpha"],
            cwd=hub.path,
            capture_output=True,
            timeout=60,
        )
    cmd.communicate(timeout=120)
    removed = [e.get("removed") for e in events(hub, "lane_store_sanitized")]
    assert ref.exists() and hub.sha() == main, f"main's ref was unlinked by sanitize: {removed}"
    assert removed, "sanitize never ran on the lane's store: the race was not exercised"


def test_a_confirmed_release_of_a_sandboxed_lane_says_recovers_that_work(
    hub: Repo, tmp_path: Path
) -> None:
    """A sandboxed lane commits on a detached HEAD and keeps a refs/worktree/* ref: the
    commits are in the lane's own store only (exec absorbs the branch's tip alone). The
    confirmed release imports, verified, each commit its recovers name before the admin
    dir (and the store) goes: run as written, each gets its commit back (red team 14H-B
    F10)."""
    lane_path = hub.create("alpha")
    body = r"""
set -e
g="$GITLANE_REAL_GIT"  # the lane may not detach through the shim: git itself can
"$g" switch -q --detach
printf 'one\n' > w.txt && "$g" add w.txt && "$g" commit -q --no-verify -m one
"$g" update-ref refs/worktree/keep HEAD
printf 'two\n' > w.txt && "$g" commit -q --no-verify -am two
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    head = git(lane_path, "rev-parse", "HEAD").stdout.strip()
    keep = git(lane_path, "rev-parse", "refs/worktree/keep").stdout.strip()
    assert hub.git("cat-file", "-e", head, check=False).returncode != 0  # the lane's only
    r = hub.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert r.json["lost_commits"] == []
    rec = r.json["recover_detached"]
    assert rec == f"git branch lane/alpha-detached {head}"
    assert r.json["recover_worktree_refs"] == [f"git branch lane/alpha-keep {keep}"]
    for cmd in [rec, *r.json["recover_worktree_refs"]]:
        done = subprocess.run(cmd, shell=True, cwd=hub.path, text=True, capture_output=True)
        assert done.returncode == 0, (cmd, done.stderr)
    assert hub.git("show", "lane/alpha-detached:w.txt").stdout == "two\n"
    assert hub.git("show", "lane/alpha-keep:w.txt").stdout == "one\n"
    hub.git("fsck", "--connectivity-only", "--no-dangling")


def test_a_confirmed_release_never_names_a_recover_for_a_forged_commit(
    hub: Repo, tmp_path: Path
) -> None:
    """A detached commit whose objects do not verify (a forged blob in the lane's store)
    is never imported: the confirmed release says it is lost (lost_commits), and prints
    no recover that would fail."""
    lane_path = hub.create("alpha")
    body = r"""
set -e
g="$GITLANE_REAL_GIT"
"$g" switch -q --detach
B=$(printf 'honest\n' | git hash-object --stdin)
printf 'forged\n' > "$TMPDIR/forged"
loose "$GIT_OBJECT_DIRECTORY/$(echo "$B" | cut -c1-2)/$(echo "$B" | cut -c3-)" blob "$TMPDIR/forged"
printf 'honest\n' > w.txt
"$g" add w.txt
"$g" commit -q --no-verify -m work
"""
    r = _run(hub, tmp_path, body)
    assert r.rc == 0, r.stderr
    head = git(lane_path, "rev-parse", "HEAD").stdout.strip()
    r = hub.jlane("release", "alpha", "--confirm", "yes-discard-lane")
    assert (r.rc, r.code) == (0, "released"), r.stdout
    assert r.json["recover_detached"] is None, r.stdout
    assert r.json["lost_commits"] == [head]
    assert hub.git("cat-file", "-e", head, check=False).returncode != 0
