"""Issue 12's red-team findings on the queue and the syncs, as tests of the safe outcome:
nothing a merge commit of a lane holds is dropped, no ignored file of a lane is
overwritten, no lane is synced or landed under an owner or after its mark was withdrawn
while the queue ran, a lane left moved is said to be, and a batch records honestly
which commit its gate judged."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Repo, git
from enginehelp import events, head, spawn_lane, wait_for


@pytest.fixture(autouse=True)
def hooked(repo: Repo) -> None:
    r = repo.lane("install")
    assert r.rc == 0, r.stderr
    repo.config("max_lanes", "10")


def sh(repo: Repo, cmds: list[str]) -> None:
    """Run a refusal's `next` exactly as written (the part before a `  #` comment)."""
    for cmd in cmds:
        cmd = cmd.split("  #")[0]
        res = subprocess.run(cmd, shell=True, cwd=repo.path, capture_output=True, text=True)
        assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"


def lane_with_evil_merge(repo: Repo, key: str) -> Path:
    """A lane whose merge commit itself adds a file (an "evil merge": a change made while
    merging, e.g. a conflict fix-up)."""
    path = repo.create(key)
    (path / f"side-{key}.txt").write_text("side\n")
    git(path, "add", f"side-{key}.txt")
    tree = git(path, "write-tree").stdout.strip()
    side = git(path, "commit-tree", tree, "-p", "HEAD", "-m", "side").stdout.strip()
    git(path, "rm", "-q", "--cached", f"side-{key}.txt")
    (path / f"side-{key}.txt").unlink()
    git(path, "branch", f"side-{key}", side)
    repo.commit(path, f"{key}.txt", f"{key}\n")
    git(path, "merge", "-q", "--no-commit", f"side-{key}")
    (path / "evil.txt").write_text("only in the merge commit\n")
    git(path, "add", "evil.txt")
    git(path, "commit", "-q", "-m", "merge side, with a fix-up of its own")
    git(path, "branch", "-q", "-D", f"side-{key}")
    assert len(git(path, "rev-list", "--merges", "HEAD").stdout.split()) == 1
    return path


def move_main(repo: Repo) -> None:
    """main moves under the lanes: another lane lands (gate off for it alone)."""
    gate = json.loads(repo.lane("config", "get", "gate", "--json").stdout or "{}")
    repo.config("gate", "off")
    p = repo.create("mover")
    repo.commit(p, "main.txt", "main moved\n")
    r = repo.jlane("land", "mover")
    assert r.rc == 0, r.stderr
    assert repo.lane("release", "mover").rc == 0
    repo.config("gate", str(gate.get("value", "on")))


def on_main(repo: Repo, name: str) -> bool:
    return name in git(repo.path, "ls-tree", "--name-only", "main").stdout.split()


def skipped(res: dict[str, object], key: str) -> dict[str, object]:
    hits = [s for s in res["skipped"] if s["lane"] == key]  # type: ignore[attr-defined]
    assert len(hits) == 1, res["skipped"]
    return hits[0]  # type: ignore[no-any-return]


# -- HIGH 1: merges ------------------------------------------------------------------------
@pytest.mark.parametrize("batch", ["1", "2"])
def test_queue_never_rebases_away_a_merge_commit_of_the_lane(repo: Repo, batch: str) -> None:
    repo.config("gate_command", "true")
    a = lane_with_evil_merge(repo, "a")
    tip_a = head(a)
    b = repo.create("b")
    repo.commit(b, "b.txt", "b\n")
    move_main(repo)
    for k in ("a", "b"):
        assert repo.lane("ready", k).rc == 0
    r = repo.jlane("queue", "a", "b", "--batch", batch)
    assert r.rc == 0, r.stderr
    assert r.json["landed"] == ["b"], r.json
    s = skipped(r.json, "a")
    assert s["code"] == "lane_has_merges", s
    assert head(a) == tip_a and (a / "evil.txt").exists()
    # the `next` is the way: main merged into the lane, which then lands as it is
    sh(repo, s["next"])  # type: ignore[arg-type]
    assert on_main(repo, "evil.txt") and on_main(repo, "a.txt") and on_main(repo, "b.txt")


