"""docker-compose.yml and the Dockerfile, checked statically (no Docker engine here).

What must hold: the layout of the multi-host tests (tests/multihost/layout.py): a
three-node ZooKeeper ensemble (ids, quorum and election ports), five bookies spread
over racks, two gateways, two auditors and two replicators; every Quire service sets
only real settings of services/settings.py, with values those settings accept;
each listens on and advertises its own host name; ports, ZooKeeper
connection strings, volumes and depends_on are consistent. A Spark master and
worker run the pip package's spark-class from the image's "spark" stage (the
project image plus a JRE), with the executors' Python set and a consistent
master URL. Prometheus and Grafana run pinned images, every file they mount
exists, Prometheus scrapes exactly the Quire services (one job per module), and
Grafana is provisioned with that Prometheus and the dashboard.
"""

from __future__ import annotations

import re
import tomllib
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
SPARK_MASTER = "org.apache.spark.deploy.master.Master"
SPARK_WORKER = "org.apache.spark.deploy.worker.Worker"
SPARK_URL = re.compile(r"^spark://(?P<host>[\w.-]+):(?P<port>\d+)$")
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
    for match in entries:
        assert match
        client_port = int(match[5] or 2181)
        assert len({int(match[3]), int(match[4]), client_port}) == 3, match[0]
    for name, service in zookeepers.items():
        assert _env(service)["ZOO_STANDALONE_ENABLED"] == "false", f"{name} may run alone"


def test_every_quire_service_is_there(services: dict[str, dict[str, Any]]) -> None:
    """Five bookies (spares for re-replication beside an ensemble of three), and two of
    each coordinating service: gateways, auditors (one elected) and replicators."""
    modules = [module for module, _ in _quire_services(services).values()]
    assert sorted(modules) == sorted(["bookie"] * 5 + ["gateway", "auditor", "replicator"] * 2)


