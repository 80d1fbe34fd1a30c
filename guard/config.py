"""Settings in TOML, in layers (the first that sets a key wins): the repository owner's
`<common-dir>/git-lane/config.toml`, the user's `$XDG_CONFIG_HOME/git-lane/config.toml`,
then the project's `.git-lane.toml` from main's committed tree (only PROJECT_KEYS), then
the defaults. The owner files are validated on every read (a bad value refuses); the
project file only ever adds warnings."""

from __future__ import annotations

import json

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.errors import Refusal

if TYPE_CHECKING:
    from guard.git import TooBig

Validator = Callable[[Any], str | None]  # returns a complaint, or None when the value is fine

# No setting is nested more than a few levels; a deeper file is refused as unreadable
# (tomllib recurses per level of arrays and inline tables and raises RecursionError near
# 500; dotted keys nest without recursing, but then repr() and json recurse on the value).
TOML_MAX_DEPTH = 32


def toml_loads(text: str) -> dict[str, Any]:
    """tomllib.loads, with a file nested too deep raising TOMLDecodeError like any other
    unreadable TOML (never RecursionError: a `.git-lane.toml` anyone can commit would
    otherwise take every command down)."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(f"nested more than {TOML_MAX_DEPTH} levels deep") from None
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:  # iterative: the check must not recurse either
        v, depth = stack.pop()
        if depth > TOML_MAX_DEPTH:
            raise tomllib.TOMLDecodeError(f"nested more than {TOML_MAX_DEPTH} levels deep")
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
    return data


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else "must be a non-empty string"


# One argument of an exec is at most 128 KiB on Linux (MAX_ARG_STRLEN): a longer gate
# command cannot even start (E2BIG). Far below that, a command belongs in a script.
COMMAND_MAX_BYTES = 65536


def _command(v: Any) -> str | None:
    if _str(v):
        return _str(v)
    if "\0" in v:
        return "must not contain a NUL character"
    if len(v.encode("utf-8", "surrogateescape")) > COMMAND_MAX_BYTES:
        return f"must be at most {COMMAND_MAX_BYTES} bytes (put a longer command in a script and run that)"
    return None


def _pos_int(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v > 0
    return None if ok else "must be a positive integer"


def _one_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        if isinstance(v, str) and v in choices:
            return None
        return "must be one of " + ", ".join(f'"{c}"' for c in choices)

    check.choices = choices  # type: ignore[attr-defined]  # what type_of shows
    return check


def _str_list(v: Any) -> str | None:
    if isinstance(v, list) and all(isinstance(x, str) and x for x in v):
        return None
    return "must be a list of non-empty strings"


def _branch(v: Any) -> str | None:
    """A name `git check-ref-format --branch` takes as a branch of its own (refs/heads/v):
    not HEAD, not an option, no component starting with a dot or ending in .lock, none of
    git's forbidden characters or sequences, and no quote (git allows one; we refuse it so a
    name never needs quoting where it is printed in a next or read by the hooks' flat TOML
    reader; the hooks still protect a quoted name written by hand)."""
    if _str(v):
        return _str(v)
    bad = (" ", "~", "^", ":", "?", "*", "[", "\\", "..", "@{", "//", '"', "'")
    parts = v.split("/")
    if (
        any(b in v for b in bad)
        or any(ord(c) < 32 or ord(c) == 127 for c in v)
        or v.startswith(("-", "/", "refs/"))
        or v.endswith((".", "/", ".lock"))
        or v in ("HEAD", "@")
        or any(p.startswith(".") or p.endswith(".lock") for p in parts)
    ):
        return "must be a plain branch name such as main (not HEAD, no leading - or .)"
    return None


@dataclass(frozen=True)
class Key:
    name: str
    default: Any
    check: Validator
    help: str


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("enabled", True, _bool, "false: hooks and shims pass everything through"),
        Key("main_branch", None, _branch, "the protected branch (auto: main, then master)"),
        Key(
            "sync_policy",
            "on_land_mandatory",
            _one_of("on_land_mandatory", "overlap_mandatory", "land_time_only"),
            "when a stale lane must sync before it writes again",
        ),
        Key("gate_command", None, _command, "check run with sh -c in the lane at the tip to land"),
        Key("gate", "on", _one_of("on", "off"), '"off": land without a gate (recorded)'),
        Key("gate_timeout", 900, _pos_int, "seconds before the gate is killed"),
        Key(
            "gate_worktree",
            "lane",
            _one_of("lane", "clean"),
            '"clean": the gate runs in a fresh detached worktree of the tip (with the hub\'s '
            ".worktreeinclude files, no setup_command), not in the lane",
        ),
        Key("max_lanes", 5, _pos_int, "active lanes at most"),
        Key("worktrees_root", None, _str, "where lane checkouts live"),
        Key("allow_in_repo_worktrees", False, _bool, "allow worktrees_root inside the repository"),
        Key(
            "worker_land",
            "deny",
            _one_of("deny", "allow"),
            '"allow": a worker may land its own lane',
        ),
        Key("sandbox", "off", _one_of("off", "best-effort", "required"), "default for exec"),
        Key("sandbox_writable", [], _str_list, "extra writable paths for sandboxed CLIs"),
        Key("setup_command", None, _command, "run with sh -c in each new lane after creation"),
        Key("setup_timeout", 900, _pos_int, "seconds before the setup command is killed"),
        Key(
            "auto_sync",
            False,
            _bool,
            "true: after each land, rebase idle clean lanes that rebase cleanly onto main",
        ),
    )
}

# What a tracked `.git-lane.toml` may set: commands and timeouts a team reviews. Anything
# that weakens protection or acts on other lanes (enabled, gate, sync_policy, worker_land,
# sandbox, auto_sync, ...) is the owner's alone, and ignored there with a warning.
PROJECT_FILE = ".git-lane.toml"
PROJECT_KEYS = ("gate_command", "setup_command", "setup_timeout", "gate_timeout")


def type_of(key: str) -> str:
    """A key's type as help and the man page show it, from its validator."""
    check = KEYS[key].check
    choices = getattr(check, "choices", None)
    if choices:
        return "|".join(choices)
    names: dict[Validator, str] = {
        _bool: "bool",
        _str: "string",
        _command: "command",
        _pos_int: "positive integer",
        _str_list: "list of strings",
        _branch: "branch name",
    }
    return names.get(check, "value")