def test_auto_sync_leaves_a_lane_with_a_merge_commit_untouched(repo: Repo) -> None:
    repo.config("gate", "off")
    repo.config("auto_sync", "true")
    a = lane_with_evil_merge(repo, "a")
    tip_a = head(a)
    b = repo.create("b")
    repo.commit(b, "b.txt", "b\n")
    r = repo.jlane("land", "b")
    assert r.rc == 0, r.stderr
    left = {x["lane"]: x for x in r.json["auto_sync"]["left"]}
    assert left["a"]["code"] == "lane_has_merges", r.json["auto_sync"]
    assert head(a) == tip_a and (a / "evil.txt").exists()


def test_sync_refuses_a_lane_with_a_merge_commit(repo: Repo) -> None:
    a = lane_with_evil_merge(repo, "a")
    tip_a = head(a)
    move_main(repo)
    r = repo.jlane("sync", "a")
    assert r.rc == 1 and r.code == "lane_has_merges", r.stdout
    assert head(a) == tip_a and (a / "evil.txt").exists()
    sh(repo, r.json["next"])  # merge main in: the lane is fresh, nothing replayed
    assert (a / "evil.txt").exists() and (a / "main.txt").exists()
    assert repo.jlane("sync", "a").rc == 0


# -- HIGH 2: ignored files -----------------------------------------------------------------
def lanes_with_ignored_file(repo: Repo) -> Path:
    """Lane x tracks config.local; lane y holds its own ignored config.local."""
    (repo.common_dir / "info").mkdir(exist_ok=True)
    (repo.common_dir / "info" / "exclude").write_text("*.local\n")
    x = repo.create("x")
    (x / "config.local").write_text("tracked by x\n")
    git(x, "add", "-f", "config.local")
    git(x, "commit", "-q", "-m", "x tracks config.local")
    y = repo.create("y")
    (y / "config.local").write_text("y's own local secret\n")
    repo.commit(y, "y.txt", "y\n")
    return y


@pytest.mark.parametrize("batch", ["1", "2"])
def test_queue_never_overwrites_an_ignored_file_of_a_lane(repo: Repo, batch: str) -> None:
    repo.config("gate_command", "true")
    y = lanes_with_ignored_file(repo)
    tip_y = head(y)
    for k in ("x", "y"):
        assert repo.lane("ready", k).rc == 0
    r = repo.jlane("queue", "x", "y", "--batch", batch)
    assert r.rc == 0, r.stderr
    assert r.json["landed"] == ["x"], r.json
    s = skipped(r.json, "y")
    assert s["code"] == "ignored_in_the_way", s
    assert (y / "config.local").read_text() == "y's own local secret\n"
    assert head(y) == tip_y
    sh(repo, s["next"])  # type: ignore[arg-type]  # moved aside, kept; then the queue lands y
    assert on_main(repo, "y.txt")
    (kept,) = (repo.state_dir / "kept").glob("y.*/config.local")
    assert kept.read_text() == "y's own local secret\n"


@pytest.mark.parametrize("batch", ["1", "2"])
def test_queue_never_overwrites_an_ignored_file_of_the_hub(
    repo: Repo, batch: str, gitlane_on_path: Path
) -> None:
    """The queue's G6 (before its one compare-and-swap) judges the hub's ignored files
    as land does: one where the batch's tip tracks a file is never overwritten by the
    hub's update; the lanes are skipped, main stays, the `next` keeps it and lands."""
    (repo.common_dir / "info").mkdir(exist_ok=True)
    (repo.common_dir / "info" / "exclude").write_text("*.local\n")
    repo.config("gate_command", "true")
    x = repo.create("x")
    (x / "config.local").write_text("tracked by x\n")
    git(x, "add", "-f", "config.local")
    git(x, "commit", "-q", "-m", "x tracks config.local")
    (repo.path / "config.local").write_text("the owner's own\n")
    before = repo.sha()
    assert repo.lane("ready", "x").rc == 0
    r = repo.jlane("queue", "x", "--batch", batch)
    assert r.rc in (0, 1) and r.json["landed"] == [], r.stdout
    s = skipped(r.json, "x")
    assert s["code"] == "ignored_in_the_way", s
    assert repo.sha() == before
    assert (repo.path / "config.local").read_text() == "the owner's own\n"
    sh(repo, s["next"])  # type: ignore[arg-type]
    assert repo.sha() == head(x)
    (kept,) = (repo.state_dir / "kept").rglob("config.local")
    assert kept.read_text() == "the owner's own\n"


