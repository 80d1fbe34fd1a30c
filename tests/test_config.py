"""Config: TOML at repository and user level, every key of DESIGN.md, validation
(`invalid_config` naming file and key), unknown keys as warnings, `config get|set|list|unset`,
the repository file winning over the user file, and workers kept out."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import Repo, lane

from guard import config as cfgmod
from guard.errors import Refusal

DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "main_branch": None,
    "sync_policy": "on_land_mandatory",
    "gate_command": None,
    "gate": "on",
    "gate_timeout": 900,
    "gate_worktree": "lane",
    "max_lanes": 5,
    "worktrees_root": None,
    "allow_in_repo_worktrees": False,
    "worker_land": "deny",
    "sandbox": "off",
    "sandbox_writable": [],
    "setup_command": None,
    "setup_timeout": 900,
    "auto_sync": False,
}

# (key, a value that must be refused, a value that must be accepted), as TOML source
TABLE = [
    ("enabled", '"yes"', "false"),
    ("enabled", "1", "true"),
    ("auto_sync", '"yes"', "true"),
    ("main_branch", '"two words"', '"trunk"'),
    ("main_branch", '"refs/heads/main"', '"release-1.x"'),
    ("main_branch", "3", '"master"'),
    ("main_branch", '"HEAD"', '"feature/x"'),
    ("main_branch", '"-main"', '"main-2"'),
    ("main_branch", '"a/.hidden"', '"a/b.c"'),
    ("main_branch", '"a.lock/b"', '"trunk"'),
    ("main_branch", '"a//b"', '"trunk"'),
    ("sync_policy", '"sometimes"', '"overlap_mandatory"'),
    ("sync_policy", "true", '"land_time_only"'),
    ("gate_command", "true", '"pytest -q"'),
    ("gate_command", '""', '"true"'),
    ("gate", '"maybe"', '"off"'),
    ("gate", "false", '"on"'),
    ("gate_timeout", "0", "30"),
    ("gate_timeout", "1.5", "1"),
    ("gate_timeout", '"900"', "900"),
    ("gate_worktree", '"tmp"', '"clean"'),
    ("gate_worktree", "true", '"lane"'),
    ("max_lanes", "-1", "25"),
    ("max_lanes", "true", "1"),
    ("worktrees_root", "5", '"/tmp/lanes"'),
    ("allow_in_repo_worktrees", '"true"', "true"),
    ("worker_land", '"sometimes"', '"allow"'),
    ("sandbox", '"on"', '"best-effort"'),
    ("sandbox", "false", '"required"'),
    ("sandbox_writable", '"/tmp"', '["/tmp", "~/.codex"]'),
    ("sandbox_writable", "[1]", "[]"),
    ("setup_command", "false", '"npm ci"'),
    ("setup_timeout", "0", "60"),
]


def user_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "git-lane" / "config.toml"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_design_key_with_its_default(repo: Repo) -> None:
    r = repo.jlane("config", "list")
    assert r.rc == 0, r.stderr
    got = {k: v["value"] for k, v in r.json["config"].items()}
    assert got == DEFAULTS
    assert {v["source"] for v in r.json["config"].values()} == {"default"}
    assert r.json["warnings"] == []


@pytest.mark.parametrize(("key", "bad", "good"), TABLE, ids=[f"{k}={b}" for k, b, _ in TABLE])
@pytest.mark.parametrize("level", ["repo", "user"])
def test_validation_table(tmp_path: Path, key: str, bad: str, good: str, level: str) -> None:
    repo_file = tmp_path / "git-lane" / "config.toml"
    target = repo_file if level == "repo" else user_file()
    write(target, f"{key} = {bad}\n")
    with pytest.raises(Refusal) as exc:
        cfgmod.load(repo_file)
    assert exc.value.code == "invalid_config"
    assert exc.value.details["file"] == str(target)
    assert exc.value.details["key"] == key
    write(target, f"{key} = {good}\n")
    cfg = cfgmod.load(repo_file)
    assert cfg[key] == tomllib.loads(f"v = {good}")["v"]
    assert (cfg.sources[key], cfg.files[key]) == (level, str(target))


def test_invalid_value_refused_by_every_command_naming_file_and_key(repo: Repo) -> None:
    path = repo.state_dir / "config.toml"
    write(path, 'sync_policy = "sometimes"\n')
    for cmd in (("status",), ("create", "alpha"), ("config", "get", "max_lanes")):
        r = repo.jlane(*cmd)
        assert (r.rc, r.code) == (1, "invalid_config"), cmd
        assert r.json["details"]["file"] == str(path)
        assert r.json["details"]["key"] == "sync_policy"
        assert "refused [invalid_config]" in r.stderr
    assert "lane/alpha" not in repo.git("branch", "--list").stdout


@pytest.mark.parametrize("name", ["HEAD", "-x", "@", "a/.b", "x.lock", "a//b"])
def test_main_branch_must_be_a_name_git_takes_for_a_branch(
    repo: Repo, gitlane_on_path: Path, name: str
) -> None:
    """Not a name a branch of its own can have (HEAD and @ name the checkout, a leading -
    is an option, `git check-ref-format` refuses the rest): `config set`
    refuses it at the door; written into the owner's file by hand, every command refuses
    invalid_config, and the next, run as printed, fixes it."""
    import subprocess

    r = repo.jlane("config", "set", "main_branch", name)
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout
    assert (
        not (repo.state_dir / "config.toml").exists()
        or "main_branch" not in (repo.state_dir / "config.toml").read_text()
    )
    write(repo.state_dir / "config.toml", f"main_branch = {json.dumps(name)}\n")
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout
    assert r.json["details"]["key"] == "main_branch"
    for cmd in r.json["next"]:
        ran = subprocess.run(["sh", "-c", cmd], cwd=repo.path, capture_output=True, text=True)
        assert ran.returncode == 0, (cmd, ran.stderr)
    assert repo.jlane("status").rc == 0


def test_broken_toml_is_invalid_config(repo: Repo) -> None:
    write(user_file(), "max_lanes = = 3\n")
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "invalid_config")
    assert r.json["details"]["file"] == str(user_file())


@pytest.mark.parametrize(
    "text",
    ["x = " + "[" * 3000 + "]" * 3000 + "\n", "max_lanes" + ".x" * 3000 + " = 1\n"],
    ids=["arrays", "dotted key"],
)
def test_a_config_nested_deep_is_invalid_config_not_a_crash(repo: Repo, text: str) -> None:
    """Nested past what tomllib recurses through (RecursionError, not TOMLDecodeError), or
    deeper than any setting (repr and json then recurse): unreadable TOML, refused
    invalid_config like any other, with the file to edit (red team 13G)."""
    write(repo.state_dir / "config.toml", text)
    r = repo.jlane("status")
    assert (r.rc, r.code) == (1, "invalid_config"), r.stdout + r.stderr[-300:]
    assert "nested" in r.json["message"] and r.json["details"]["file"] == str(
        repo.state_dir / "config.toml"
    )
    # a value given on the command line is read as TOML too: too deep, it is a plain word
    write(repo.state_dir / "config.toml", "")
    r = repo.jlane("config", "set", "gate_command", "[" * 3000)
    assert r.rc == 0 and "internal error" not in r.stderr, r.stderr[-300:]
    assert repo.jlane("config", "get", "gate_command").json["value"] == "[" * 3000


def test_unknown_key_is_a_warning_not_a_refusal(repo: Repo) -> None:
    write(repo.state_dir / "config.toml", "max_lanse = 3\nmax_lanes = 4\n")
    r = repo.jlane("config", "list")
    assert r.rc == 0, r.stderr
    assert r.json["config"]["max_lanes"]["value"] == 4
    (w,) = r.json["warnings"]
    assert "max_lanse" in w
    r = repo.jlane("status")
    # the config's one warning, beside status's own (hooks not installed here)
    assert r.rc == 0 and len(r.json["warnings"]) - len(r.json["alerts"]) == 1
    r = repo.lane("status")
    assert r.rc == 0 and r.stderr.startswith("git-lane: warning:")
    assert repo.jlane("create", "alpha").rc == 0


def test_set_get_unset_list_round_trip(repo: Repo) -> None:
    path = repo.state_dir / "config.toml"
    cases = [
        ("max_lanes", "7", 7),
        ("enabled", "false", False),
        ("gate_command", "pytest -q -x", "pytest -q -x"),
        ("gate_command", "true", "true"),  # a shell command, not a TOML boolean
        ("main_branch", "2024", "2024"),
        ("sandbox_writable", '["/a b", "/c"]', ["/a b", "/c"]),
        ("sandbox_writable", "/x,/y", ["/x", "/y"]),
        ("sync_policy", "overlap_mandatory", "overlap_mandatory"),
    ]
    last = {}
    for key, text, value in cases:
        r = repo.jlane("config", "set", key, text)
        assert r.rc == 0, (key, r.stderr)
        assert (r.json["value"], r.json["file"]) == (value, str(path))
        assert tomllib.loads(path.read_text())[key] == value
        last[key] = value
    r = repo.jlane("config", "get", "sandbox_writable")
    assert (r.json["value"], r.json["source"], r.json["file"]) == (["/x", "/y"], "repo", str(path))
    cfg = repo.jlane("config", "list").json["config"]
    assert {k: (cfg[k]["value"], cfg[k]["source"], cfg[k]["file"]) for k in last} == {
        k: (v, "repo", str(path)) for k, v in last.items()
    }
    r = repo.jlane("config", "unset", "max_lanes")
    assert r.rc == 0, r.stderr
    assert "max_lanes" not in tomllib.loads(path.read_text())
    r = repo.jlane("config", "get", "max_lanes")
    assert (r.json["value"], r.json["source"]) == (5, "default")
    # plain `get` prints the bare value for scripts
    assert repo.lane("config", "get", "gate_command").stdout == "true\n"


def test_set_refuses_bad_values_and_unknown_keys_without_writing(repo: Repo) -> None:
    path = repo.state_dir / "config.toml"
    repo.config("max_lanes", "3")
    before = path.read_bytes()
    for key, text in [
        ("max_lanes", "0"),
        ("max_lanes", "many"),
        ("gate", "maybe"),
        ("no_such_key", "1"),
    ]:
        r = repo.jlane("config", "set", key, text)
        assert (r.rc, r.code) == (1, "invalid_config"), key
        assert r.json["details"]["key"] == key
    assert repo.jlane("config", "unset", "no_such_key").code == "invalid_config"
    assert repo.jlane("config", "get", "no_such_key").code == "invalid_config"
    assert path.read_bytes() == before


def test_repo_file_wins_over_user_file(repo: Repo) -> None:
    r = repo.jlane("config", "set", "--user", "max_lanes", "9")
    assert r.rc == 0 and r.json["file"] == str(user_file())
    write(user_file(), user_file().read_text() + 'gate_command = "make check"\n')
    r = repo.jlane("config", "get", "max_lanes")
    assert (r.json["value"], r.json["source"], r.json["file"]) == (9, "user", str(user_file()))
    repo.config("max_lanes", "3")
    r = repo.jlane("config", "list")
    cfg = r.json["config"]
    assert (cfg["max_lanes"]["value"], cfg["max_lanes"]["source"], cfg["max_lanes"]["file"]) == (
        3,
        "repo",
        str(repo.state_dir / "config.toml"),
    )
    assert (cfg["gate_command"]["value"], cfg["gate_command"]["source"]) == ("make check", "user")
    assert repo.jlane("config", "unset", "max_lanes").rc == 0
    assert repo.jlane("config", "get", "max_lanes").json["value"] == 9


def test_user_file_can_be_set_outside_any_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    r = lane("config", "set", "--user", "max_lanes", "8", "--json", cwd=tmp_path)
    assert (r.rc, r.code) == (0, "ok"), r.stdout + r.stderr
    assert tomllib.loads(user_file().read_text()) == {"max_lanes": 8}
    r = lane("config", "unset", "--user", "max_lanes", "--json", cwd=tmp_path)
    assert r.rc == 0
    assert tomllib.loads(user_file().read_text()) == {}


@pytest.mark.parametrize(
    "env", [{"GITLANE_LANE": "x"}, {"GITLANE_ROLE": "worker"}], ids=["bound", "role"]
)
def test_workers_may_read_but_not_write_config(repo: Repo, env: dict[str, str]) -> None:
    path = repo.state_dir / "config.toml"
    repo.config("max_lanes", "3")
    before = path.read_bytes()
    for cmd in (
        ("config", "set", "max_lanes", "9"),
        ("config", "unset", "max_lanes"),
        ("config", "set", "--user", "max_lanes", "9"),
    ):
        r = repo.jlane(*cmd, env=env)
        assert (r.rc, r.code) == (1, "role_forbidden"), cmd
    assert path.read_bytes() == before and not user_file().exists()
    r = repo.jlane("config", "get", "max_lanes", env=env)
    assert (r.rc, r.json["value"]) == (0, 3)
    assert repo.jlane("config", "list", env=env).rc == 0