def default_shown(key: str) -> str:
    """A key's default as help shows it (TOML-like; `unset` for none)."""
    d = KEYS[key].default
    if d is None:
        return "auto" if key == "main_branch" else "unset"
    if isinstance(d, bool):
        return str(d).lower()
    return f'"{d}"' if isinstance(d, str) else str(d)


def progress_interval() -> float:
    """Seconds between progress lines of a long step (a silent gate, `land --wait`):
    GITLANE_PROGRESS_INTERVAL when it is a positive number, else 10."""
    try:
        v = float(os.environ.get("GITLANE_PROGRESS_INTERVAL", ""))
    except ValueError:
        return 10.0
    return v if 0 < v < float("inf") else 10.0


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "git-lane" / "config.toml"


def cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base)


@dataclass(frozen=True)
class Config:
    values: dict[str, Any]
    sources: dict[str, str]  # key -> "repo" | "user" | "project" | "default"
    warnings: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # key -> the file that set it

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str) -> Any:
        return self.values.get(key)


# a config file is a few dozen lines; one past this is no config of ours (EFBIG:
# invalid_config), never read whole (red team 16C F1: a sparse 3 GB one, MemoryError)
CONFIG_MAX = 1 << 20
# main's committed `.git-lane.toml` and `.worktreeinclude` (anyone who lands writes them, at
# any size: a run of one line is a few KB in git): one past this is not read at all, its
# size learnt from git first (Repo.committed_file); the project defaults are then ignored,
# nothing is copied, each with a warning (red team 17 gate F2)
COMMITTED_MAX = CONFIG_MAX


