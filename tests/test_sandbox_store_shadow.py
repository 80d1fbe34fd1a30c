"""A sandboxed lane's own object store is never an alternate of the shared store
(guard/objects.py): what a lane plants there cannot stand in for objects written later,
and the lane's commits still reach the owner's git (exec absorbs them, verified, while CMD
runs and when it ends) and every engine command (which names the lane's store per call).
Real kernel, real processes, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandboxhelp import NEEDS_LANDLOCK
from conftest import Repo, git


pytestmark = NEEDS_LANDLOCK


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


FORGE = r"""
set -e
printf 'honest\n' > w.txt
git add w.txt
git commit -q -m work
B=$(git rev-parse HEAD:w.txt)
python3 - "$GIT_OBJECT_DIRECTORY/$(echo "$B" | cut -c1-2)/$(echo "$B" | cut -c3-)" <<'P'
import os, sys, zlib
body = b"forged\n"
with open(sys.argv[1] + ".x", "wb") as fh:
    fh.write(zlib.compress(b"blob %d\0" % len(body) + body))
os.replace(sys.argv[1] + ".x", sys.argv[1])
P
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
