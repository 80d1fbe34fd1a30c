"""The state store under `<common-dir>/git-lane/`: identity-only lane records, the epoch,
the append-only rotated event log, atomic writes, and corrupt files read as absent,
logged, repaired by reconcile and never a crash."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo
from hypothesis import given, settings
from hypothesis import strategies as st

import guard.store
from guard.store import EPOCH_MAX, Epoch, LaneRecord, Store

IDENTITY = {
    "key",
    "branch",
    "path",
    "created_at",
    "status",
    "admin",  # the lane's admin dir name under <common>/worktrees, recorded at create
    "goal",
    "owner_pid",
    "owner_start",
    "released_at",
    "released_tip",
    # setup_command's recorded outcome (and who runs it while it runs): not derivable
    # from git
    "setup",
    "setup_pid",
    "setup_start",
    # whether a `git lane exec` ever ran in the lane (its land gates clean): not derivable
    "exec_seen",
    "schema",
}


def events(repo: Repo) -> list[dict[str, Any]]:
    return list(Store(repo.state_dir).events())


def snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(d)): (p.stat().st_mode, p.stat().st_size) for p in sorted(d.rglob("*"))
    }


# -- layout -------------------------------------------------------------------------------
def test_lane_record_holds_identity_only(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.commit(lp, "a.txt", "a\n")
    (lp / "dirt").write_text("x")
    rec = json.loads((repo.state_dir / "lanes" / "alpha.json").read_text())
    assert set(rec) <= IDENTITY
    assert rec["key"] == "alpha" and rec["branch"] == "lane/alpha" and rec["path"] == str(lp)
    assert rec["status"] == "active" and rec["schema"] == guard.store.LANE_SCHEMA
    # nothing derived from git (freshness, dirtiness, tips) is ever stored
    blob = json.dumps(rec)
    assert str(repo.sha("refs/heads/lane/alpha")) not in blob
    for derived in ("fresh", "dirty", "ahead", "behind", "tip", "advice", "sync_required"):
        assert derived not in rec
    # invisible to git status in the hub and in the lane
    assert repo.git("status", "--porcelain").stdout == ""
    assert repo.git("status", "--porcelain", cwd=lp).stdout.strip() == "?? dirt"


def test_every_action_and_refusal_is_an_event(repo: Repo) -> None:
    repo.create("alpha")
    assert repo.jlane("create", "Bad").code == "invalid_lane_key"
    assert repo.jlane("release", "nope").code == "unknown_lane"
    repo.config("max_lanes", "3")
    assert repo.jlane("release", "alpha").code == "released"
    assert repo.jlane("reconcile").rc == 0
    evs = events(repo)
    for e in evs:
        assert {"time", "pid", "lane", "code", "kind"} <= set(e), e
        assert isinstance(e["pid"], int) and e["pid"] > 0
        assert e["time"].endswith("Z")
    assert [(e["kind"], e["lane"]) for e in evs] == [
        ("create", "alpha"),
        ("refusal", None),
        ("refusal", "nope"),
        ("config_set", None),
        ("release", "alpha"),
    ]
    assert [e["code"] for e in evs if e["kind"] == "refusal"] == [
        "invalid_lane_key",
        "unknown_lane",
    ]
    assert all(isinstance(e["code"], str) and e["code"] for e in evs)
    # the log only grows: earlier lines are kept byte for byte
    path = repo.state_dir / "events.jsonl"
    before = path.read_bytes()
    assert repo.jlane("create", "../x").code == "invalid_lane_key"
    after = path.read_bytes()
    assert after.startswith(before) and len(after) > len(before)


def test_events_rotate_at_the_size_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard.store, "EVENTS_MAX_BYTES", 2000)
    s = Store(tmp_path / "git-lane")
    for i in range(60):
        s.event("tick", lane="alpha", n=i)
    cur = s.events_path
    old = cur.with_name("events.jsonl.1")
    assert old.is_file() and cur.is_file()
    assert cur.stat().st_size <= 2000 and old.stat().st_size <= 2000
    ns = [e["n"] for e in s.events()]
    # oldest first, contiguous, ending with the newest; only older generations were dropped
    assert ns == list(range(ns[0], 60)) and len(ns) > 10
    assert stat.S_IMODE(cur.stat().st_mode) == 0o644


def test_event_never_raises(tmp_path: Path) -> None:
    s = Store(tmp_path / "git-lane")
    s.dir.mkdir()
    s.events_path.mkdir()  # a directory where the log should be
    s.event("tick")  # swallowed: the log must not break a command


# -- atomic writes --------------------------------------------------------------------------
def test_atomic_write_mode_and_no_temp_files(tmp_path: Path) -> None:
    s = Store(tmp_path / "git-lane")
    old = os.umask(0o077)
    try:
        s.write_lane(LaneRecord("alpha", "lane/alpha", "/x", "t"))
        s.write_epoch(Epoch(epoch=3, paths=["a"]))
        s.write_lane(LaneRecord("alpha", "lane/alpha", "/y", "t"))
    finally:
        os.umask(old)
    files = [p for p in s.dir.rglob("*") if p.is_file()]
    assert sorted(p.name for p in files) == ["alpha.json", "epoch.json"]
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    assert s.read_lane("alpha") == LaneRecord("alpha", "lane/alpha", "/y", "t")


def test_write_is_temp_fsync_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Store(tmp_path / "git-lane")
    s.dir.mkdir()
    log: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        log.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        log.append(("replace", f"{os.fspath(src)} -> {os.fspath(dst)}"))
        real_replace(src, dst)

    monkeypatch.setattr(guard.store.os, "fsync", fsync)
    monkeypatch.setattr(guard.store.os, "replace", replace)
    s.write_epoch(Epoch(epoch=5))
    monkeypatch.undo()
    (kind0, tmp), (kind1, move) = log[0], log[1]
    assert (kind0, kind1) == ("fsync", "replace")
    assert Path(tmp).parent == s.dir and Path(tmp).name != "epoch.json"  # a temp file, synced
    assert move == f"{tmp} -> {s.epoch_path}"
    assert s.read_epoch().epoch == 5


def test_failed_write_keeps_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = Store(tmp_path / "git-lane")
    s.write_epoch(Epoch(epoch=1))

    def boom(*_a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(guard.store.os, "replace", boom)
    with pytest.raises(OSError):
        s.write_epoch(Epoch(epoch=2))
    monkeypatch.undo()
    assert s.read_epoch().epoch == 1
    assert os.listdir(s.dir) == ["epoch.json"]


def test_state_files_left_by_commands_are_0644_without_temps(repo: Repo) -> None:
    repo.config("max_lanes", "4")
    repo.create("alpha")
    repo.create("beta")
    assert repo.jlane("release", "beta").rc == 0
    for p in repo.state_dir.rglob("*"):
        assert not p.name.endswith(".tmp"), p
        if p.is_file() and p.suffix in (".json", ".jsonl", ".toml"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p


# -- corrupt files ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "blob",
    [b"", b'{"key": "alpha", "bra', b"[1, 2]", b"\xff\xfe\x00garbage", b"[" * 100_000, b"null"],
    ids=["empty", "truncated", "not-object", "binary", "deep", "null"],
)
def test_corrupt_json_reads_as_absent_and_is_logged(tmp_path: Path, blob: bytes) -> None:
    s = Store(tmp_path / "git-lane")
    s.lanes_dir.mkdir(parents=True)
    s.lane_path("alpha").write_bytes(blob)
    s.epoch_path.write_bytes(blob)
    assert s.read_lane("alpha") is None
    assert s.lanes() == []
    assert s.read_epoch() == Epoch()
    warned = [e for e in s.events() if e["kind"] == "warning"]
    assert {(e["code"], e["path"]) for e in warned} >= {
        ("state_corrupt", str(s.lane_path("alpha"))),
        ("state_corrupt", str(s.epoch_path)),
    }


@pytest.mark.parametrize(
    "patch",
    [
        {"owner_pid": "123"},
        {"owner_pid": True},
        {"owner_pid": -5},
        {"owner_start": "yesterday"},
        {"goal": 7},
        {"status": "zombie"},
        {"exec_seen": "no"},
        {"exec_seen": 0},
        {"key": None},
        {"key": "beta"},
        {"branch": "main"},
        {"schema": "1"},
    ],
)
def test_wrong_typed_lane_record_is_corrupt_not_a_crash(
    tmp_path: Path, patch: dict[str, Any]
) -> None:
    s = Store(tmp_path / "git-lane")
    good = LaneRecord("alpha", "lane/alpha", "/x", "t").to_dict()
    s.lanes_dir.mkdir(parents=True)
    s.lane_path("alpha").write_text(json.dumps({**good, **patch}))
    assert s.read_lane("alpha") is None
    (w,) = [e for e in s.events() if e["kind"] == "warning"]
    assert (w["code"], w["lane"]) == ("state_corrupt", "alpha")


@pytest.mark.parametrize(
    "patch",
    [
        {"epoch": -1},
        {"epoch": 10**10},  # more than a landed ref can name
        {"epoch": True},
        {"epoch": "3"},
        {"paths": "a"},
        {"paths": [1]},
        {"lane": 5},
        {"truncated": "no"},
    ],
)
def test_wrong_typed_epoch_is_corrupt(tmp_path: Path, patch: dict[str, Any]) -> None:
    s = Store(tmp_path / "git-lane")
    s.dir.mkdir()
    s.epoch_path.write_text(json.dumps({**Epoch(epoch=4).to_dict(), **patch}))
    assert s.read_epoch() == Epoch()
    assert not s.epoch_is_valid()


def test_corrupt_state_never_crashes_and_reconcile_repairs(repo: Repo) -> None:
    lp = repo.create("alpha")
    repo.create("beta")
    rec_path = repo.state_dir / "lanes" / "alpha.json"
    rec_path.write_bytes(rec_path.read_bytes()[:25])  # truncated mid-write
    beta = repo.state_dir / "lanes" / "beta.json"
    beta.write_text(json.dumps({**json.loads(beta.read_text()), "owner_pid": "x"}))
    (repo.state_dir / "epoch.json").write_text('{"epoch": ')

    r = repo.jlane("status")
    assert r.rc == 0, r.stderr
    assert r.json["epoch"] == 0
    # shown, never dropped: nothing may act on them until reconcile rebuilds them
    assert [(ln["key"], ln["state"]) for ln in r.json["lanes"]] == [
        ("alpha", "corrupt"),
        ("beta", "corrupt"),
    ]
    # create does not trip over them and does not hand out a key whose branch exists
    r = repo.jlane("create")
    assert r.rc == 0, r.stderr
    assert r.json["lane"]["key"] == "adhoc-1"
    # alpha's record is there, unreadable: the key is not free, reconcile re-derives it
    r = repo.jlane("create", "alpha")
    assert (r.rc, r.code) == (1, "state_corrupt")
    assert r.json["next"][0] == "git lane reconcile"
    assert repo.sha("refs/heads/lane/alpha") == repo.sha()

    warned = {(e["code"], e["path"]) for e in events(repo) if e["kind"] == "warning"}
    assert ("state_corrupt", str(rec_path)) in warned
    assert ("state_corrupt", str(beta)) in warned
    assert ("state_corrupt", str(repo.state_dir / "epoch.json")) in warned

    r = repo.jlane("reconcile")
    assert r.rc == 0, r.stderr
    actions = {(c["action"], c.get("lane")) for c in r.json["changes"]}
    assert {
        ("record_rebuilt", "alpha"),
        ("record_rebuilt", "beta"),
        ("epoch_repaired", None),
    } <= actions
    s = Store(repo.state_dir)
    alpha = s.read_lane("alpha")
    assert alpha is not None and (alpha.status, alpha.path) == ("active", str(lp))
    assert s.epoch_is_valid() and s.read_epoch().epoch == 0
    r = repo.jlane("status")
    assert [(ln["key"], ln["state"]) for ln in r.json["lanes"]] == [
        ("adhoc-1", "active"),
        ("alpha", "active"),
        ("beta", "active"),
    ]
    # repaired: a second reconcile finds nothing to do
    assert repo.jlane("reconcile").json["changes"] == []


# -- round trips ----------------------------------------------------------------------------
texts = st.text(max_size=40)
opt_texts = st.none() | texts
lane_records = st.builds(
    LaneRecord,
    key=st.from_regex(r"\A[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z"),
    branch=st.just(""),  # filled in below: always lane/<key>
    # a lane's worktree: an absolute path without NUL (anything else is corrupt)
    path=texts.filter(lambda t: "\0" not in t).map(lambda t: "/" + t),
    created_at=texts,
    status=st.sampled_from(["active", "orphaned", "released"]),
    goal=opt_texts,
    owner_pid=st.none() | st.integers(min_value=1, max_value=2**31),
    owner_start=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    released_at=opt_texts,
    released_tip=st.none() | st.from_regex(r"\A[0-9a-f]{40}\Z"),
    setup=st.sampled_from([None, "running", "ok", "failed", "timeout"]),
    setup_pid=st.none() | st.integers(min_value=1, max_value=2**31),
    setup_start=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    exec_seen=st.none() | st.booleans(),
).map(lambda r: LaneRecord(**{**r.to_dict(), "branch": f"lane/{r.key}"}))
epochs = st.builds(
    Epoch,
    epoch=st.integers(min_value=0, max_value=EPOCH_MAX),  # past it: corrupt (a test below)
    lane=opt_texts,
    main_before=opt_texts,
    main_after=opt_texts,
    paths=st.lists(texts, max_size=5),
    truncated=st.booleans(),
    at=opt_texts,
)


@given(lane_records)
def test_lane_record_dict_round_trip(rec: LaneRecord) -> None:
    d = rec.to_dict()
    assert LaneRecord.from_dict(json.loads(json.dumps(d))) == rec
    assert LaneRecord.from_dict({**d, "added_by_a_newer_version": 1}) == rec


@given(epochs)
def test_epoch_dict_round_trip(ep: Epoch) -> None:
    assert Epoch.from_dict(json.loads(json.dumps(ep.to_dict()))) == ep


@settings(max_examples=30, deadline=None)
@given(st.lists(lane_records, max_size=4, unique_by=lambda r: r.key), epochs)
def test_store_write_read_round_trip(recs: list[LaneRecord], ep: Epoch) -> None:
    with tempfile.TemporaryDirectory() as d:
        s = Store(Path(d) / "git-lane")
        for r in recs:
            s.write_lane(r)
        s.write_epoch(ep)
        assert s.lanes() == sorted(recs, key=lambda r: r.key)
        assert all(s.read_lane(r.key) == r for r in recs)
        assert s.read_epoch() == ep and s.epoch_is_valid()
        assert not s.events_path.exists()  # nothing was corrupt, nothing was logged


@given(
    st.dictionaries(
        st.sampled_from(sorted(IDENTITY)), st.none() | st.integers() | texts | st.booleans()
    )
)
def test_from_dict_accepts_or_raises_value_error(d: dict[str, Any]) -> None:
    try:
        rec = LaneRecord.from_dict(d)
    except ValueError:
        return
    assert rec.branch == f"lane/{rec.key}"