def _read_toml(path: Path) -> dict[str, Any]:
    from guard.store import read_regular  # a FIFO in the file's place must not hang

    try:
        raw = read_regular(path, limit=CONFIG_MAX)
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        if path.parent.name == "git-lane" and not path.parent.is_dir():  # the state dir
            from guard.store import not_a_directory

            raise not_a_directory(path.parent) from None
        raise Refusal(
            "invalid_config",
            f"cannot read {path}: a component of its directory is not a directory",
            next=[f"ls -ld {_q(path.parent)}"],
            details={"file": str(path)},
        ) from None
    except OSError as exc:
        raise Refusal(
            "invalid_config",
            f"cannot read {path}: {exc.strerror}",
            next=[f"ls -l {_q(path)}"],
            details={"file": str(path)},
        ) from None
    try:
        return toml_loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise Refusal(
            "invalid_config",
            f"{path} is not valid TOML ({exc})",
            next=[f"${{EDITOR:-vi}} {_q(path)}"],
            details={"file": str(path)},
        ) from None


# The hooks read these keys from the same files in POSIX sh, without a TOML parser (see
# gl_cfg_file in hooks/common.sh): one `key = value` line, the value quoted or bare up to a `#`,
# reading stops at the first table. A file whose TOML meaning differs from what that
# reader sees (a multi-line string that holds `enabled = false`, an escape in main_branch,
# a quoted key, ...) would protect another branch than the engine uses, or none: refused.
HOOK_KEYS = ("enabled", "main_branch", "sync_policy")
_SH_SPACE = " \t\n\v\f\r"
_BARE_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def _element(line: str) -> bool:
    return len(line) >= 3 and (
        (line[0] == '"' and line.endswith('",')) or (line[0] == "'" and line.endswith("',"))
    )


def _ml_open(v: str) -> str | None:
    """The delimiter of a multi-line string a value opens and does not close on its line
    (gl_cfg_file's gl_ml): its lines up to the closing one are skipped."""
    v = v.lstrip(_SH_SPACE)
    for d in ('"""', "'''"):
        if v.startswith(d) and not _ml_closes(v[3:], d):
            return d
    return None


def _ml_closes(text: str, d: str) -> bool:
    """gl_ml_closes: does `text` close a multi-line string opened by `d`? A literal one
    at its first delimiter; a basic one at the first delimiter no backslash escapes (in
    TOML a backslash there takes the next character with it)."""
    if d == "'''":
        return d in text
    i = 0
    while True:
        q, b = text.find('"""', i), text.find("\\", i)
        if q < 0:
            return False
        if b < 0 or q < b:
            return True
        i = b + 2


