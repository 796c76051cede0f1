"""docker-compose.yml and the Dockerfile, checked statically (no Docker engine here).

What must hold: a three-node ZooKeeper ensemble; every Quire service sets only
real settings of services/settings.py, with values those settings accept;
each listens on and advertises its own host name; ports, ZooKeeper
connection strings, volumes and depends_on are consistent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.settings import (
    AuditorSettings,
    BookieSettings,
    CommonSettings,
    GatewaySettings,
    ReplicatorSettings,
)

REPO = Path(__file__).resolve().parents[2]
SETTINGS: dict[str, type[CommonSettings]] = {
    "bookie": BookieSettings,
    "gateway": GatewaySettings,
    "auditor": AuditorSettings,
    "replicator": ReplicatorSettings,
}
DEFAULT_PORTS = {"bookie": 3181, "gateway": 8080, "auditor": 8091, "replicator": 8092}
INTERPOLATION = re.compile(r"^\$\{(?P<name>[A-Z0-9_]+)(?::?[-?][^}]*)?\}$")
ZK_SERVER = re.compile(r"^server\.(\d+)=([\w.-]+):(\d+):(\d+)(?:;(\d+))?$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _zookeepers(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: s for name, s in services.items() if str(s.get("image", "")).startswith("zookeeper")
    }


def _quire_services(services: dict[str, dict[str, Any]]) -> dict[str, tuple[str, dict]]:
    """name -> (module, service) for every service that runs ``python -m <module>``."""
    found = {}
    for name, service in services.items():
        command = service.get("command")
        if isinstance(command, str):
            command = command.split()
        if command and command[:2] == ["python", "-m"]:
            found[name] = (command[2], service)
    return found


def _zk_client_addresses(services: dict[str, dict[str, Any]]) -> list[str]:
    """host:client_port of every ZooKeeper server, from ZOO_SERVERS."""
    zookeepers = _zookeepers(services)
    servers = _env(next(iter(zookeepers.values())))["ZOO_SERVERS"].split()
    addresses = []
    for server in servers:
        match = ZK_SERVER.match(server)
        assert match, f"bad ZOO_SERVERS entry {server!r}"
        addresses.append(f"{match[2]}:{match[5] or 2181}")
    return addresses


def test_a_three_node_zookeeper_ensemble(services: dict[str, dict[str, Any]]) -> None:
    """Three ZooKeeper servers of the official image, ids 1-3, each listing all three."""
    zookeepers = _zookeepers(services)
    assert len(zookeepers) == 3
    ids = set()
    servers_lists = set()
    for name, service in zookeepers.items():
        env = _env(service)
        assert service.get("hostname", name) == name
        ids.add(int(env["ZOO_MY_ID"]))
        servers_lists.add(env["ZOO_SERVERS"])
        assert service.get("healthcheck"), f"{name} has no healthcheck"
    assert ids == {1, 2, 3}
    assert len(servers_lists) == 1, "every ZooKeeper server must list the same ensemble"
    entries = [ZK_SERVER.match(s) for s in next(iter(servers_lists)).split()]
    assert all(entries)
    assert {int(m[1]): m[2] for m in entries if m} == {
        int(_env(s)["ZOO_MY_ID"]): name for name, s in zookeepers.items()
    }


def test_every_quire_service_is_there(services: dict[str, dict[str, Any]]) -> None:
    """Four bookies (a spare for re-replication), a gateway, an auditor and a replicator."""
    modules = [module for module, _ in _quire_services(services).values()]
    assert sorted(modules) == sorted(["bookie"] * 4 + ["gateway", "auditor", "replicator"])


def test_environment_names_are_real_settings(services: dict[str, dict[str, Any]]) -> None:
    """Every QUIRE_* variable of a service is a setting of that service, with a valid value."""
    for name, (module, service) in _quire_services(services).items():
        cls = SETTINGS[module]
        values = {}
        for key, value in _env(service).items():
            assert key.startswith("QUIRE_"), f"{name}: {key} is not a QUIRE_* setting"
            field = key.removeprefix("QUIRE_").lower()
            assert field in cls.model_fields, f"{name}: {key} is not a setting of {module}"
            interpolated = INTERPOLATION.match(value)
            if interpolated:
                assert interpolated["name"] == key, f"{name}: {key} interpolates another name"
                value = "x"
            values[field] = value
        cls.model_validate(values)  # raises on an impossible value


def test_each_service_listens_on_its_own_host_name(services: dict[str, dict[str, Any]]) -> None:
    """QUIRE_HOST is the service's host name (its advertised identity); host names differ."""
    hosts = []
    for name, (_, service) in _quire_services(services).items():
        env = _env(service)
        assert env.get("QUIRE_HOST") == service.get("hostname") == name
        hosts.append(name)
    assert len(hosts) == len(set(hosts))