def test_batch_queue_lands_the_lane_no_ignored_file_is_in_the_way_of(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """The batch's G6 judged the hub's ignored files for the whole stack and skipped every
    lane with one lane's refusal: q1, which tracks nothing where the hub has an ignored
    file, was skipped with q2's next. Only q2 is skipped now (its own next, which lands
    it once its file is kept aside); q1 goes round again and lands (red team 13L #9)."""
    (repo.common_dir / "info").mkdir(exist_ok=True)
    with open(repo.common_dir / "info" / "exclude", "a") as f:
        f.write("build.log\n")
    repo.config("gate_command", "true")
    (repo.path / "build.log").write_text("the owner's build log\n")
    q1 = repo.create("q1")
    repo.commit(q1, "q1.txt", "q1\n")
    q2 = repo.create("q2")
    (q2 / "build.log").write_text("lane\n")
    git(q2, "add", "-f", "build.log")
    git(q2, "commit", "-q", "-m", "q2")
    for k in ("q1", "q2"):
        assert repo.lane("ready", k).rc == 0
    r = repo.jlane("queue", "q1", "q2", "--batch", "2")
    assert r.json["landed"] == ["q1"], r.stdout
    assert on_main(repo, "q1.txt")
    s = skipped(r.json, "q2")
    assert s["code"] == "ignored_in_the_way" and s["next"][-1] == "git lane queue q2", s
    assert (repo.path / "build.log").read_text() == "the owner's build log\n"
    sh(repo, s["next"])  # type: ignore[arg-type]
    assert repo.sha() == head(q2)


def test_sync_never_overwrites_an_ignored_file_of_a_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    y = lanes_with_ignored_file(repo)
    assert repo.jlane("land", "x").rc == 0
    r = repo.jlane("sync", "y")
    assert r.rc == 1 and r.code == "ignored_in_the_way", r.stdout
    assert (y / "config.local").read_text() == "y's own local secret\n"
    sh(repo, r.json["next"])
    assert (y / "config.local").read_text() == "tracked by x\n"


def test_sync_onto_a_main_that_made_a_tracked_file_a_directory_is_no_ignored_file(
    repo: Repo,
) -> None:
    """main replaced the file README.md by a directory; lane beta tracks it as
    the base had it and never touched it: git's rebase takes main's side. The ignored
    check took a.txt, a file the tip tracks, for an ignored file in the way of a.txt/x
    (ignored_in_the_way, its next moved the committed file out): a parent the tip tracks
    as a file is git's to handle (red team 13L #6)."""
    repo.config("gate", "off")
    beta = repo.create("beta")
    repo.commit(beta, "b.txt", "beta\n")
    alpha = repo.create("alpha")
    git(alpha, "rm", "-q", "README.md")
    (alpha / "README.md").mkdir()
    repo.commit(alpha, "README.md/x", "now a directory\n")
    assert repo.jlane("land", "alpha").rc == 0
    r = repo.jlane("sync", "beta")
    assert r.rc == 0 and r.code == "synced", r.stdout
    assert (beta / "README.md" / "x").read_text() == "now a directory\n"
    assert git(beta, "status", "--porcelain").stdout == ""


def _ignored_sync_next(hub: Repo, key: str) -> list[str]:
    r = hub.jlane("sync", key)
    assert r.rc == 1 and r.code == "ignored_in_the_way", r.stdout
    return list(r.json["next"])


def test_a_second_ignored_in_the_way_next_never_overwrites_what_the_first_kept(
    repo: Repo, gitlane_on_path: Path
) -> None:
    """check_ignored moved the lane's ignored files to `<state>/kept/<key>/<path>`, the
    same place every time: the second refusal's next for the same path of the same lane
    moved the new file over the one the first next kept. Each refusal has a directory of
    its own (red team 13L #10)."""
    hub = repo
    hub.config("gate", "off")
    (hub.common_dir / "info").mkdir(exist_ok=True)
    with open(hub.common_dir / "info" / "exclude", "a") as f:
        f.write("cfg.env\n")
    beta = hub.create("beta")
    hub.commit(beta, "b.txt", "beta\n")
    (beta / "cfg.env").write_text("first secret\n")

    def land(key: str, change: Callable[[Path], object]) -> None:
        p = hub.create(key)
        change(p)
        git(p, "commit", "-q", "-m", key)
        assert hub.jlane("land", key).rc == 0

    def add(p: Path) -> None:
        (p / "cfg.env").write_text("main's\n")
        git(p, "add", "-f", "cfg.env")

    land("a1", add)
    sh(hub, _ignored_sync_next(hub, "beta"))
    land("a2", lambda p: git(p, "rm", "-q", "cfg.env"))
    assert hub.jlane("sync", "beta").rc == 0
    (beta / "cfg.env").write_text("second secret\n")
    land("a3", add)
    sh(hub, _ignored_sync_next(hub, "beta"))
    kept = sorted(p.read_text() for p in (hub.state_dir / "kept").rglob("cfg.env"))
    assert kept == ["first secret\n", "second secret\n"], kept


# -- HIGH 3 / MED 4: what changed while the queue ran ---------------------------------------
def test_queue_does_not_land_a_lane_whose_ready_mark_was_withdrawn_while_it_ran(
    repo: Repo, tmp_path: Path
) -> None:
    flag = tmp_path / "gate-started"
    repo.config(
        "gate_command",
        f'if [ "$GITLANE_GATE_LANE" = a ]; then touch {flag}; sleep 3; fi; true',
    )
    for k in ("a", "b"):
        p = repo.create(k)
        repo.commit(p, f"{k}.txt", f"{k}\n")
        assert repo.lane("ready", k).rc == 0
    q = spawn_lane("queue", "a", "b", "--json", cwd=repo.path)
    wait_for(flag.exists, what="lane a's gate")
    assert repo.lane("ready", "b", "--unset").rc == 0
    out, _err = q.communicate(timeout=60)
    res = json.loads(out)
    assert res["landed"] == ["a"], res
    assert skipped(res, "b")["code"] == "not_ready"


@pytest.mark.parametrize("batch", ["1", "2"])
def test_queue_does_not_touch_a_lane_under_an_owner_that_started_while_it_ran(
    repo: Repo, tmp_path: Path, batch: str
) -> None:
    flag = tmp_path / "gate-started"
    # one by one: a's gate is the wait; a batch: its one gate run (the stack's top is b)
    repo.config("gate_command", f"if [ ! -e {flag} ]; then touch {flag}; sleep 4; fi; true")
    paths = {}
    for k in ("a", "b"):
        paths[k] = repo.create(k)
        repo.commit(paths[k], f"{k}.txt", f"{k}\n")
        assert repo.lane("ready", k).rc == 0
    tip_b = head(paths["b"])
    q = spawn_lane("queue", "a", "b", "--batch", batch, "--json", cwd=repo.path)
    wait_for(flag.exists, what="the gate")
    agent = spawn_lane("exec", "b", "--", "sleep", "30", cwd=repo.path)
    try:
        wait_for(
            lambda: bool(json.loads(repo.jlane("status", "b").stdout)["lanes"][0]["owner_alive"]),
            what="the exec to own lane b",
        )
        out, _err = q.communicate(timeout=60)
    finally:
        agent.kill()
        agent.communicate()
    res = json.loads(out)
    assert res["landed"] == ["a"], res
    assert skipped(res, "b")["code"] == "lane_owner_conflict"
    assert head(paths["b"]) == tip_b


# -- MED 5: a lane left moved is said to be -------------------------------------------------
def test_queue_says_so_when_a_synced_lane_cannot_be_put_back(repo: Repo) -> None:
    repo.config("gate_command", "echo built >> main.txt; exit 1")
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    assert repo.lane("ready", "a").rc == 0
    move_main(repo)
    old = head(p)
    r = repo.jlane("queue", "a")
    assert r.rc == 0, r.stderr
    s = skipped(r.json, "a")
    assert s["code"] == "gate_failed"
    assert head(p) != old  # the gate's change to main.txt is in the way of reset --keep
    msg = str(s["message"])
    assert "could not be put back" in msg and old[:12] in msg, msg
    assert any("could not be put back" in w for w in r.json["warnings"]), r.json["warnings"]
    sh(repo, [msg.split("To go back: ")[1]])  # the exact command, as said
    assert head(p) == old
    assert "built" in git(p, "stash", "show", "-p", "stash@{0}").stdout  # nothing lost


# -- MED 6: a batch says what its gate judged -----------------------------------------------
def test_a_batch_lane_below_the_top_is_recorded_as_not_gated_at_its_own_tip(repo: Repo) -> None:
    repo.config("gate_command", "test ! -f broken.flag || test -f fix.txt")
    a = repo.create("a")
    repo.commit(a, "broken.flag", "1\n")
    c = repo.create("c")
    repo.commit(c, "fix.txt", "fix\n")
    for k in ("a", "c"):
        assert repo.lane("ready", k).rc == 0
    r = repo.jlane("queue", "a", "c", "--batch", "2")
    assert r.rc == 0 and r.json["landed"] == ["a", "c"], r.json
    top = repo.sha()
    ev = {e["lane"]: e for e in events(repo, "land") if e.get("batch")}
    assert ev["a"]["gate"]["own_tip_gated"] is False and ev["a"]["gate"]["at"] == top
    assert ev["c"]["gate"]["own_tip_gated"] is True and ev["c"]["gate"]["at"] == top
    lanes = {x["lane"]: x for x in r.json["lanes"]}
    assert lanes["a"]["gate"]["own_tip_gated"] is False
    assert lanes["c"]["gate"]["own_tip_gated"] is True


def test_land_sync_refuses_a_lane_with_a_merge_commit(repo: Repo) -> None:
    repo.config("gate", "off")
    a = lane_with_evil_merge(repo, "a")
    tip_a = head(a)
    move_main(repo)
    r = repo.jlane("land", "a", "--sync")
    assert r.rc == 1 and r.code == "lane_has_merges", r.stdout
    assert head(a) == tip_a
    sh(repo, r.json["next"])  # merge main in, then land it as it is
    assert on_main(repo, "evil.txt") and on_main(repo, "main.txt")


# -- LOW 7: a queue killed while its gate ran ------------------------------------------------
def test_reconcile_says_a_lane_was_synced_since_its_ready_mark(repo: Repo, tmp_path: Path) -> None:
    flag = tmp_path / "gate-started"
    repo.config("gate_command", f"touch {flag}; sleep 5")
    p = repo.create("a")
    repo.commit(p, "a.txt", "a\n")
    assert repo.lane("ready", "a").rc == 0
    old = head(p)
    move_main(repo)
    q = spawn_lane("queue", "a", "--json", cwd=repo.path)
    wait_for(flag.exists, what="the gate")
    q.kill()  # SIGKILL: no cleanup at all
    q.communicate()
    assert head(p) != old  # the queue had synced it
    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    said = [w for w in r.json.get("warnings", []) if "rebased since it was marked ready" in w]
    assert said and old[:12] in said[0], r.json
    sh(repo, [said[0].split("`")[3]])  # the way back, as said
    assert head(p) == old
