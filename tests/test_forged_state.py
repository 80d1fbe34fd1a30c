"""git-lane's recovery path never takes plain state files' word to move main forward or to
write a landed ref (red team 17 hooks, finding 4). epoch.json, events.jsonl and landing.json are
plain files any unconfined process of the owner's uid may write (a lane under `git lane
exec` without --sandbox: bypass-matrix rows `epoch_edit`, `events_forged`); only the landed
refs (refs/git-lane/landed/*, which the reference-transaction hook lets only land's own
transaction write) say where a land left main. So restore-main moves main only to the
newest landed ref (or the baseline ref), land measures main against the landed refs, and
reconcile writes a landed ref only at main or at a commit of main's history that the
landed refs around it descend from. Real repositories, real hooks, real git processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Repo, git

LANDED = "refs/git-lane/landed/"
BASELINE = "refs/git-lane/baseline"


def ref(epoch: int) -> str:
    return f"{LANDED}{epoch:010d}"


def landed_refs(repo: Repo) -> dict[str, str]:
    out = git(repo.path, "for-each-ref", "--format=%(refname) %(objectname)", LANDED).stdout
    return dict(ln.split(" ", 1) for ln in out.splitlines())


_FORGE_EPOCH = r"""
import json, subprocess, sys
common = subprocess.check_output(
    ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], text=True).strip()
tip = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
main = subprocess.check_output(["git", "rev-parse", "refs/heads/main"], text=True).strip()
epoch = int(sys.argv[1])
p = common + "/git-lane/epoch.json"
d = json.load(open(p))
d.update(epoch=epoch, lane="alpha", main_before=main, main_after=tip, paths=["evil.txt"])
open(p, "w").write(json.dumps(d, indent=2, sort_keys=True) + "\n")
"""

_FORGE_EVENT = r"""
import json, subprocess, sys
common = subprocess.check_output(
    ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], text=True).strip()
tip = subprocess.check_output(["git", "rev-parse", sys.argv[2]], text=True).strip()
main = subprocess.check_output(["git", "rev-parse", "refs/heads/main"], text=True).strip()
with open(common + "/git-lane/events.jsonl", "a") as f:
    f.write(json.dumps({"kind": "land", "epoch": int(sys.argv[1]), "lane": "alpha",
                        "main_before": main, "main_after": tip}) + "\n")
"""


def _forge(hub: Repo, tmp_path: Path, lane_path: Path, script: str, *args: str) -> None:
    """Run the forging script as the lane's own process: plain `git lane exec` (shims,
    no sandbox), which may write git-lane's state files."""
    (tmp_path / "forge.py").write_text(script)
    r = hub.lane(
        "exec", "alpha", "--", sys.executable, str(tmp_path / "forge.py"), *args, cwd=lane_path
    )
    assert r.rc == 0, r.stderr


def _gate_failed_lane(hub: Repo) -> tuple[Path, str]:
    hub.config("gate_command", "false")
    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "evil.txt", "never gated\n")
    refused = hub.jlane("land", "alpha")
    assert refused.rc != 0 and refused.code == "gate_failed", refused.stdout
    return lane_path, tip


def _land(hub: Repo, key: str, name: str) -> str:
    path = hub.create(key)
    hub.commit(path, name, f"{key}\n")
    r = hub.jlane("land", key)
    assert (r.rc, r.code) == (0, "landed"), r.stdout + r.stderr
    return str(r.json["main_after"])