def test_ports_are_consistent(services: dict[str, dict[str, Any]]) -> None:
    """QUIRE_PORT is the API.md default of the service, and any published port maps onto it."""
    published = []
    for name, (module, service) in _quire_services(services).items():
        port = int(_env(service)["QUIRE_PORT"])
        assert port == DEFAULT_PORTS[module], f"{name} listens on {port}"
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            assert int(parts[-1]) == port, f"{name} publishes {mapping} but listens on {port}"
            published.append(int(parts[-2]) if len(parts) > 1 else port)
    assert len(published) == len(set(published)), "two services publish the same host port"
    assert "gateway" in services and services["gateway"].get("ports"), "publish the gateway"


def test_zookeeper_connection_string_lists_the_ensemble(
    services: dict[str, dict[str, Any]],
) -> None:
    """Every Quire service connects to all three ZooKeeper servers, on their client port."""
    expected = sorted(_zk_client_addresses(services))
    assert len(expected) == 3
    for name, (_, service) in _quire_services(services).items():
        zk = _env(service)["QUIRE_ZK"]
        assert sorted(zk.split(",")) == expected, f"{name}: QUIRE_ZK={zk}"


def test_health_checks_use_health(services: dict[str, dict[str, Any]]) -> None:
    """Each Quire service's health check asks its own /health."""
    for name, (_, service) in _quire_services(services).items():
        test = service.get("healthcheck", {}).get("test")
        assert test, f"{name} has no healthcheck"
        text = " ".join(test) if isinstance(test, list) else str(test)
        assert "/health" in text, f"{name}: healthcheck does not call /health"
        assert "QUIRE_HOST" in text and "QUIRE_PORT" in text, f"{name}: fixed address"


def test_depends_on_references_exist(services: dict[str, dict[str, Any]]) -> None:
    """depends_on names real services; every Quire service waits for all of ZooKeeper."""
    zookeepers = set(_zookeepers(services))
    for name, service in services.items():
        depends = service.get("depends_on", {})
        names = set(depends if isinstance(depends, list) else depends.keys())
        assert names <= set(services), f"{name} depends on unknown {names - set(services)}"
        assert name not in names
    for name, (_, service) in _quire_services(services).items():
        assert zookeepers <= set(service.get("depends_on", {})), name


def test_volumes(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    """Each bookie keeps its data dir on its own named volume; every named volume is declared."""
    declared = set(compose.get("volumes") or {})
    used = []
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source, target = str(volume).split(":")[:2]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name} uses undeclared volume {source}"
                used.append(source)
        if name in _quire_services(services) and _quire_services(services)[name][0] == "bookie":
            data_dir = _env(service)["QUIRE_DATA_DIR"]
            targets = [str(v).split(":")[1] for v in service.get("volumes", [])]
            assert data_dir in targets, f"{name}: data dir {data_dir} is not on a volume"
    assert len(used) == len(set(used)), "two services share a volume"


def test_dockerfile_installs_the_project(services: dict[str, dict[str, Any]]) -> None:
    """The Quire services build the repository's Dockerfile: python:3.11-slim, pip install."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    assert re.search(r"pip install [^\n]*-c constraints\.txt", dockerfile)
    assert re.search(r"pip install [^\n]* \.(\s|$)", dockerfile)
    for name, (_, service) in _quire_services(services).items():
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name} does not build the repository"
