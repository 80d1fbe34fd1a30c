"""`git lane config get|set|unset|list`: read and write the owner's settings (the
repository's config.toml, or with `--user` the user's). Workers may read, never write."""

from __future__ import annotations

from pathlib import Path

from guard import config as cfgmod
from guard import lane
from guard.git import q
from guard.errors import Refusal
from guard.repo import Repo
from guard.results import ConfigList, ConfigValue


def _file(repo: Repo | None, user: bool) -> Path:
    if user or repo is None:
        return cfgmod.user_config_path()
    return repo.store.config_path


def _user(user: bool) -> str:
    return "--user " if user else ""


def get(repo: Repo, key: str) -> ConfigValue:
    if key not in cfgmod.KEYS:
        raise Refusal(
            "invalid_config",
            f"unknown key {key}",
            next=["git lane config list"],
            details={"key": key},
        )
    cfg = repo.config
    out: ConfigValue = {
        "ok": True,
        "code": "ok",
        "key": key,
        "value": cfg.get(key),
        "source": cfg.sources[key],
        "warnings": cfg.warnings,
    }
    if key in cfg.files:
        out["file"] = cfg.files[key]
    return out


def set_(repo: Repo | None, key: str, value: str, user: bool) -> ConfigValue:
    """`repo` is None for `--user` outside any repository (nothing to log into then)."""
    lane.forbid_worker("config set", f"git lane config set {_user(user)}{q(key)} {q(value)}")
    parsed = cfgmod.parse_value(key, value)
    cfgmod.check_value(key, parsed)
    path = _file(repo, user)
    cfgmod.write(path, key, parsed)
    if repo is not None:
        repo.store.event("config_set", key=key, value=parsed, file=str(path))
    return {"ok": True, "code": "ok", "key": key, "value": parsed, "file": str(path)}


def unset(repo: Repo | None, key: str, user: bool) -> ConfigValue:
    lane.forbid_worker("config unset", f"git lane config unset {_user(user)}{q(key)}")
    cfgmod.parse_value(key, "x")  # unknown key refusal
    path = _file(repo, user)
    cfgmod.write(path, key, None)
    if repo is not None:
        repo.store.event("config_unset", key=key, file=str(path))
    return {"ok": True, "code": "ok", "key": key, "value": None, "file": str(path)}


def list_(repo: Repo) -> ConfigList:
    cfg = repo.config
    items = {
        k: {
            "value": cfg.get(k),
            "source": cfg.sources[k],
            "file": cfg.files.get(k),
            "help": spec.help,
        }
        for k, spec in cfgmod.KEYS.items()
    }
    return {"ok": True, "code": "ok", "config": items, "warnings": cfg.warnings}
