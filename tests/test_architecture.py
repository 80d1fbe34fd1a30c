"""The shape the tree promises, checked: every refusal code is registered and documented,
only the CLI imports click, the import graph has no cycle, hot-path modules import only
the standard library, and the land pipeline calls its gates in order."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from conftest import ROOT

from guard.errors import CODES

GUARD = ROOT / "guard"
MODULES = sorted(GUARD.rglob("*.py"))


def _modname(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module of ours `path` imports, at any depth (lazy imports count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            for a in node.names:  # `from guard import git` imports the module guard.git
                out.add(f"{node.module}.{a.name}")
    return out


def _graph() -> dict[str, set[str]]:
    names = {_modname(p) for p in MODULES}
    return {
        _modname(p): {m for m in _imports(p) if m in names and m != _modname(p)} for p in MODULES
    }


def test_every_refusal_uses_a_registered_code() -> None:
    bad = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Refusal"
            ):
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Constant) and arg.value in CODES):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"Refusal(...) with an unregistered or non-literal code at {bad}"


def test_every_hook_refusal_uses_a_registered_code() -> None:
    codes = set()
    for hook in (ROOT / "hooks").iterdir():
        codes.update(re.findall(r"gl_refuse [a-z-]+ ([a-z_]+)", hook.read_text()))
    assert codes, "no gl_refuse call found in hooks/"
    assert codes <= set(CODES), codes - set(CODES)


def test_every_registered_code_is_documented_and_nothing_else() -> None:
    doc = (ROOT / "docs" / "codes.md").read_text()
    refusals = doc.split("## Refusals", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", refusals, re.M))
    assert set(CODES) - documented == set(), "registered but not in docs/codes.md"
    assert documented - set(CODES) == set(), "in docs/codes.md but not registered"


def test_only_the_cli_imports_click() -> None:
    users = sorted(_modname(p) for p in MODULES if "click" in _imports(p))
    assert users == ["guard.cli"], users


def test_commands_are_one_module_each_and_never_print() -> None:
    for path in (GUARD / "commands").glob("*.py"):
        if path.name in ("__init__.py", "demo.py"):  # the demo is a walkthrough on a stream
            continue
        tree = ast.parse(path.read_text())
        calls = {getattr(n.func, "id", None) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert "print" not in calls, path
        assert "sys.stdout" not in path.read_text() and "sys.stderr" not in path.read_text(), path


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(m) :], m]))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_hot_path_modules_import_only_the_standard_library() -> None:
    """What the hooks' Python step and the shims' slow path load (guard.hookcheck,
    guard.shim and all they reach) may not pull in click, plumbum or psutil at import
    time: they cost 50-150 ms each."""
    graph = _graph()
    seen: set[str] = set()
    todo = ["guard.hookcheck", "guard.shim", "guard.shimpolicy"]  # hooks' and shims' Python
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(graph.get(n, ()))
    heavy = {"click", "plumbum", "psutil", "tomli_w"}
    for mod in sorted(seen):
        path = ROOT / (mod.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / mod.replace(".", "/") / "__init__.py"
        top_level = {
            a.name.split(".")[0]
            for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for a in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        }
        assert not (top_level & heavy), f"{mod} imports {top_level & heavy} at module level"
        for name in top_level:
            assert name == "guard" or name == "__future__" or name in sys.stdlib_module_names, (
                mod,
                name,
            )


def test_land_calls_its_gates_in_order() -> None:
    src = (GUARD / "commands" / "land.py").read_text()
    order = [
        "g1_lock(",
        "g2_clean(",
        "g3_fresh(",
        "g6_hub(",
        "g4_gate(",
        "g5_move_main(",
        "g7_epoch(",
    ]
    body = src.split("\ndef run(", 1)[1].split("\n# -- the gates", 1)[0]
    pos = [body.find(g) for g in order]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), dict(zip(order, pos, strict=True))
    for g in order:
        assert f"\ndef {g}" in src, f"gate function {g[:-1]} is missing"
