"""Generate the gateway's clients from ``openapi/gateway.json`` (``make openapi``).

- Python: ``openapi-python-client`` (in its own venv, ``.venv-openapi``: it pins typer
  and pydantic versions the project's venv must not take) writes the ``quire-client``
  package to ``openapi/clients/python/``.
- TypeScript: ``openapi-typescript`` (``openapi/clients/typescript/node_modules``, from
  its package-lock.json) writes the types ``src/schema.d.ts`` that ``openapi-fetch`` uses.

``--check`` generates into a temporary directory and exits 1 if a checked-in client
differs (what the staleness test runs)."""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "openapi" / "gateway.json"
CLIENTS = ROOT / "openapi" / "clients"
PYTHON_OUT = CLIENTS / "python"
PYTHON_CONFIG = CLIENTS / "python-config.yaml"
GENERATOR_VENV = ROOT / ".venv-openapi"
TS_DIR = CLIENTS / "typescript"
TS_TYPES = Path("src") / "schema.d.ts"


class ToolMissing(RuntimeError):
    """A generator is not installed (``make setup`` installs both)."""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{output}")


def generate_python(out: Path) -> None:
    """The Python client package, written to ``out`` (replaced)."""
    tool = GENERATOR_VENV / "bin" / "openapi-python-client"
    if not tool.exists():
        raise ToolMissing(f"{tool} is missing: run 'make setup'")
    env = dict(os.environ)
    # Its post-hooks run ruff: the generator venv's own, pinned with it.
    env["PATH"] = f"{GENERATOR_VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "out"
        argv = [str(tool), "generate", "--path", str(SPEC), "--config", str(PYTHON_CONFIG)]
        argv += ["--meta", "setup", "--output-path", str(work)]
        _run(argv, cwd=Path(tmp), env=env)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(work, out)


def generate_typescript(out: Path) -> None:
    """The TypeScript types, written to the file ``out``."""
    tool = TS_DIR / "node_modules" / ".bin" / "openapi-typescript"
    if not tool.exists():
        raise ToolMissing(f"{tool} is missing: run 'make setup' (npm ci)")
    # Fields with a default are optional in what a caller sends (not required).
    _run([str(tool), str(SPEC), "--default-non-nullable", "false", "-o", str(out)], cwd=TS_DIR)


def _tree_differences(a: Path, b: Path) -> list[str]:
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__", ".ruff_cache", "quire_client.egg-info"])
    out = [f"only in {a}: {n}" for n in cmp.left_only] + [
        f"only in {b}: {n}" for n in cmp.right_only
    ]
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    out += [f"differs: {a / n}" for n in mismatch + errors]
    for sub in cmp.common_dirs:
        out += _tree_differences(a / sub, b / sub)
    return out


def stale() -> list[str]:
    """What a fresh generation would change in the checked-in clients."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh_py = Path(tmp) / "python"
        generate_python(fresh_py)
        problems = (
            _tree_differences(PYTHON_OUT, fresh_py)
            if PYTHON_OUT.exists()
            else [f"{PYTHON_OUT} is missing"]
        )
        fresh_ts = Path(tmp) / "schema.d.ts"
        generate_typescript(fresh_ts)
        current = TS_DIR / TS_TYPES
        if not current.exists() or current.read_bytes() != fresh_ts.read_bytes():
            problems.append(f"differs: {current}")
        return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.web.clients", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a client is stale")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = stale()
            for line in problems:
                print(line)
            if problems:
                print("the generated clients are stale: run 'make openapi'")
            return 1 if problems else 0
        generate_python(PYTHON_OUT)
        print(f"wrote {PYTHON_OUT}")
        generate_typescript(TS_DIR / TS_TYPES)
        print(f"wrote {TS_DIR / TS_TYPES}")
    except ToolMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