def _sh_read(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """gl_cfg_file's walk: the (key, value) lines it reads before any [table], value as
    written after `=` (left-trimmed), and the first line it cannot read (or the line of
    a multi-line string that never ends), None when there is none."""
    pairs: list[tuple[str, str]] = []
    in_array = False
    ml: str | None = None
    opened = ""
    for raw in text.replace("\0", "").split("\n"):
        line = raw.lstrip(_SH_SPACE)
        if ml is not None:
            if _ml_closes(line, ml):
                ml = None
            continue
        if in_array:
            t = line.rstrip(_SH_SPACE)
            if t == "]":
                in_array = False
            elif not (t == "" or t.startswith("#") or _element(t)):
                return pairs, raw
            continue
        if line == "" or line.startswith("#"):
            continue
        if line.startswith("["):
            return pairs, None
        k, eq, v = line.partition("=")
        if not eq or not _BARE_KEY.fullmatch(k.rstrip(_SH_SPACE)):
            return pairs, raw
        v = v.lstrip(_SH_SPACE)
        ml, opened = _ml_open(v), raw
        if ml is None and v.rstrip(_SH_SPACE) == "[":
            in_array = True
            continue
        pairs.append((k.rstrip(_SH_SPACE), v))
    return pairs, (opened if ml is not None else None)


def unreadable_line(text: str) -> str | None:
    """The first line before any [table] that gl_cfg_file cannot read (not a blank, a
    comment, `key = value` with a bare key, a string element of a multi-line array, or
    a line of a multi-line string), None when there is none: the hooks then refuse,
    whatever else the file says."""
    return _sh_read(text)[1]


def hook_view(text: str) -> dict[str, str] | None:
    """What the hooks' sh reader takes from a config file: gl_cfg_file, line for line
    (tests/test_shared_decisions.py holds the two equal). The shell's `read` drops NULs.
    None where gl_cfg_file gives up (a line it cannot read; a main_branch no branch can
    have: the hooks refuse)."""
    pairs, bad = _sh_read(text)
    if bad is not None:
        return None
    out: dict[str, str] = {}
    for k, v in pairs:
        if k not in HOOK_KEYS:
            continue
        if v.startswith('"'):
            v = v[1:].split('"', 1)[0]
        elif v.startswith("'"):
            v = v[1:].split("'", 1)[0]
        else:
            v = v.split("#", 1)[0].rstrip(_SH_SPACE)
        if k == "main_branch" and v and _branch(v) is not None:
            return None
        out[k] = v
    return out


def check_hook_view(path: Path, data: dict[str, Any]) -> None:
    try:
        from guard.store import read_regular

        text = read_regular(path).decode("utf-8", "surrogateescape")
    except OSError:
        return
    sh = hook_view(text)
    bad = unreadable_line(text)
    if bad is not None:  # the hooks refuse every commit while the file says this
        raise Refusal(
            "invalid_config",
            f"{path}: the git hooks cannot read the line {bad.strip()!r} (they read only "
            "blanks, comments, [tables] and `key = value` lines with a bare key, and "
            "arrays of strings one element a line), so they refuse every commit; write it "
            "that way",
            next=[f"${{EDITOR:-vi}} {_q(path)}"],
            details={"file": str(path), "line": bad},
        )
    if sh is None:  # the hooks refuse every commit while the file says this
        raise Refusal(
            "invalid_config",
            f"{path}: the git hooks read main_branch from it as no branch name (they read "
            "the line as written, without TOML's escapes); write it on one line as "
            "main_branch = 'name' with a name git takes for a branch",
            next=["git lane config unset main_branch"],
            alternatives=[f"${{EDITOR:-vi}} {_q(path)}"],
            details={"file": str(path), "key": "main_branch", "toml": data.get("main_branch")},
        )
    seen = {
        "enabled": sh.get("enabled") == "false",
        "main_branch": sh.get("main_branch"),
        "sync_policy": sh.get("sync_policy"),
    }
    meant = {
        "enabled": data.get("enabled") is False,
        "main_branch": data.get("main_branch"),
        "sync_policy": data.get("sync_policy"),
    }
    for key in HOOK_KEYS:
        # the value TOML gives the key (enabled's default is true), for the alternative
        toml = data.get(key, True) if key == "enabled" else data.get(key)
        if seen[key] != meant[key]:
            shown = {"enabled": "false" if seen[key] else "true"}.get(key, seen[key])
            wanted = {"enabled": "false" if meant[key] else "true"}.get(key, meant[key])
            raise Refusal(
                "invalid_config",
                f"{path}: the git hooks read {key} as {shown!r} but TOML means {wanted!r}; "
                f'write it on one line as {key} = "value" (bare true/false for enabled), '
                "outside multi-line strings and tables",
                # the file is fixed, never the engine made to agree with a misreading
                # (`config set enabled false` to match hooks that read themselves off)
                next=[f"${{EDITOR:-vi}} {_q(path)}"],
                alternatives=[
                    f"git lane config set {key} {_q(json.dumps(toml))}"
                    "  # rewrites the file in TOML the hooks read as TOML does"
                ]
                if toml is not None
                else [],
                details={"file": str(path), "key": key, "hooks_see": seen[key], "toml": meant[key]},
            )


def _q(path: Path | str) -> str:
    import shlex

    return shlex.quote(str(path))


def _shown(value: Any) -> Any:
    """A value as a refusal's details hold it: a huge one (a 3 MB gate command) cut short."""
    text = repr(value)
    return value if len(text) <= 200 else text[:200] + f"... ({len(text)} characters)"


def _reset(key: str) -> str:
    """The command that puts a key back to a valid value: its default."""
    default = KEYS[key].default
    if default is None:
        return f"git lane config unset {key}"
    return f"git lane config set {key} {_q(json.dumps(default))}"


def validate(key: str, value: Any, path: Path | str) -> None:
    problem = KEYS[key].check(value)
    if problem:
        raise Refusal(
            "invalid_config",
            f"{path}: key {key} {problem} (got {repr(value)[:200]})",
            next=[_reset(key)],
            alternatives=[f"${{EDITOR:-vi}} {_q(path)}"],
            details={"file": str(path), "key": key, "value": _shown(value)},
        )


def check_value(key: str, value: Any) -> None:
    """A value given on the command line (`config set`): refused as such, never blaming
    a file, which is fine."""
    problem = KEYS[key].check(value)
    if problem:
        raise Refusal(
            "invalid_config",
            f"{key} {problem} (got {repr(value)[:200]}; default {default_shown(key)})",
            next=[_reset(key)],
            alternatives=["git lane config set -h  # every key with its type and default"],
            details={"key": key, "value": _shown(value), "type": type_of(key)},
        )


def load(repo_config: Path | None, user_config: Path | None = None) -> Config:
    """The owner's two files over the defaults (no project layer: see with_project).
    `user_config` replaces the user file's usual place (a bound shim reads the one its
    `git lane exec` started with, whatever XDG_CONFIG_HOME says now)."""
    values = {k: v.default for k, v in KEYS.items()}
    sources = {k: "default" for k in KEYS}
    where: dict[str, str] = {}
    warnings: list[str] = []
    files = [(user_config or user_config_path(), "user")]
    if repo_config is not None:
        files.append((repo_config, "repo"))
    for path, layer in files:  # later wins
        data = _read_toml(path)
        if data or path.exists():
            check_hook_view(path, data)
        for k, v in data.items():
            if k not in KEYS:
                warnings.append(f"{path}: unknown key {k} (ignored)")
                continue
            validate(k, v, path)
            values[k] = v
            sources[k] = layer
            where[k] = str(path)
    return Config(values, sources, warnings, where)


def with_project(owner: Config, text: bytes | TooBig | None, name: str) -> Config:
    """`owner` with the project file's allowed keys slotted in below it (where the owner
    files left the default). `text` is the file from main's committed tree (None: there
    is none; TooBig: one past COMMITTED_MAX, not read), `name` how warnings name it.
    Never refuses: anything wrong in a file that any committer can change is a warning,
    and the key keeps its owner or default value."""
    if text is None:
        return owner
    values, sources = dict(owner.values), dict(owner.sources)
    where, warnings = dict(owner.files), list(owner.warnings)
    if not isinstance(text, bytes):
        warnings.append(
            too_big(
                name,
                text.size,
                "its settings are ignored (the owner's config and the defaults apply)",
            )
        )
        return Config(values, sources, warnings, where)
    try:
        data = toml_loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        warnings.append(f"{name} is not valid TOML ({exc}); it was ignored")
        return Config(values, sources, warnings, where)
    for k, v in data.items():
        if k not in PROJECT_KEYS:
            why = "an unknown key" if k not in KEYS else "for the owner's config only"
            warnings.append(
                f"{name}: {k} is {why} (ignored; `git lane config set {k} ...` sets it)"
                if k in KEYS
                else f"{name}: {k} is {why} (ignored)"
            )
            continue
        problem = KEYS[k].check(v)
        if problem:
            warnings.append(f"{name}: key {k} {problem} (got {repr(v)[:200]}; ignored)")
            continue
        if sources[k] == "default":
            values[k] = v
            sources[k] = "project"
            where[k] = name
    return Config(values, sources, warnings, where)


def too_big(name: str, size: int, so: str) -> str:
    """The warning for main's committed `name`, `size` bytes, that was not read."""
    return (
        f"{name} in main's tree is {size:,} bytes, more than {COMMITTED_MAX:,}: "
        f"it was not read, so {so}"
    )


def parse_value(key: str, text: str) -> Any:
    """A command-line value as TOML (true, 5, ["a"]); a bare word stays a string."""
    if key not in KEYS:
        raise Refusal(
            "invalid_config",
            f"unknown key {key}",
            next=["git lane config list"],
            details={"key": key},
        )
    try:
        value = toml_loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if isinstance(KEYS[key].default, list):
            return [p.strip() for p in text.split(",") if p.strip()]
        return text
    check = KEYS[key].check
    if check(value) and not check(text):
        # `gate_command true`, `main_branch 2024`: TOML reads a bool or a number where the
        # key wants a string, and the word itself is a fine value
        return text
    return value


def write(path: Path, key: str, value: Any | None) -> None:
    """Set (or with None, remove) one key in one file, atomically."""
    import tomli_w

    from guard.store import atomic_write

    data = _read_toml(path)
    if value is None:
        data.pop(key, None)
    else:
        validate(key, value, path)
        data[key] = value
    atomic_write(path, tomli_w.dumps(data).encode())
