"""A sandboxed lane's own object store is never an alternate of the shared store
(guard/objects.py): what a lane plants there cannot stand in for objects written later,
and the lane's commits still reach the owner's git (exec absorbs them, verified, while CMD
runs and when it ends) and every engine command (which names the lane's store per call).
Real kernel, real processes, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandboxhelp import NEEDS_LANDLOCK
from conftest import LaneRun, Repo, git


pytestmark = NEEDS_LANDLOCK
REAL_GIT = os.path.realpath(shutil.which("git") or "/usr/bin/git")


def _alternates(hub: Repo) -> list[str]:
    f = hub.common_dir / "objects" / "info" / "alternates"
    return f.read_text().splitlines() if f.exists() else []


def _store(lane_path: Path) -> Path:
    gd = Path(git(lane_path, "rev-parse", "--absolute-git-dir").stdout.strip())
    return gd.resolve() / "objects"


# plant a loose blob named for `want` holding `evil` in the lane's own store
PLANT = r"""
import hashlib, os, sys, zlib
want, evil = sys.argv[1].encode(), sys.argv[2].encode()
name = hashlib.sha1(b"blob %d\0" % len(want) + want).hexdigest()
d = os.environ["GIT_OBJECT_DIRECTORY"]
os.makedirs(f"{d}/{name[:2]}", exist_ok=True)
with open(f"{d}/{name[:2]}/{name[2:]}", "wb") as f:
    f.write(zlib.compress(b"blob %d\0" % len(evil) + evil))
"""


def test_hole_lane_store_poisons_objects_the_owner_writes(hub: Repo, tmp_path: Path) -> None:
    """Issue 11 (red team round 2): a sandboxed CMD plants a loose object under the name of
    content the owner writes later; the owner's commit in the hub keeps the owner's bytes,
    because the lane's store is not an alternate of the shared one."""
    lane_path = hub.create("alpha")
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    r = hub.lane(
        "exec", "--sandbox", "alpha", "--", "python3", str(script), "owner work\n", "evil\n"
    )
    assert r.rc == 0, r.stderr
    assert list(_store(lane_path).glob("??/*"))  # the plant is there, in the lane's store
    hub.git("switch", "-q", "-c", "feat")
    (hub.path / "o.txt").write_text("owner work\n")
    hub.git("add", "o.txt")
    hub.git("commit", "-qm", "owner work")
    assert hub.git("show", "feat:o.txt").stdout == "owner work\n"
    assert _alternates(hub) == []
    # and another lane's sandboxed commit of the same content keeps its own bytes too
    beta = hub.create("beta")
    body = tmp_path / "beta.sh"
    body.write_text("printf 'owner work\\n' > b.txt && git add b.txt && git commit -qm b\n")
    assert hub.lane("exec", "--sandbox", "beta", "--", "sh", str(body)).rc == 0
    assert git(beta, "show", "HEAD:b.txt").stdout == "owner work\n"
    assert hub.git("show", "lane/beta:b.txt").stdout == "owner work\n"


def test_older_alternates_entries_are_dropped(hub: Repo, tmp_path: Path) -> None:
    """A repository an older git-lane left with a lane store in the shared alternates is
    repaired: doctor fails on it, and reconcile, install and the next exec drop it (the
    user's own entries stay)."""
    lane_path = hub.create("alpha")
    body = tmp_path / "c.sh"
    body.write_text("git commit -q --allow-empty -m inside\n")
    assert hub.lane("exec", "--sandbox", "alpha", "--", "sh", str(body)).rc == 0
    store = _store(lane_path)
    own = tmp_path / "reference" / "objects"
    own.mkdir(parents=True)
    alt = hub.common_dir / "objects" / "info" / "alternates"

    def old_layout() -> None:
        alt.write_text(f"{store}\n{own}\n")

    old_layout()
    doc = hub.lane("--json", "doctor")
    found = [c for c in doc.json["checks"] if c["name"] == "object store"]
    assert doc.rc == 1 and found and found[0]["status"] == "fail", doc.stdout
    assert found[0]["fix"] == "git lane reconcile"
    assert hub.lane("reconcile").rc == 0
    assert _alternates(hub) == [str(own)]
    doc = hub.lane("--json", "doctor")
    assert [c["status"] for c in doc.json["checks"] if c["name"] == "object store"] == ["ok"]
    old_layout()
    assert hub.lane("install").rc == 0
    assert _alternates(hub) == [str(own)]
    old_layout()
    assert hub.lane("exec", "--sandbox", "alpha", "--", "true").rc == 0
    assert _alternates(hub) == [str(own)]


