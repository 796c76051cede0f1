"""The add path's hot modules, compiled to C with mypyc, used when built and current.

``make native`` (part of ``make setup``, so of ``make run`` and ``make test``) runs
``ensure()``, which builds unless the build in place is current: mypyc compiles
``MODULES`` into ``.native/`` beside the packages, with a manifest of the build's Python
and of every source file of the packages (``PACKAGES``), compiled or not: compiled code
keeps what it saw of the modules it imports (their constants and their classes'
layouts), so any change makes the build stale.

At import, ``services/__init__.py`` calls ``install()``. When the manifest matches this
Python and the sources, a finder on ``sys.meta_path`` loads ``MODULES`` from ``.native/``
instead of their ``.py`` files; otherwise every module runs as written and ``STATUS``
says why (``QUIRE_NATIVE=0``, not built, another Python, a source changed since the
build). Compiled or not, the code is the same source and does the same thing; the
compiled modules check their annotated types at run time, so a value of the wrong type
is a ``TypeError`` there rather than a silent pass. Each service logs ``STATUS`` as it
starts. What it buys: ``benchmarks/README.md``, "native".

The modules are chosen from the gateway's add path (the lane, the fast path, the bookie
senders and client, the write handle, the framing, the budget) where they pass mypy's
strict mode and use nothing mypyc compiles differently (no ``isinstance(x, bool)`` test of
a value annotated ``int``: a compiled function receives ``True`` as ``1``).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / ".native"
MANIFEST = "manifest.json"
GROUP = "quire_native"  # the shared library is the top-level module ``quire_native__mypyc``
PACKAGES = ("services", "gateway", "bookie")
MODULES = (
    "services/web/lane.py",
    "services/budget.py",
    "services/wire/framing.py",
    "services/bookie_client/adds.py",
    "services/bookie_client/answers.py",
    "services/bookie_client/channel.py",
    "services/bookie_client/results.py",
    "services/bookie_client/transport.py",
    "services/protocol/adds.py",
    "services/protocol/ensemble.py",
    "services/protocol/writer.py",
    "gateway/http/auth.py",
    "gateway/fastpath.py",
    "services/ledger_client/senders.py",
)
ENV_SWITCH = "QUIRE_NATIVE"  # "0": run every module as written

STATUS = "off: not installed"


def module_names() -> list[str]:
    """The dotted names of ``MODULES``."""
    return [source.removesuffix(".py").replace("/", ".") for source in MODULES]


def python_tag() -> str:
    """What a build is only good for: this interpreter and its extension suffix."""
    return f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}"


def source_files(root: Path = ROOT) -> list[Path]:
    """Every Python source of ``PACKAGES`` under ``root``, sorted."""
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def fingerprint(root: Path = ROOT) -> dict[str, dict[str, int | str]]:
    """Each source's size, modification time and SHA-256, by path relative to ``root``."""
    prints: dict[str, dict[str, int | str]] = {}
    for path in source_files(root):
        stat = path.stat()
        prints[path.relative_to(root).as_posix()] = {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return prints


def stale_reason(manifest: dict[str, object], root: Path = ROOT) -> str | None:
    """Why a build with ``manifest`` does not match this Python and the sources under
    ``root`` (None when it does). A file whose size and modification time match is taken
    as unchanged; any other is hashed, so a touched but unchanged file does not count."""
    if manifest.get("python") != python_tag():
        return f"built for {manifest.get('python')}, this is {python_tag()}"
    built = manifest.get("sources")
    if not isinstance(built, dict):
        return "the manifest lists no sources"
    current = {path.relative_to(root).as_posix(): path for path in source_files(root)}
    for name in sorted(set(built) | set(current)):
        if name not in current:
            return f"{name} was removed since the build"
        if name not in built:
            return f"{name} was added since the build"
        was, stat = built[name], current[name].stat()
        if stat.st_size == was.get("size") and stat.st_mtime_ns == was.get("mtime_ns"):
            continue
        if hashlib.sha256(current[name].read_bytes()).hexdigest() != was.get("sha256"):
            return f"{name} changed since the build"
    return None


class NativeFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules (and their shared library) in a build directory."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


def check(
    build_dir: Path = BUILD_DIR, root: Path = ROOT, *, switch: bool = True
) -> tuple[dict[str, Path], str]:
    """The compiled modules' files by module name, and a status line; no files when
    the build is missing, stale, damaged or (``switch``) switched off. Never raises:
    every process runs it as it starts, and running as written is always safe."""
    if switch and os.environ.get(ENV_SWITCH, "1") == "0":
        return {}, f"off: {ENV_SWITCH}=0"
    try:
        return _check(build_dir, root)
    except FileNotFoundError:
        return {}, "off: not built (make native)"
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        return {}, f"off: damaged build ({exc!r}; make native)"


def _check(build_dir: Path, root: Path) -> tuple[dict[str, Path], str]:
    manifest = json.loads((build_dir / MANIFEST).read_text())
    if not isinstance(manifest, dict):
        raise ValueError("the manifest is not an object")
    reason = stale_reason(manifest, root)
    if reason is not None:
        return {}, f"off: {reason} (make native)"
    modules = manifest.get("modules")
    if not isinstance(modules, dict):
        return {}, "off: the manifest lists no modules"
    files = {name: build_dir / rel for name, rel in modules.items()}
    missing = [str(f) for f in files.values() if not f.exists()]
    if missing:
        return {}, f"off: {missing[0]} is missing (make native)"
    compiled = sum(1 for name in files if not name.endswith("__mypyc"))
    return files, f"on: {compiled} modules compiled with mypyc"


def install() -> str:
    """Put the finder first on ``sys.meta_path`` when the build is current (once); the
    status line either way."""
    global STATUS
    if any(isinstance(f, NativeFinder) for f in sys.meta_path):
        return STATUS
    files, STATUS = check()
    loaded = [name for name in files if name in sys.modules]
    if loaded:  # imported before the finder: mixing the two would not be the same code
        STATUS = f"off: {loaded[0]} was imported before services"
    elif files:
        sys.meta_path.insert(0, NativeFinder(files))
    return STATUS


def ensure() -> None:
    """Build unless the build in place is current (``make native``)."""
    if not check(switch=False)[0]:
        build()


def _module_name(rel: Path) -> str:
    """``services/web/lane.cpython-311-x86_64-linux-gnu.so`` -> ``services.web.lane``."""
    return ".".join((*rel.parent.parts, rel.name.split(".", 1)[0]))


def build(root: Path = ROOT, build_dir: Path = BUILD_DIR) -> None:
    """Compile ``MODULES`` into ``build_dir`` (replaced whole, once the build is done)."""
    from mypyc.build import mypycify  # the build's own tools: only a developer install has them
    from setuptools import setup  # type: ignore[import-untyped]

    prints = fingerprint(root)  # before compiling: a file edited meanwhile makes it stale
    work = root / "build" / "native"
    fresh = build_dir.with_name(build_dir.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    print(f"compiling {len(MODULES)} modules with mypyc into {build_dir} (about a minute)")
    cwd = os.getcwd()
    os.chdir(root)  # mypycify names modules by their paths relative to the current directory
    try:
        extensions = mypycify(list(MODULES), group_name=GROUP, target_dir=str(work / "c"))
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)  # not the project's: setuptools would read its pyproject.toml
        setup(
            name="quire-native",
            ext_modules=extensions,
            script_args=[
                "--quiet",
                "build_ext",
                "--build-lib",
                str(fresh),
                "--build-temp",
                str(work / "o"),
            ],
        )
    finally:
        os.chdir(cwd)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    modules = {
        _module_name(path.relative_to(fresh)): path.relative_to(fresh).as_posix()
        for path in sorted(fresh.rglob(f"*{suffix}"))
    }
    expected = set(module_names())
    if not expected <= set(modules):
        raise SystemExit(f"mypyc built {sorted(modules)}, not all of {sorted(expected)}")
    manifest = {"python": python_tag(), "modules": modules, "sources": prints}
    (fresh / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    old = build_dir.with_name(build_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if build_dir.exists():
        build_dir.rename(old)
    fresh.rename(build_dir)
    shutil.rmtree(old, ignore_errors=True)
    print(f"built {len(modules) - 1} modules into {build_dir}")
