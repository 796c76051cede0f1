"""Every path the code and the docs cite exists in the repository, and nothing cites the
documents that used to live outside it (a clone has only what is here)."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP = (
    "docs",
    "services",
    "gateway",
    "bookie",
    "auditor",
    "replicator",
    "tests",
    "benchmarks",
    "openapi",
    "deploy",
)
CITED = re.compile(
    r"(?<![\w./-])((?:"
    + "|".join(TOP)
    + r")/[\w./{}-]*\w\.(?:py|md|json|ya?ml|toml|sh|ts|js|html|css))"
)
OUTSIDE = re.compile(r"\.\./shared|(?<![\w/])(?:API|PROTOCOL|STYLE|ARCHITECTURE)\.md")
SUFFIXES = (".py", ".md", ".toml", ".yml", ".yaml", ".json", ".ts", ".sh", ".cfg", ".ini")
# Tests whose data are made-up paths (a source tree, a test layout), not citations.
MADE_UP_PATHS = {"tests/unit/test_native.py", "tests/unit/test_scheduling.py"}


@functools.cache
def sources() -> tuple[tuple[str, str], ...]:
    """Every tracked text file but the generated clients, as (path, text), read once."""
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return tuple(
        (name, (REPO / name).read_text(errors="replace"))
        for name in out
        if (name.endswith(SUFFIXES) or name in ("Makefile", "Dockerfile"))
        and "openapi/clients/" not in name
    )


def test_every_cited_path_exists() -> None:
    missing = []
    for rel, text in sources():
        if rel in MADE_UP_PATHS:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for cited in CITED.findall(line):
                if "{" in cited or "*" in cited:
                    continue  # a pattern, not a file
                if not (REPO / cited).exists():
                    missing.append(f"{rel}:{n}: {cited}")
    assert missing == [], "\n".join(missing)


def test_nothing_cites_documents_outside_the_repository() -> None:
    found = []
    for rel, text in sources():
        if REPO / rel == Path(__file__).resolve():
            continue  # its own patterns
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert found == [], "\n".join(found)


SECTION = re.compile(
    r'((?:docs/\w+|benchmarks/README|tests/README)\.md)(?:``)?,?\s*(?:§\s*\d+\s*)?"([^"]+)"'
)


@functools.cache
def headings(doc: Path) -> list[str]:
    return [
        " ".join(line.lstrip("#").split()).lower()
        for line in doc.read_text().splitlines()
        if line.startswith("#")
    ]


def test_every_cited_section_exists() -> None:
    """A citation ``docs/api.md "Errors"`` names a heading of that document (its words may
    be the start or a part of the heading)."""
    missing = []
    for rel, text in sources():
        if rel in MADE_UP_PATHS:
            continue
        for match in SECTION.finditer(text):
            doc, section = REPO / match.group(1), " ".join(match.group(2).split()).lower()
            if not doc.exists() or not any(section in heading for heading in headings(doc)):
                missing.append(f"{rel}: {match.group(1)} {match.group(2)!r}")
    assert missing == [], "\n".join(missing)