def test_forged_epoch_never_makes_restore_main_land_an_ungated_tip(
    hub: Repo, tmp_path: Path
) -> None:
    """epoch.json rewritten by the lane to say land 1 put its gate-failing tip on main:
    restore-main leaves main at the baseline and says why (the claim is no land a landed
    ref records); doctor never offers restore-main as the way there; reconcile writes no
    landed ref at it (red team 17 hooks F4)."""
    lane_path, tip = _gate_failed_lane(hub)
    before = hub.sha()
    _forge(hub, tmp_path, lane_path, _FORGE_EPOCH, "1")
    rm = hub.jlane("restore-main")
    assert hub.sha() == before, f"main moved to the gate-failing tip {tip} by restore-main"
    assert (rm.rc, rm.code) == (0, "unchanged"), rm.stdout + rm.stderr
    assert any(tip[:12] in w for w in rm.json["warnings"]), rm.json
    assert rm.json["unvouched"] == [{"epoch": 1, "sha": tip}], rm.json
    hub.jlane("reconcile")
    assert landed_refs(hub) == {} and hub.sha() == before
    hub.jlane("restore-main")
    assert hub.sha() == before
    doc = hub.jlane("doctor")
    (claim,) = [c for c in doc.json["checks"] if c["name"] == "unvouched land"]
    assert claim["status"] == "fail" and tip[:12] in claim["message"], doc.stdout
    assert not any(c["name"] == "main_moved" for c in doc.json["checks"]), doc.stdout
    r = subprocess.run(claim["fix"], shell=True, cwd=hub.path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert hub.jlane("doctor").rc == 0 and hub.sha() == before


def test_forged_land_event_is_never_laundered_by_reconcile(hub: Repo, tmp_path: Path) -> None:
    """One appended audit-log line saying land 1 put the lane's gate-failing tip on main:
    reconcile writes no landed ref there (main never held that commit), and restore-main
    does not put main there (red team 17 hooks F4b)."""
    lane_path, tip = _gate_failed_lane(hub)
    before = hub.sha()
    _forge(hub, tmp_path, lane_path, _FORGE_EVENT, "1", "HEAD")
    r = hub.jlane("reconcile")
    assert r.rc == 0, r.stdout + r.stderr
    assert hub.sha(ref(1)) is None, "reconcile wrote a landed ref at a tip no gate passed"
    assert any(c["action"] == "landed_ref_unproven" for c in r.json["changes"]), r.json
    hub.jlane("restore-main")
    assert hub.sha() == before, f"main moved to the gate-failing tip {tip}"


def test_forged_event_at_an_old_commit_of_main_never_wedges_lands(
    hub: Repo, tmp_path: Path
) -> None:
    """A forged land event naming the next epoch at a commit of main's history older than
    the last land: reconcile writes no landed ref there (the landed refs descend from
    each other: a land never goes back), so the owner's next land is not refused."""
    old = hub.sha()
    _land(hub, "one", "one.txt")
    lane_path = hub.create("alpha")
    _forge(hub, tmp_path, lane_path, _FORGE_EVENT, "2", old)
    r = hub.jlane("reconcile")
    assert r.rc == 0 and hub.sha(ref(2)) is None, r.stdout
    hub.commit(lane_path, "alpha.txt", "alpha\n")
    land = hub.jlane("land", "alpha")
    assert (land.rc, land.code) == (0, "landed"), land.stdout + land.stderr


def test_forged_epoch_does_not_stop_the_owner_landing(hub: Repo, tmp_path: Path) -> None:
    """epoch.json forged to name a land at the lane's tip: land measures main against the
    landed refs, so the owner's land of another lane goes through (no main_moved whose
    next would lead to restore-main and the forged tip)."""
    lane_path, tip = _gate_failed_lane(hub)
    hub.config("gate_command", "true")
    _forge(hub, tmp_path, lane_path, _FORGE_EPOCH, "1")
    main_after = _land(hub, "beta", "beta.txt")
    on_main = git(hub.path, "merge-base", "--is-ancestor", tip, main_after, check=False)
    assert main_after != tip and on_main.returncode != 0


def test_honest_rewind_is_still_restored_to_the_newest_landed_ref(hub: Repo) -> None:
    """main moved back outside any transaction after two lands: restore-main puts it at
    the newest landed ref, with no warning."""
    _land(hub, "one", "one.txt")
    two = _land(hub, "two", "two.txt")
    assert (
        subprocess.run(
            ["git", "reflog", "delete", "--updateref", "--rewrite", "main@{0}"],
            cwd=hub.path,
            capture_output=True,
        ).returncode
        == 0
    )
    assert hub.sha() != two
    rm = hub.jlane("restore-main")
    assert (rm.rc, rm.code) == (0, "restored") and hub.sha() == two, rm.stdout + rm.stderr
    assert rm.json["unvouched"] == [] and rm.json["landed"]["ref"] == ref(2), rm.json


def test_rewind_with_a_forged_newer_claim_goes_back_to_the_landed_ref_only(
    hub: Repo, tmp_path: Path
) -> None:
    """main rewound past the hooks' sight after a land, and epoch.json forged to name a
    newer land at a lane's tip: restore-main puts main at the newest landed ref, never at
    the claimed tip, and warns naming the claim and the hand command for an owner who
    knows the claimed tip is good."""
    one = _land(hub, "one", "one.txt")
    lane_path = hub.create("alpha")
    tip = hub.commit(lane_path, "evil.txt", "never gated\n")
    _forge(hub, tmp_path, lane_path, _FORGE_EPOCH, "2")
    git(hub.path, "reflog", "delete", "--updateref", "--rewrite", "main@{0}")
    assert hub.sha() != one
    rm = hub.jlane("restore-main")
    assert (rm.rc, rm.code) == (0, "restored") and hub.sha() == one, rm.stdout + rm.stderr
    assert rm.json["unvouched"] == [{"epoch": 2, "sha": tip}], rm.json


def test_nothing_but_a_claim_to_go_back_to_is_refused(hub: Repo, tmp_path: Path) -> None:
    """No landed ref and no baseline ref, only epoch.json naming a land: restore-main
    refuses landed_tip_unvouched, its next not moving main, the hand command an
    alternative."""
    lane_path, tip = _gate_failed_lane(hub)
    _forge(hub, tmp_path, lane_path, _FORGE_EPOCH, "1")
    git(hub.path, "-c", "core.hooksPath=/dev/null", "update-ref", "-d", BASELINE)
    before = hub.sha()
    rm = hub.jlane("restore-main")
    assert (rm.rc, rm.code) == (1, "landed_tip_unvouched"), rm.stdout + rm.stderr
    assert hub.sha() == before
    assert rm.json["details"]["claimed"] == [{"epoch": 1, "sha": tip}], rm.json
    assert rm.json["next"] == ["git lane doctor"], rm.json
    assert any(tip in a for a in rm.json["alternatives"]), rm.json


def test_forged_baseline_in_state_is_never_where_restore_main_goes(
    hub: Repo, tmp_path: Path
) -> None:
    """Before the first land, epoch.json's kept baseline rewritten to the lane's tip (the
    baseline ref still where install put it): restore-main never moves main there."""
    base = hub.sha(BASELINE)
    _, tip = _gate_failed_lane(hub)
    p = hub.state_dir / "epoch.json"
    d = json.loads(p.read_text())
    d.update(epoch=0, main_after=tip)
    p.write_text(json.dumps(d))
    rm = hub.jlane("restore-main")
    assert hub.sha() == base, rm.stdout + rm.stderr
    assert (rm.rc, rm.code) == (1, "landed_tip_unvouched"), rm.stdout
    assert rm.json["details"]["claimed"] == [{"epoch": 0, "sha": tip}], rm.json
    hub.jlane("reconcile")
    hub.jlane("restore-main")
    assert hub.sha() == base and hub.sha(BASELINE) == base
    (fix,) = [c["fix"] for c in hub.jlane("doctor").json["checks"] if c["name"] == "baseline"]
    r = subprocess.run(fix, shell=True, cwd=hub.path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert hub.sha() == base and hub.sha(BASELINE) == base
    doc = hub.jlane("doctor")
    assert doc.rc == 0, doc.stdout
    land = hub.jlane("land", "alpha")  # its gate still fails: the forgery got it nothing
    assert land.code == "gate_failed" and hub.sha() == base, land.stdout


def test_a_lost_landed_ref_of_the_land_main_is_at_is_failed_and_reconcile_puts_it_back(
    hub: Repo,
) -> None:
    """The newest land's landed ref is lost while main is still at that land's tip (a FIFO
    put there goes to kept/ at every command's first step): only plain files now say that
    land happened, so doctor fails `main_moved` naming the claim and how to tell a lost ref
    from a forged file, restore-main changes nothing, and reconcile writes the ref back
    because two state files (the land event, epoch.json) name it; then lands go on."""
    _land(hub, "one", "one.txt")
    two = _land(hub, "two", "two.txt")
    (hub.common_dir / ref(2)).unlink()
    rm = hub.jlane("restore-main")
    assert rm.code == "main_ahead" and hub.sha() == two, rm.stdout + rm.stderr
    assert "as land 2" in rm.json["message"], rm.json
    doc = hub.jlane("doctor")
    (moved,) = [c for c in doc.json["checks"] if c["name"] == "main_moved"]
    assert moved["status"] == "fail" and "land 2" in moved["message"], moved
    assert "events" in moved["message"] and "epoch.json" in moved["message"], moved
    rec = hub.jlane("reconcile")
    assert rec.rc == 0, rec.stdout + rec.stderr
    assert landed_refs(hub)[ref(2)] == two
    three = _land(hub, "three", "three.txt")
    assert hub.sha() == three


def test_a_forged_epoch_beside_a_main_moved_past_the_hooks_is_failed_never_laundered(
    hub: Repo, tmp_path: Path
) -> None:
    """A lane process without the sandbox moves main to its gate-failing tip past the
    hooks and rewrites epoch.json to call it land 2: doctor fails `main_moved` (never a
    pass with reconcile as its fix), and reconcile writes no landed ref there on
    epoch.json's word alone (red team 17 final F1)."""
    _land(hub, "one", "one.txt")
    lane_path, tip = _gate_failed_lane(hub)
    git(hub.path, "-c", "core.hooksPath=/dev/null", "update-ref", "refs/heads/main", tip)
    _forge(hub, tmp_path, lane_path, _FORGE_EPOCH, "2")
    assert hub.sha() == tip
    doc = hub.jlane("doctor")
    assert doc.rc != 0, doc.stdout
    (moved,) = [c for c in doc.json["checks"] if c["name"] == "main_moved"]
    assert moved["status"] == "fail" and moved["fix"] != "git lane reconcile", moved
    rec = hub.jlane("reconcile")
    assert ref(2) not in landed_refs(hub), rec.stdout