def _racks(services: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Bookie service -> the rack its command names with ``--rack``."""
    racks = {}
    for name, (module, service) in _quire_services(services).items():
        if module == "bookie":
            command = [str(c) for c in service["command"]]
            racks[name] = _flag(command, "--rack")
    return racks


def test_bookies_are_spread_over_racks(services: dict[str, dict[str, Any]]) -> None:
    """Each bookie names its rack (``--rack``, which rack-aware placement reads); there are
    at least three racks, so an ensemble of three can have each replica in its own, and
    no rack holds more than two of the five bookies."""
    racks = _racks(services)
    assert len(racks) == 5, racks
    for name, rack in racks.items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", rack), f"{name}: rack {rack!r}"
    counts = {rack: list(racks.values()).count(rack) for rack in set(racks.values())}
    assert len(counts) >= 3 and max(counts.values()) <= 2, counts


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
    """QUIRE_PORT is the docs/api.md default of the service, and any published port maps onto it."""
    published = []
    for name, (module, service) in _quire_services(services).items():
        port = int(_env(service)["QUIRE_PORT"])
        assert port == DEFAULT_PORTS[module], f"{name} listens on {port}"
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            assert int(parts[-1]) == port, f"{name} publishes {mapping} but listens on {port}"
            published.append(int(parts[-2]) if len(parts) > 1 else port)
    assert len(published) == len(set(published)), "two services publish the same host port"
    gateways = [s for module, s in _quire_services(services).values() if module == "gateway"]
    assert gateways and all(s.get("ports") for s in gateways), "publish every gateway"


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


def _spark_services(services: dict[str, dict[str, Any]]) -> dict[str, tuple[str, list[str]]]:
    """name -> (main class, its arguments) for every service that runs ``spark-class``."""
    found = {}
    for name, service in services.items():
        command = service.get("command")
        if isinstance(command, str):
            command = command.split()
        if command and command[0] == "spark-class":
            found[name] = (command[1], [str(a) for a in command[2:]])
    return found


def _flag(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def _dockerfile_stages() -> dict[str, str]:
    """Stage name -> its text (``FROM image AS name`` up to the next FROM)."""
    text = (REPO / "Dockerfile").read_text()
    stages = {}
    for block in re.split(r"^(?=FROM )", text, flags=re.M):
        match = re.match(r"FROM (\S+)(?: AS (\S+))?", block)
        if match:
            stages[match[2] or f"<{match[1]}>"] = block
    return stages


def test_a_spark_master_and_worker(services: dict[str, dict[str, Any]]) -> None:
    """One master and at least one worker, each on its own host name, the worker
    registering with the master's URL and waiting for it (and for the gateway)."""
    spark = _spark_services(services)
    masters = {n: a for n, (cls, a) in spark.items() if cls == SPARK_MASTER}
    workers = {n: a for n, (cls, a) in spark.items() if cls == SPARK_WORKER}
    assert len(masters) == 1 and workers, spark
    assert set(masters) | set(workers) == set(spark), "a spark-class of another class"
    ((master, master_args),) = masters.items()
    assert services[master].get("hostname") == master == _flag(master_args, "--host")
    url = f"spark://{master}:{_flag(master_args, '--port')}"
    for name, args in workers.items():
        assert services[name].get("hostname") == name == _flag(args, "--host")
        assert args[0] == url, f"{name} registers with {args[0]}, the master is {url}"
        assert SPARK_URL.match(args[0])
        assert int(_flag(args, "--cores")) >= 1
        assert re.fullmatch(r"\d+[mg]", _flag(args, "--memory"))
        depends = services[name].get("depends_on", {})
        gateways = {
            n for n, (module, _) in _quire_services(services).items() if module == "gateway"
        }
        assert master in depends and gateways & set(depends), f"{name} depends on {depends}"
    for name in spark:
        env = _env(services[name])
        if "SPARK_MASTER_URL" in env:
            assert env["SPARK_MASTER_URL"] == url, f"{name}: SPARK_MASTER_URL"


def test_spark_executors_run_the_image_python(services: dict[str, dict[str, Any]]) -> None:
    """PYSPARK_PYTHON is the image's python (it has pyarrow and the connector: without it
    a Python worker dies with "No module named pyarrow"); Spark's dirs are the user's."""
    for name in _spark_services(services):
        env = _env(services[name])
        assert env.get("PYSPARK_PYTHON") == "/usr/local/bin/python", name
        for key in ("SPARK_WORKER_DIR", "SPARK_LOCAL_DIRS"):
            if key in env:
                assert env[key].startswith("/var/lib/quire/"), f"{name}: {key} not writable"


def test_spark_ports(services: dict[str, dict[str, Any]]) -> None:
    """The master publishes its port and web UI on loopback, each onto the port it listens
    on; no two services publish the same host port."""
    published = []
    for name, (cls, args) in _spark_services(services).items():
        listening = {int(_flag(args, "--webui-port"))}
        if cls == SPARK_MASTER:
            listening.add(int(_flag(args, "--port")))
            assert services[name].get("ports"), "publish the Spark master"
        for mapping in services[name].get("ports", []):
            parts = str(mapping).split(":")
            assert parts[0] == "127.0.0.1", f"{name} publishes {mapping} beyond loopback"
            assert int(parts[-1]) in listening, f"{name} publishes {mapping}"
    for service in services.values():
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            published.append(int(parts[-2]) if len(parts) > 1 else int(parts[-1]))
    assert len(published) == len(set(published)), f"a host port published twice: {published}"


def test_spark_health_check_asks_the_master(services: dict[str, dict[str, Any]]) -> None:
    """The master's health check fetches its own web UI's status page."""
    for name, (cls, args) in _spark_services(services).items():
        if cls != SPARK_MASTER:
            continue
        test = services[name].get("healthcheck", {}).get("test")
        assert test, f"{name} has no healthcheck"
        text = " ".join(test) if isinstance(test, list) else str(test)
        assert f"http://{name}:{_flag(args, '--webui-port')}/json/" in text


def test_spark_image_is_the_project_image_with_java(services: dict[str, dict[str, Any]]) -> None:
    """Spark services build the Dockerfile's "spark" stage: FROM the project's stage, plus a
    JRE; the project's dependencies (installed in that stage) include pyspark and pyarrow;
    the default (last) stage stays the plain project image."""
    stages = _dockerfile_stages()
    assert "spark" in stages and "quire" in stages, list(stages)
    assert re.match(r"FROM quire AS spark\b", stages["spark"])
    assert "apt-get install" in stages["spark"] and "default-jre-headless" in stages["spark"]
    last = list(stages)[-1]
    assert last != "spark" and "jre" not in stages[last], "the default image carries Java"
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in dependencies}
    assert {"pyspark", "pyarrow"} <= names
    for name in _spark_services(services):
        build = services[name].get("build")
        assert isinstance(build, dict), f"{name} must build the spark stage"
        assert build.get("context") == "." and build.get("target") == "spark", name


