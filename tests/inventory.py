"""What the suite holds, for tests/README.md's before/after table: test items collected per
directory, and test functions per directory whose body asserts something itself (an
``assert``, ``pytest.raises``/``pytest.fail``, or a call of a helper named ``assert_*``,
``check_*``, ``expect_*`` or ``wait_for*``, which assert or fail).

    .venv/bin/python -m tests.inventory [ROOT]

ROOT is a checkout of the project (default: this one), so the same script counts an
older commit checked out elsewhere (``git worktree add /tmp/old <rev>``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

ASSERTING_PREFIXES = ("assert_", "check_", "expect_", "wait_for")
ASSERTING_CALLS = {"raises", "fail", "warns"}


def _asserts(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ASSERTING_CALLS or name.startswith(ASSERTING_PREFIXES):
                return True
    return False


def asserting_tests(root: Path) -> Counter[str]:
    """Test functions that assert, per directory under tests/ (``integration``, ...)."""
    counts: Counter[str] = Counter()
    for path in sorted((root / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        area = path.relative_to(root / "tests").parts[0]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name.startswith("test_")
                and _asserts(node)
            ):
                counts[area] += 1
    return counts


def collected(root: Path) -> Counter[str]:
    """Test items pytest collects, per directory under tests/."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        if line.startswith("tests/") and "::" in line:
            counts[line.split("/")[1]] += 1
    return counts


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    items, functions = collected(root), asserting_tests(root)
    print("| directory | test items | test functions that assert |")
    print("|---|---:|---:|")
    for area in sorted(set(items) | set(functions)):
        print(f"| {area} | {items[area]} | {functions[area]} |")
    print(f"| **all** | {sum(items.values())} | {sum(functions.values())} |")


if __name__ == "__main__":
    main()