EXEC = [sys.executable, "-m", "guard", "exec", "--sandbox", "alpha", "--"]
WAIT_FOR = r"""
set -e
printf 'live\n' > live.txt
git add live.txt
git commit -q -m live
touch "$1"
i=0
while [ ! -e "$2" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
"""


def test_commits_reach_the_hub_while_cmd_runs(hub: Repo, tmp_path: Path) -> None:
    """The supervisor absorbs the lane's new commits, verified, within seconds of the
    branch moving, while CMD still runs: the owner's plain git in the hub sees them."""
    lane_path = hub.create("alpha")
    committed, done = lane_path / "committed", lane_path / "done"  # CMD writes only there
    script = tmp_path / "live.sh"
    script.write_text(WAIT_FOR)
    proc = subprocess.Popen(
        [*EXEC, "sh", str(script), str(committed), str(done)],
        cwd=hub.path,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not committed.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert committed.exists()
        seen = ""
        while time.monotonic() < deadline:
            res = hub.git("show", "lane/alpha:live.txt", check=False)
            if res.returncode == 0:
                seen = res.stdout
                break
            time.sleep(0.2)
        assert seen == "live\n"
        assert _alternates(hub) == []  # through the shared store itself, no lane store listed
        assert proc.poll() is None  # CMD still runs
        assert hub.git("fsck", "--connectivity-only", "--no-dangling").returncode == 0
    finally:
        done.touch()
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


# the forgery is in place before `git add` takes the name (git writes no object it finds):
# exec's absorber, polling the branch, can never import the honest blob first
FORGE = r"""
set -e
printf 'honest\n' > w.txt
B=$(git hash-object w.txt)
mkdir -p "$GIT_OBJECT_DIRECTORY/$(echo "$B" | cut -c1-2)"
python3 - "$GIT_OBJECT_DIRECTORY/$(echo "$B" | cut -c1-2)/$(echo "$B" | cut -c3-)" <<'P'
import os, sys, zlib
body = b"forged\n"
with open(sys.argv[1] + ".x", "wb") as fh:
    fh.write(zlib.compress(b"blob %d\0" % len(body) + body))
os.replace(sys.argv[1] + ".x", sys.argv[1])
P
git add w.txt
git commit -q -m work
"""


def test_forged_object_is_never_absorbed(hub: Repo, tmp_path: Path) -> None:
    """A lane store object whose bytes do not hash to its name is not copied into the
    shared store (logged objects_kept_in_lane); the owner's git does not see the forgery,
    git-lane's status still reads the lane (naming its store), and land refuses."""
    lane_path = hub.create("alpha")
    script = tmp_path / "forge.sh"
    script.write_text(FORGE)
    assert hub.lane("exec", "--sandbox", "alpha", "--", "sh", str(script)).rc == 0
    # the lane's commit is in its own store only (nothing of it was absorbed)
    env = {"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(_store(lane_path))}
    blob = git(lane_path, "rev-parse", "HEAD:w.txt", env=env).stdout.strip()
    assert hub.git("cat-file", "-e", blob, check=False).returncode != 0  # neither loose nor packed
    assert hub.git("show", "lane/alpha:w.txt", check=False).stdout != "forged\n"
    events = [json.loads(ln) for ln in (hub.common_dir / "git-lane/events.jsonl").open()]
    assert any(e["kind"] == "objects_kept_in_lane" for e in events)
    st = hub.lane("--json", "status")
    lanes = {ln["key"]: ln for ln in st.json["lanes"]}
    assert st.rc == 0 and lanes["alpha"]["ahead"] == 1, st.stdout
    main = hub.sha()
    land = hub.lane("--json", "land", "alpha")
    assert land.rc == 1 and land.code == "objects_corrupt", land.stdout + land.stderr
    assert hub.sha() == main
    # release cannot establish that the tip is landed (it does not verify): it is unlanded
    rel = hub.lane("--json", "release", "alpha")
    assert rel.rc == 1 and rel.code == "unlanded_work", rel.stdout
    assert "not verified" in rel.json["details"]["commits"][0], rel.stdout
    assert (
        hub.git("rev-parse", "-q", "--verify", "refs/heads/lane/alpha", check=False).returncode == 0
    )
    discard = rel.json["next"][-1]
    assert discard == "git lane release alpha --confirm yes-discard-lane", rel.stdout
    done = subprocess.run(discard, shell=True, cwd=hub.path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# -- every engine command reads a lane whose newest commits are in its own store only ----
# (CMD committed; exec has not absorbed them yet, or they did not verify). Made here by
# committing with CMD's environment while no exec runs, so nothing absorbs them.
def _store_only_commit(hub: Repo, lane_path: Path, name: str, text: str) -> str:
    store = _store(lane_path)
    env = {
        "GIT_OBJECT_DIRECTORY": str(store),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(hub.common_dir / "objects"),
    }
    (lane_path / name).write_text(text)
    git(lane_path, "add", name, env=env)
    git(lane_path, "commit", "-q", "-m", f"inside: {name}", env=env)
    tip = git(lane_path, "rev-parse", "HEAD", env=env).stdout.strip()
    assert hub.git("cat-file", "-e", tip, check=False).returncode != 0  # not in the shared store
    return tip


@pytest.fixture
def stored(hub: Repo, tmp_path: Path) -> tuple[Repo, Path, str]:
    lane_path = hub.create("alpha")
    assert hub.lane("exec", "--sandbox", "alpha", "--", "true").rc == 0  # makes its store
    return hub, lane_path, _store_only_commit(hub, lane_path, "x.txt", "x\n")


def test_status_conflicts_export_checkpoint_read_the_lane_store(
    stored: tuple[Repo, Path, str], tmp_path: Path
) -> None:
    hub, lane_path, tip = stored
    st = hub.lane("--json", "status", "alpha")
    assert st.rc == 0, st.stderr
    assert st.json["lanes"][0]["ahead"] == 1 and st.json["lanes"][0]["tip"] == tip
    (lane_path / "d.txt").write_text("dirty\n")
    for args in (["conflicts"], ["conflicts", "--include-dirty"]):
        c = hub.lane("--json", *args)
        assert c.rc == 0, c.stdout + c.stderr
        assert [p["lanes"] for p in c.json["pairs"]] == [["main", "alpha"]], c.stdout
    mbox = tmp_path / "alpha.mbox"
    ex = hub.lane("--json", "export", "alpha", "-o", str(mbox))
    assert ex.rc == 0, ex.stdout + ex.stderr
    assert "+x" in mbox.read_text() and "+dirty" in mbox.read_text()
    cp = hub.lane("--json", "checkpoint", "alpha", "-m", "save")
    assert cp.rc == 0, cp.stdout + cp.stderr
    assert git(lane_path, "show", "HEAD:d.txt").stdout == "dirty\n"  # the checkpoint: shared
    assert hub.git("rev-parse", "lane/alpha^").stdout.strip() == tip


def test_sync_and_land_read_the_lane_store(stored: tuple[Repo, Path, str]) -> None:
    """sync rebases it; land (its gate's own git included) imports it, verified."""
    hub, _lane_path, _tip = stored
    beta = hub.create("beta")
    hub.commit(beta, "m.txt", "m\n")
    assert hub.lane("land", "beta").rc == 0  # main moves: alpha is stale
    hub.config("gate_command", "git show HEAD:x.txt")
    sy = hub.lane("--json", "sync", "alpha")
    assert sy.rc == 0 and sy.json["state"] == "fresh", sy.stdout + sy.stderr
    land = hub.lane("--json", "land", "alpha")
    assert land.rc == 0, land.stdout + land.stderr
    assert hub.git("show", "main:x.txt").stdout == "x\n"
    hub.git("rev-list", "--objects", "main", "lane/alpha")
    hub.git("gc", "-q")  # (the reflog's pre-rebase commit is in the lane's store only)


def test_queue_batch_imports_before_stacking(stored: tuple[Repo, Path, str]) -> None:
    hub, _lane_path, _tip = stored
    beta = hub.create("beta")
    hub.commit(beta, "y.txt", "y\n")
    for k in ("alpha", "beta"):
        assert hub.lane("ready", k).rc == 0
    q = hub.lane("--json", "queue", "--batch", "2")
    assert q.rc == 0 and sorted(q.json["landed"]) == ["alpha", "beta"], q.stdout + q.stderr
    assert hub.git("show", "main:x.txt").stdout == "x\n"
    hub.git("fsck", "--connectivity-only", "--no-dangling")


def test_release_and_gc_see_the_unlanded_commit(stored: tuple[Repo, Path, str]) -> None:
    """The lost-work checks count it; a confirmed release absorbs it first, so the
    `recover` command it prints still works once the lane's store is gone."""
    hub, _lane_path, _tip = stored
    gc = hub.lane("--json", "gc")
    assert gc.rc == 0 and [k["lane"] for k in gc.json["kept"]] == ["alpha"], gc.stdout
    rel = hub.lane("--json", "release", "alpha")
    assert rel.rc == 1 and rel.code == "unlanded_work", rel.stdout
    rel = hub.lane("--json", "release", "alpha", "--confirm", "yes-discard-lane")
    assert rel.rc == 0, rel.stderr
    assert not _store(hub.path).joinpath("..", "worktrees", "alpha").exists()
    hub.git(*rel.json["recover"].split()[1:])
    assert hub.git("show", "lane/alpha:x.txt").stdout == "x\n"


# -- ancestry is the shared store's: what a lane writes into its own store never makes a
# stale lane look fresh to land (red team 13I). Land imports the tip first, verified, then
# decides from the shared store alone, with no commit-graph (git.shared_store_only).
def _run(hub: Repo, tmp_path: Path, body: str, *args: str, key: str = "alpha") -> LaneRun:
    script = tmp_path / f"script-{key}.sh"
    script.write_text(body)
    return hub.lane("exec", "--sandbox", key, "--", "sh", str(script), *args)


# CMD (lane at the old main M0) commits P (parent M0) and T (parent P), then writes into
# its OWN object store (`$GIT_OBJECT_DIRECTORY/info/commit-graph`, granted: the store is in
# the lane's admin dir) a commit-graph that says P's parent is the current main M1 (by hand:
# the file format is public, git checks no checksum when it loads one). Git
# reads the commit-graph of the first object dir that has one, alternates included
# (commit-graph.c prepare_commit_graph), and a commit found in the graph takes its parents
# from there, not from the object (git 2.39 parses a commit named on the command line from
# its object, so the lie is one commit below the tip). The shared store has no
# commit-graph of its own (git-lane never writes one; `git gc` would).
FORGE_GRAPH = r"""
set -e
G=$1 M1=$2
printf 'alpha\n' > alpha.txt
$G add alpha.txt
$G -c core.hooksPath=/dev/null commit -q -m "alpha work"
P=$($G rev-parse HEAD)
printf 'more\n' >> alpha.txt
$G -c core.hooksPath=/dev/null commit -q -am "alpha more work"
{ $G log --format='%H %T %P %ct' "$M1"; $G log -1 --format="%H %T $M1 %ct" "$P"; } \
    > "$TMPDIR/commits"
python3 - "$TMPDIR/commits" "$GIT_OBJECT_DIRECTORY/info/commit-graph" <<'P'
import hashlib, struct, sys
rows = {}
for ln in open(sys.argv[1]):
    f = ln.split()
    rows[f[0]] = (f[1], f[2:-1], int(f[-1]))
oids = sorted(rows)
idx = {o: i for i, o in enumerate(oids)}
gen = {}
def g(o):
    if o not in gen:
        gen[o] = 1 + max((g(p) for p in rows[o][1]), default=0)
    return gen[o]
fan = [0] * 256
for o in oids:
    fan[int(o[:2], 16)] += 1
acc, oidf = 0, b""
for n in fan:
    acc += n
    oidf += struct.pack(">I", acc)
oidl = b"".join(bytes.fromhex(o) for o in oids)
cdat = b""
for o in oids:
    tree, parents, date = rows[o]
    ps = [idx[p] for p in parents] + [0x70000000] * 2
    cdat += bytes.fromhex(tree) + struct.pack(">II", ps[0], ps[1])
    cdat += struct.pack(">II", (g(o) << 2) | (date >> 32), date & 0xFFFFFFFF)
chunks = [(b"OIDF", oidf), (b"OIDL", oidl), (b"CDAT", cdat)]
out = b"CGPH" + bytes([1, 1, len(chunks), 0])
off = 8 + 12 * (len(chunks) + 1)
for cid, data in chunks:
    out += cid + struct.pack(">Q", off)
    off += len(data)
out += b"\0\0\0\0" + struct.pack(">Q", off)
for _, data in chunks:
    out += data
out += hashlib.sha1(out).digest()
open(sys.argv[2], "wb").write(out)
P
"""


def _says_stale(hub: Repo) -> None:
    """The owner's status reads the absorbed lane from the shared store: stale, 1 behind."""
    st = hub.jlane("status", "alpha")
    view = st.json["lanes"][0]
    assert (view["fresh"], view["behind"]) == (False, 1), st.stdout


def test_a_commit_graph_in_the_lane_store_never_lets_a_stale_lane_land(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (main moved backwards, landed work lost from main). A sandboxed lane plants a
    commit-graph in its own object store. Every engine git call that reads the lane's
    commits names that store (GIT_ALTERNATE_OBJECT_DIRECTORIES), so the owner's `git lane
    land` G3 (`merge-base main tip`) reads the lane's forged graph: the stale lane (its tip
    does not contain the last landed commit) is judged a fast-forward and main is moved
    onto it, dropping what was landed. The same class as the replacement refs and grafts
    base_env already shuts out (GIT_NO_REPLACE_OBJECTS, GIT_GRAFT_FILE), by another door."""
    alpha = hub.create("alpha")
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "landed by mover\n")
    assert hub.lane("land", "mover").rc == 0
    m1 = hub.sha() or ""
    assert (hub.path / "m.txt").exists()

    r = _run(hub, tmp_path, FORGE_GRAPH, REAL_GIT, m1)
    assert r.rc == 0, r.stdout + r.stderr
    tip = git(alpha, "rev-parse", "HEAD").stdout.strip()
    # the truth: the lane's tip does not contain the landed commit
    assert git(hub.path, "merge-base", "--is-ancestor", m1, tip, check=False).returncode == 1
    _says_stale(hub)

    land = hub.jlane("land", "alpha")
    # a stale lane must be refused (stale_lane), and main must still hold what was landed
    assert hub.sha() == m1, f"main moved onto a lane that drops a landed commit: {land.stdout}"
    assert (hub.path / "m.txt").exists()  # the hub's checkout of it, too
    assert land.rc != 0 and land.code == "stale_lane", land.stdout + land.stderr


# The same lie without a commit-graph: git looks an object up in every pack (the shared
# store's first, then the alternates') before any loose object, so a pack in the lane's
# store shadows every LOOSE object of the shared store, for every engine call that names
# the lane's store. P, the lane's first commit, was made by the owner outside the sandbox
# (loose in the shared store); CMD commits T on P and writes into its own store a pack (and
# .idx, by hand) holding bytes under P's name that say P's parent is M1. git re-hashes an
# object named on the command line (parse_object), not a parent it walks to.
FORGE_PACK = r"""
set -e
G=$1 M1=$2
printf 'more\n' >> alpha.txt
$G -c core.hooksPath=/dev/null commit -q -am "alpha more work"
P=$($G rev-parse HEAD~1)
{ echo "tree $($G rev-parse "$P^{tree}")"; echo "parent $M1"; $G cat-file commit "$P" | sed -n '/^author/,$p'; } > "$TMPDIR/forged"
python3 - "$GIT_OBJECT_DIRECTORY/pack" "$P" commit "$TMPDIR/forged" <<'PY'
import hashlib, struct, sys, zlib, os
out, name, kind, src = sys.argv[1:5]
body = open(src, "rb").read()
t = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}[kind]
n = len(body)
hdr = bytearray()
c = (t << 4) | (n & 15)
n >>= 4
while n:
    hdr.append(c | 0x80)
    c = n & 0x7F
    n >>= 7
hdr.append(c)
entry = bytes(hdr) + zlib.compress(body)
pack = b"PACK" + struct.pack(">II", 2, 1) + entry
pack += hashlib.sha1(pack).digest()
psum = pack[-20:]
oid = bytes.fromhex(name)
fan = b"".join(struct.pack(">I", 1 if i >= oid[0] else 0) for i in range(256))
idx = b"\377tOc" + struct.pack(">I", 2) + fan + oid + struct.pack(">I", zlib.crc32(entry)) + struct.pack(">I", 12)
idx += psum
idx += hashlib.sha1(idx).digest()
base = os.path.join(out, "pack-" + psum.hex())
open(base + ".pack", "wb").write(pack)
open(base + ".idx", "wb").write(idx)
print(base)
PY
"""


def test_a_pack_in_the_lane_store_never_lets_a_stale_lane_land(hub: Repo, tmp_path: Path) -> None:
    """HIGH (main moved backwards, landed work lost from main), as the commit-graph test
    above, by a forged packed object shadowing a loose commit of the shared store: a fix
    that only drops commit-graph files from the lane's store does not close it."""
    alpha = hub.create("alpha")
    hub.commit(alpha, "alpha.txt", "alpha\n")  # P: the owner's, loose in the shared store
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "landed by mover\n")
    assert hub.lane("land", "mover").rc == 0
    m1 = hub.sha() or ""

    r = _run(hub, tmp_path, FORGE_PACK, REAL_GIT, m1)
    assert r.rc == 0, r.stdout + r.stderr
    tip = git(alpha, "rev-parse", "HEAD").stdout.strip()
    assert git(hub.path, "merge-base", "--is-ancestor", m1, tip, check=False).returncode == 1
    _says_stale(hub)

    land = hub.jlane("land", "alpha")
    assert hub.sha() == m1, f"main moved onto a lane that drops a landed commit: {land.stdout}"
    assert (hub.path / "m.txt").exists()
    assert land.rc != 0 and land.code == "stale_lane", land.stdout + land.stderr


def test_a_commit_graph_never_lets_cmd_land_its_stale_lane_through_the_socket(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH, as the commit-graph test above, with nobody but CMD: under `worker_land =
    "allow"` the supervisor's socket land (unconfined, the lane's store named) is fooled
    the same way, so a sandboxed worker drops main's landed commits on its own."""
    hub.config("worker_land", "allow")
    alpha = hub.create("alpha")
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "landed by mover\n")
    assert hub.lane("land", "mover").rc == 0
    m1 = hub.sha() or ""
    r = _run(
        hub, tmp_path, FORGE_GRAPH + 'git lane land || echo "socket land refused"\n', REAL_GIT, m1
    )
    tip = git(alpha, "rev-parse", "HEAD").stdout.strip()
    assert git(hub.path, "merge-base", "--is-ancestor", m1, tip, check=False).returncode == 1
    assert hub.sha() == m1, (
        f"CMD's socket land moved main onto its stale lane: {r.stdout}{r.stderr}"
    )


def test_a_commit_graph_never_lets_the_queue_land_a_stale_lane_unsynced(
    hub: Repo, tmp_path: Path
) -> None:
    """The queue asks whether a lane must be synced after importing it, from the shared
    store alone: the forged graph's stale lane is rebased onto main, then landed, and main
    keeps the landed commit (before: judged fresh, not synced, and refused stale_lane by
    land; before that fix, landed over the landed commit)."""
    alpha = hub.create("alpha")
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "landed by mover\n")
    assert hub.lane("land", "mover").rc == 0
    m1 = hub.sha() or ""
    r = _run(hub, tmp_path, FORGE_GRAPH, REAL_GIT, m1)
    assert r.rc == 0, r.stdout + r.stderr
    assert hub.jlane("ready", "alpha").rc == 0
    q = hub.jlane("queue", "alpha")
    assert q.json["landed"] == ["alpha"], q.stdout + q.stderr
    main = hub.sha() or ""
    assert git(hub.path, "merge-base", "--is-ancestor", m1, main, check=False).returncode == 0
    assert (hub.path / "m.txt").exists() and (hub.path / "alpha.txt").exists()
    del alpha


# -- release and gc decide "landed?" the same way (red team 13J): the lane's tip imported
# into the shared store first (verified), then asked of that store alone, no commit-graph.
# CMD writes into its OWN object store a commit-graph (made as FORGE_GRAPH above makes it)
# that says: M0 (main's first commit, in the shared store) has the lane's commit P as its
# parent, and P is a root. Every commit of the lane then looks reachable from main.
# argv: G, then "oid:parent,parent" rows (an empty parent list for a root)
FORGE_GRAPH_ROWS = r"""
set -e
G=$1; shift
: > "$TMPDIR/commits"
for row in "$@"; do
    oid=${row%%:*}; ps=$(printf '%s' "${row#*:}" | tr ',' ' ')
    $G log -1 --format="%H %T $ps %ct" "$oid" >> "$TMPDIR/commits"
done
python3 - "$TMPDIR/commits" "$GIT_OBJECT_DIRECTORY/info/commit-graph" <<'P'
import hashlib, struct, sys
rows = {}
for ln in open(sys.argv[1]):
    f = ln.split()
    rows[f[0]] = (f[1], f[2:-1], int(f[-1]))
oids = sorted(rows)
idx = {o: i for i, o in enumerate(oids)}
gen = {}
def g(o):
    if o not in gen:
        gen[o] = 1 + max((g(p) for p in rows[o][1]), default=0)
    return gen[o]
fan = [0] * 256
for o in oids:
    fan[int(o[:2], 16)] += 1
acc, oidf = 0, b""
for n in fan:
    acc += n
    oidf += struct.pack(">I", acc)
oidl = b"".join(bytes.fromhex(o) for o in oids)
cdat = b""
for o in oids:
    tree, parents, date = rows[o]
    ps = [idx[p] for p in parents] + [0x70000000] * 2
    cdat += bytes.fromhex(tree) + struct.pack(">II", ps[0], ps[1])
    cdat += struct.pack(">II", (g(o) << 2) | (date >> 32), date & 0xFFFFFFFF)
chunks = [(b"OIDF", oidf), (b"OIDL", oidl), (b"CDAT", cdat)]
out = b"CGPH" + bytes([1, 1, len(chunks), 0])
off = 8 + 12 * (len(chunks) + 1)
for cid, data in chunks:
    out += cid + struct.pack(">Q", off)
    off += len(data)
out += b"\0\0\0\0" + struct.pack(">Q", off)
for _, data in chunks:
    out += data
out += hashlib.sha1(out).digest()
open(sys.argv[2], "wb").write(out)
P
"""


def test_a_commit_graph_in_the_lane_store_never_lets_release_drop_unlanded_work(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (work lost). The owner committed P in lane alpha (not landed). A sandboxed CMD
    in alpha writes a commit-graph into its own store saying main's base M0 has P as its
    parent. `git lane release alpha` (no --confirm) decided "landed?" with the lane's
    store named and its commit-graph read: it found no unlanded commit, G11 did not refuse
    unlanded_work, and the branch was deleted with no `recover` printed. Now
    release.branch_unlanded imports the tip first and asks the shared store alone."""
    alpha = hub.create("alpha")
    m0 = hub.sha() or ""
    p = hub.commit(alpha, "owner.txt", "the owner's unlanded work\n")
    mover = hub.create("mover")
    hub.commit(mover, "m.txt", "landed by mover\n")
    assert hub.lane("land", "mover").rc == 0
    m1 = hub.sha() or ""
    assert git(hub.path, "merge-base", "--is-ancestor", p, m1, check=False).returncode == 1
    r = _run(hub, tmp_path, FORGE_GRAPH_ROWS, REAL_GIT, f"{m0}:{p}", f"{p}:")
    assert r.rc == 0, r.stdout + r.stderr
    rel = hub.jlane("release", "alpha")
    assert (
        hub.git("rev-parse", "-q", "--verify", "refs/heads/lane/alpha", check=False).returncode == 0
    ), f"release deleted lane/alpha holding unlanded {p[:12]}: {rel.stdout}"
    assert rel.rc == 1 and rel.code == "unlanded_work", rel.stdout
    assert [c.split()[0] for c in rel.json["details"]["commits"]] == [
        hub.git("rev-parse", "--short", p).stdout.strip()
    ], rel.stdout


def test_a_commit_graph_in_the_lane_store_never_lets_gc_release_unlanded_work(
    hub: Repo, tmp_path: Path
) -> None:
    """HIGH (work lost), the release finding above through the owner's routine `git lane
    gc`: lane alpha landed once, the owner then committed P in it; the sandboxed CMD's
    forged commit-graph made gc._look (release.inspect, and is_ancestor(tip, landed)
    with the lane's store named) judge it landed, and gc released it, branch and all."""
    alpha = hub.create("alpha")
    hub.commit(alpha, "first.txt", "landed\n")
    assert hub.lane("land", "alpha").rc == 0
    l1 = hub.sha() or ""
    m0 = hub.git("rev-parse", f"{l1}^").stdout.strip()
    p = hub.commit(alpha, "owner.txt", "the owner's unlanded work\n")
    r = _run(hub, tmp_path, FORGE_GRAPH_ROWS, REAL_GIT, f"{m0}:{p}", f"{p}:")
    assert r.rc == 0, r.stdout + r.stderr
    gc = hub.jlane("gc")
    assert (
        hub.git("rev-parse", "-q", "--verify", "refs/heads/lane/alpha", check=False).returncode == 0
    ), f"gc released lane/alpha holding unlanded {p[:12]}: {gc.stdout}"
    assert [k["lane"] for k in gc.json["kept"]] == ["alpha"], gc.stdout