def test_spark_versions_are_pinned() -> None:
    """constraints.txt pins pyspark, its py4j and pyarrow (the image and make setup use it)."""
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if "==" in line
    )
    pins = {k.lower(): v for k, v in pins.items()}
    assert pins.get("pyspark") == "4.0.1"
    assert pins.get("pyarrow") == "21.0.0"
    assert "py4j" in pins


# ------------------------------------------------------------------ monitoring

PINNED_IMAGE = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+$")


def _bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each bind mount (a source that is a path)."""
    mounts = []
    for volume in service.get("volumes", []):
        source, target = str(volume).split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append((source, target))
    return mounts


def _mount_of(service: dict[str, Any], source: str) -> str:
    """The container path where ``source`` (relative to the repository) is mounted."""
    for mounted, target in _bind_mounts(service):
        if Path(mounted) == Path(source):
            return target
    raise AssertionError(f"{source} is not mounted")


def test_every_bind_mounted_file_exists(services: dict[str, dict[str, Any]]) -> None:
    """A bind mount names a file or directory of the repository (compose would create an
    empty directory in its place, and the service would start without its config)."""
    for name, service in services.items():
        for source, _ in _bind_mounts(service):
            assert source.startswith("./"), f"{name} mounts {source} outside the repository"
            assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_monitoring_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    """Prometheus and Grafana run images pinned to a full version, published on loopback."""
    for name, repository in (("prometheus", "prom/prometheus"), ("grafana", "grafana/grafana")):
        service = services[name]
        image = str(service.get("image"))
        assert image.startswith(repository + ":") and PINNED_IMAGE.match(image), image
        assert service.get("hostname") == name
        for mapping in service.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping}"


def _prometheus_config(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    service = services["prometheus"]
    command = [str(c) for c in service.get("command", [])]
    config_flag = next(c for c in command if c.startswith("--config.file="))
    path = config_flag.split("=", 1)[1]
    mounted = {target: source for source, target in _bind_mounts(service)}
    assert path in mounted, f"prometheus reads {path}, which is not mounted"
    config: dict[str, Any] = yaml.safe_load((REPO / mounted[path]).read_text())
    return config


def test_prometheus_scrapes_every_quire_service(services: dict[str, dict[str, Any]]) -> None:
    """One scrape job per Quire module (the dashboard selects by job), whose targets are
    exactly that module's services at host name:QUIRE_PORT, on /metrics."""
    jobs: dict[str, set[str]] = {}
    for job in _prometheus_config(services)["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics", job["job_name"]
        targets = {t for static in job.get("static_configs", []) for t in static["targets"]}
        jobs[job["job_name"]] = targets
    expected: dict[str, set[str]] = {}
    for name, (module, service) in _quire_services(services).items():
        address = f"{name}:{_env(service)['QUIRE_PORT']}"
        expected.setdefault(module, set()).add(address)
    for module, targets in expected.items():
        assert jobs.get(module) == targets, f"job {module}: {jobs.get(module)} != {targets}"


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(
    services: dict[str, dict[str, Any]],
) -> None:
    """Grafana's provisioning directory holds a data source pointing at the compose
    Prometheus and a dashboard provider whose path is where quire.json is mounted; the
    admin password comes from the environment, never from the file."""
    grafana = services["grafana"]
    assert "prometheus" in grafana.get("depends_on", {})
    provisioning = _mount_of(grafana, "./deploy/grafana/provisioning")
    assert provisioning == "/etc/grafana/provisioning"
    base = REPO / "deploy/grafana/provisioning"
    sources = [
        source
        for path in sorted((base / "datasources").glob("*.yml"))
        for source in yaml.safe_load(path.read_text())["datasources"]
    ]
    prometheus = services["prometheus"]
    port = str(prometheus["ports"][0]).split(":")[-1]
    assert [s["url"] for s in sources if s["type"] == "prometheus"] == [f"http://prometheus:{port}"]
    providers = [
        provider
        for path in sorted((base / "dashboards").glob("*.yml"))
        for provider in yaml.safe_load(path.read_text())["providers"]
    ]
    dashboard = _mount_of(grafana, "./deploy/grafana/quire.json")
    assert str(Path(dashboard).parent) in [p["options"]["path"] for p in providers]
    password = _env(grafana)["GF_SECURITY_ADMIN_PASSWORD"]
    assert INTERPOLATION.match(password), "the admin password must come from the environment"
