"""The compiled add path (services/native.py): used when built and current, never stale."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services import native

SWITCHED_OFF = os.environ.get(native.ENV_SWITCH) == "0"


@pytest.mark.skipif(SWITCHED_OFF, reason="QUIRE_NATIVE=0: the tests run every module as written")
def test_the_add_path_modules_are_loaded_compiled() -> None:
    """``make test`` builds them first; a stale or missing build fails here, not silently."""
    assert native.STATUS == f"on: {len(native.MODULES)} modules compiled with mypyc", (
        f"{native.STATUS}: run 'make native'"
    )
    assert len(native.module_names()) == len(native.MODULES)
    for name in native.module_names():
        module = importlib.import_module(name)
        assert module.__file__ is not None
        assert Path(module.__file__).is_relative_to(native.BUILD_DIR), name
        assert not module.__file__.endswith(".py"), name
    # The rest is as written.
    assert importlib.import_module("services.ledger_client.handles").__file__.endswith(
        "services/ledger_client/handles.py"
    )


def run_python(code: str, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd="/",
    )
    return out.stdout.strip()


@pytest.mark.skipif(SWITCHED_OFF, reason="QUIRE_NATIVE=0: the tests run every module as written")
def test_a_service_process_imports_the_compiled_modules_unless_switched_off() -> None:
    """What ``python -m gateway`` / ``bookie`` does first: import its package, then its
    modules (a package that did not import services first would load them as written)."""
    code = (
        "import gateway.fastpath, bookie.app, services.native as n;"
        "print(gateway.fastpath.__file__, n.STATUS, sep='|')"
    )
    file, status = run_python(code, QUIRE_NATIVE="1").split("|")
    assert status.startswith("on: "), status
    assert file.startswith(str(native.BUILD_DIR))

    file, status = run_python(code, QUIRE_NATIVE="0").split("|")
    assert status == "off: QUIRE_NATIVE=0"
    assert file.endswith("gateway/fastpath.py")


def fake_tree(root: Path) -> None:
    for package in native.PACKAGES:
        (root / package / "sub").mkdir(parents=True)
        (root / package / "__init__.py").write_text(f'"""{package}"""\n')
        (root / package / "sub" / "mod.py").write_text("X = 1\n")


def manifest_of(root: Path) -> dict[str, object]:
    return {"python": native.python_tag(), "modules": {}, "sources": native.fingerprint(root)}


def test_any_changed_added_or_removed_source_makes_a_build_stale(tmp_path: Path) -> None:
    fake_tree(tmp_path)
    manifest = manifest_of(tmp_path)
    assert native.stale_reason(manifest, tmp_path) is None

    mod = tmp_path / "gateway" / "sub" / "mod.py"
    os.utime(mod, ns=(1, 1))  # touched, same bytes: still current
    assert native.stale_reason(manifest, tmp_path) is None

    mod.write_text("X = 2\n")  # same size, new bytes
    assert native.stale_reason(manifest, tmp_path) == "gateway/sub/mod.py changed since the build"
    mod.write_text("X = 1\n")
    assert native.stale_reason(manifest, tmp_path) is None

    (tmp_path / "bookie" / "new.py").write_text("")
    assert native.stale_reason(manifest, tmp_path) == "bookie/new.py was added since the build"
    (tmp_path / "bookie" / "new.py").unlink()

    (tmp_path / "services" / "sub" / "mod.py").unlink()
    removed = "services/sub/mod.py was removed since the build"
    assert native.stale_reason(manifest, tmp_path) == removed


def test_a_build_for_another_python_is_not_used(tmp_path: Path) -> None:
    fake_tree(tmp_path)
    manifest = {**manifest_of(tmp_path), "python": "cpython-399 .so"}
    reason = native.stale_reason(manifest, tmp_path)
    assert reason is not None and reason.startswith("built for cpython-399 .so, this is ")


def test_check_uses_a_build_only_when_complete_and_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(native.ENV_SWITCH, raising=False)
    root, build = tmp_path / "src", tmp_path / "build"
    fake_tree(root)
    build.mkdir()
    assert native.check(build, root) == ({}, "off: not built (make native)")

    # A damaged build is never used, and never stops a process from starting.
    for damaged in ("{not json", "[]", '{"python": "%s", "sources": {"bookie/__init__.py": 1}}'):
        (build / native.MANIFEST).write_text(damaged.replace("%s", native.python_tag()))
        files, status = native.check(build, root)
        assert files == {} and status.startswith("off: "), status
    assert status.startswith("off: damaged build (AttributeError")

    so = build / "gateway" / "sub" / "mod.so"
    manifest = {**manifest_of(root), "modules": {"gateway.sub.mod": "gateway/sub/mod.so"}}
    (build / native.MANIFEST).write_text(json.dumps(manifest))
    assert native.check(build, root) == ({}, f"off: {so} is missing (make native)")

    so.parent.mkdir(parents=True)
    so.write_bytes(b"")
    assert native.check(build, root) == (
        {"gateway.sub.mod": so},
        "on: 1 modules compiled with mypyc",
    )

    (root / "services" / "sub" / "mod.py").write_text("X = 3\n")
    assert native.check(build, root) == (
        {},
        "off: services/sub/mod.py changed since the build (make native)",
    )

    monkeypatch.setenv(native.ENV_SWITCH, "0")
    assert native.check(build, root) == ({}, "off: QUIRE_NATIVE=0")
    (root / "services" / "sub" / "mod.py").write_text("X = 1\n")
    assert native.check(build, root, switch=False)[1] == "on: 1 modules compiled with mypyc"


def test_the_finder_answers_only_for_its_modules(tmp_path: Path) -> None:
    so = tmp_path / "lane.cpython-311-x86_64-linux-gnu.so"
    finder = native.NativeFinder({"services.web.lane": so})
    spec = finder.find_spec("services.web.lane", None)
    assert spec is not None and spec.origin == str(so)
    assert spec.loader is not None and type(spec.loader).__name__ == "ExtensionFileLoader"
    assert finder.find_spec("services.web.body", None) is None
