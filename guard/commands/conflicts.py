"""`git lane conflicts [--include-dirty] [KEYS...]`: which lanes would conflict with main
and with each other, and on which paths (guard/conflicts.py). Read-only: a worker may run
it (for its own lane, as status)."""

from __future__ import annotations

from guard import conflicts
from guard.repo import Repo
from guard.results import ConflictsResult


def run(repo: Repo, keys: list[str] | None = None, include_dirty: bool = False) -> ConflictsResult:
    pred = conflicts.prediction(repo, keys or None, include_dirty)
    n = {s: sum(p["state"] == s for p in pred.pairs) for s in ("conflict", "overlap", "clean")}
    return {
        "ok": True,
        "code": "ok",
        "main": {"branch": repo.main_branch, "sha": pred.main},
        "include_dirty": include_dirty,
        "lanes": pred.lanes,
        "pairs": pred.pairs,
        "counts": {
            "pairs": len(pred.pairs),
            "conflict": n["conflict"],
            "overlap": n["overlap"],
            "clean": n["clean"],
            "skipped": sum(v["skipped"] is not None for v in pred.lanes),
        },
        "warnings": list(repo.config.warnings),
    }
