"""`git lane log [--lane KEY] [--since WHEN] [-n N] [--json]`: the audit log of every
action and every refusal."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from conftest import Repo
from enginehelp import ready_lane


def kinds(r: object) -> list[tuple[str, str | None, str]]:
    evs = r.json["events"]  # type: ignore[attr-defined]
    return [(e["kind"], e["lane"], e["code"]) for e in evs]


def test_log_records_actions_and_refusals(repo: Repo) -> None:
    ready_lane(repo, "alpha")
    assert repo.jlane("land", "alpha").code == "gate_command_unset"
    repo.config("gate", "off")
    assert repo.jlane("land", "alpha").code == "landed"
    r = repo.jlane("log")
    assert r.rc == 0 and r.json["ok"] is True and r.json["code"] == "ok"
    k = kinds(r)
    assert ("create", "alpha", "ok") in k
    assert ("refusal", None, "gate_command_unset") in k
    assert ("config_set", None, "ok") in k
    assert ("land", "alpha", "landed") in k
    assert k.index(("create", "alpha", "ok")) < k.index(("land", "alpha", "landed"))  # oldest first
    for e in r.json["events"]:
        assert {"time", "ts", "pid", "host", "kind", "lane", "code"} <= set(e)
    (land,) = [e for e in r.json["events"] if e["kind"] == "land"]
    assert (
        land["main_after"] == repo.sha() and land["epoch"] == 1 and land["paths"] == ["alpha.txt"]
    )


def test_log_filters_by_lane(repo: Repo) -> None:
    repo.config("gate", "off")
    ready_lane(repo, "alpha")
    ready_lane(repo, "beta")
    assert repo.jlane("land", "beta").code == "landed"
    assert repo.jlane("land", "alpha").code == "stale_lane"
    r = repo.jlane("log", "--lane", "alpha")
    assert r.rc == 0
    assert {e["lane"] for e in r.json["events"]} == {"alpha"}
    assert ("refusal", "alpha", "stale_lane") in kinds(r)
    assert not any(e["kind"] == "land" for e in r.json["events"])
    assert repo.jlane("log", "--lane", "nobody").json["events"] == []


def test_log_since_and_newest_n(repo: Repo) -> None:
    repo.create("old")
    time.sleep(1.1)
    cut = time.time()
    time.sleep(0.05)
    repo.create("new")
    iso = datetime.fromtimestamp(cut, UTC).isoformat()
    r = repo.jlane("log", "--since", iso)
    assert r.rc == 0, r.stderr
    assert {e["lane"] for e in r.json["events"] if e["kind"] == "create"} == {"new"}
    assert all(e["ts"] >= cut for e in r.json["events"])
    r = repo.jlane("log", "--since", iso.replace("+00:00", "Z"))
    assert {e["lane"] for e in r.json["events"] if e["kind"] == "create"} == {"new"}
    r = repo.jlane("log", "--since", "1h")
    assert {e["lane"] for e in r.json["events"] if e["kind"] == "create"} == {"old", "new"}
    future = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    assert repo.jlane("log", "--since", future).json["events"] == []
    everything = repo.jlane("log").json["events"]
    assert repo.jlane("log", "-n", "1").json["events"] == everything[-1:]
    assert repo.jlane("log", "-n", "0").json["events"] == []


def test_log_bad_since_is_a_usage_error(repo: Repo) -> None:
    r = repo.jlane("log", "--since", "yesterday-ish")
    assert r.rc == 2
    assert r.json["ok"] is False and r.json["code"] == "usage_error"


def test_log_text_mode(repo: Repo) -> None:
    repo.create("alpha")
    r = repo.lane("log")
    assert r.rc == 0
    assert any(" create " in ln and "alpha" in ln for ln in r.stdout.splitlines())
    empty = repo.lane("log", "--lane", "nobody")
    assert empty.rc == 0 and empty.stdout.strip() == "no events"


def test_log_in_a_repository_without_state(repo: Repo) -> None:
    r = repo.jlane("log")
    assert r.rc == 0 and r.json["events"] == []
