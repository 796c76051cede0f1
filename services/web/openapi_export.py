"""Export each service's OpenAPI document to ``openapi/<service>.json`` (``make openapi``).

    python -m services.web.openapi_export           # (re)write the files
    python -m services.web.openapi_export --check   # exit 1 if a file is stale

Each document comes from the service's ``create_app(settings)`` with default
settings (not read from the environment, so the output is the same
everywhere); building an app does no I/O. A service whose module does not
exist yet is skipped. ``tests/unit/web/test_openapi.py`` fails when a file is
stale.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from services.settings import (
    AuditorSettings,
    BookieSettings,
    CommonSettings,
    GatewaySettings,
    ReplicatorSettings,
)

OPENAPI_DIR = Path(__file__).resolve().parents[2] / "openapi"


@dataclass(frozen=True, slots=True)
class Exported:
    """One service's document: ``<module>.create_app(settings_cls defaults)`` -> ``<name>.json``."""

    name: str
    module: str
    settings: type[CommonSettings]

    def available(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def document(self) -> dict[str, Any]:
        app_module = importlib.import_module(self.module)
        app: FastAPI = app_module.create_app(self.settings.model_construct())
        return app.openapi()

    @property
    def path(self) -> Path:
        return OPENAPI_DIR / f"{self.name}.json"


# Adding a service's document is one line here.
EXPORTS: tuple[Exported, ...] = (
    Exported("bookie", "bookie.app", BookieSettings),
    Exported("gateway", "gateway.app", GatewaySettings),
    Exported("auditor", "auditor.app", AuditorSettings),
    Exported("replicator", "replicator.app", ReplicatorSettings),
)


def render(document: dict[str, Any]) -> str:
    """The stable text form: sorted keys, indent 2, trailing newline."""
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def available_exports() -> list[Exported]:
    return [e for e in EXPORTS if e.available()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.web.openapi_export", description=__doc__
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    stale = []
    for export in EXPORTS:
        if not export.available():
            print(f"skipped {export.name}: no module {export.module} yet")
            continue
        text = render(export.document())
        current = export.path.read_text() if export.path.exists() else None
        if current == text:
            print(f"unchanged {export.path}")
        elif args.check:
            stale.append(export.path)
            print(f"stale {export.path}: run 'make openapi'")
        else:
            export.path.parent.mkdir(parents=True, exist_ok=True)
            export.path.write_text(text)
            print(f"wrote {export.path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
