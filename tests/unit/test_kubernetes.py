"""The Kubernetes manifests (deploy/kubernetes/, deploy/kustomization.yaml), checked offline.

There is no cluster and no kustomize binary here, so the kustomizations are rendered by
a small reader of the few fields they use (resources, namespace, images, ConfigMap
generators; any other field fails the test rather than being ignored), and every object
is validated, strictly (an unknown field is an error), against the schemas of the
Kubernetes versions of ``KUBERNETES_VERSIONS`` that kubernetes-validate bundles. Then
what matters to Quire (docs/operations.md, "Kubernetes"): the layout of
docker-compose.yml (three ZooKeeper servers forming one ensemble, five bookies, two of
each coordinating service); a bookie's id is its StatefulSet pod's DNS name, on a
volume of its own, behind a PodDisruptionBudget; readiness on ``/health``; racks from
the nodes' zone labels (deploy/kubernetes/rack.py, run here against a fake API
server); every ``QUIRE_*`` variable a real, documented setting (docs/api.md) with a
valid value; secrets only by reference; hardened containers with resource bounds; and
monitoring built from the same files as the compose deployment.
"""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
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
DEPLOY = REPO / "deploy"
BASE = DEPLOY / "kubernetes"
# The oldest and the newest minor versions the manifests are held to.
KUBERNETES_VERSIONS = ("1.30", "1.37")
KUSTOMIZATION_FIELDS = {
    "apiVersion",
    "kind",
    "namespace",
    "resources",
    "images",
    "configMapGenerator",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
WORKLOADS = {"Deployment", "StatefulSet"}
SETTINGS: dict[str, type[CommonSettings]] = {
    "bookie": BookieSettings,
    "gateway": GatewaySettings,
    "auditor": AuditorSettings,
    "replicator": ReplicatorSettings,
}
MODULE_PORTS = {"bookie": 3181, "gateway": 8080, "auditor": 8091, "replicator": 8092}
# The Secret operators create (docs/operations.md): its keys, and whether each is required.
SECRET_NAME = "quire"
SECRET_KEYS = {
    "cluster-secret": True,
    "api-token": False,
    "admin-token": False,
    "grafana-admin-password": True,
}
SECRET_LIKE = re.compile(r"SECRET|TOKEN|PASSWORD")
# Helper variables of a Quire container: set from the downward API or as a plain value,
# and used only to build another variable or the command through $(NAME).
EXPANSION = re.compile(r"\$\((\w+)\)")
ZK_SERVER = re.compile(r"^server\.(\d+)=([\w.-]+):(\d+):(\d+);(\d+)$")
# ZooKeeper's image writes its configuration into its own root file system
# (deploy/kubernetes/zookeeper.yaml says why); every other container's is read-only.
WRITABLE_ROOT = {"zookeeper"}


def _load_objects(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _kustomization(directory: Path) -> dict[str, Any]:
    kustomization: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return kustomization


def _generated_config_map(directory: Path, generator: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, str] = {}
    for entry in generator.get("files", []):
        key, _, source = str(entry).rpartition("=")
        data[key or Path(source).name] = (directory / source).read_text()
    for literal in generator.get("literals", []):
        key, value = str(literal).split("=", 1)
        data[key] = value
    assert set(generator) <= {"name", "files", "literals"}, generator
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": generator["name"]},
        "data": data,
    }


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container and init container of a workload's pod template."""
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def render(directory: Path) -> list[dict[str, Any]]:
    """What ``kustomize build directory`` makes, but for generated names' hash suffixes."""
    kustomization = _kustomization(directory)
    assert set(kustomization) <= KUSTOMIZATION_FIELDS, set(kustomization) - KUSTOMIZATION_FIELDS
    objects: list[dict[str, Any]] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        objects += render(path) if path.is_dir() else _load_objects(path)
    for generator in kustomization.get("configMapGenerator", []):
        objects.append(_generated_config_map(directory, generator))
    images = {image["name"]: image for image in kustomization.get("images", [])}
    for obj in objects:
        for container in _containers(obj):
            image = images.get(container["image"].split(":")[0])
            if image:
                container["image"] = f"{image['newName']}:{image['newTag']}"
        namespace = kustomization.get("namespace")
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
    return objects


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """Everything ``kubectl apply -k deploy`` creates: Quire and its monitoring."""
    return render(DEPLOY)


def _find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _quire_workloads(
    objects: list[dict[str, Any]],
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """module -> (workload, its Quire container) for each ``python -m <module>`` service."""
    found = {}
    for obj in objects:
        for container in _pod_spec(obj)["containers"] if obj["kind"] in WORKLOADS else []:
            command = " ".join(container.get("command", []))
            match = re.search(r"python -m (\w+)", command)
            if match:
                assert match[1] not in found, f"two workloads run {match[1]}"
                found[match[1]] = (obj, container)
    return found


def _env(objects: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, Any]:
    """name -> value (a string) or valueFrom (a dict), from ``env`` and ``envFrom``."""
    env: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        config_map = _find(objects, "ConfigMap", source["configMapRef"]["name"])
        env.update(config_map["data"])
    for item in container.get("env", []):
        env[item["name"]] = item["value"] if "value" in item else item["valueFrom"]
    return env


# ---------------------------------------------------------------- kustomize and schemas


def test_every_listed_file_exists_and_every_manifest_is_listed() -> None:
    """Each resource and generated file a kustomization names exists, and each manifest
    under deploy/kubernetes/ is applied by one of them (none is forgotten)."""
    listed: set[Path] = set()
    for directory in (DEPLOY, BASE):
        kustomization = _kustomization(directory)
        for resource in kustomization.get("resources", []):
            path = (directory / resource).resolve()
            assert path.exists(), f"{directory}: missing resource {resource}"
            listed.add(path)
        for generator in kustomization.get("configMapGenerator", []):
            for entry in generator.get("files", []):
                path = (directory / str(entry).rpartition("=")[2]).resolve()
                assert path.is_file(), f"{directory}: missing file {entry}"
                listed.add(path)
    manifests = {p.resolve() for p in BASE.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert manifests - listed == set(), "manifests no kustomization applies"
    assert (BASE / "rack.py").resolve() in listed


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_matches_the_kubernetes_schemas(
    objects: list[dict[str, Any]], version: str
) -> None:
    """Every rendered object is valid for the Kubernetes version, unknown fields refused."""
    assert objects
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")


def test_names_are_unique_and_namespaced(objects: list[dict[str, Any]]) -> None:
    """No two objects of a kind share a name, and every namespaced one is in the namespace
    of the kustomizations, which the RBAC bindings' subjects name too."""
    namespace = _kustomization(DEPLOY)["namespace"]
    assert _kustomization(BASE)["namespace"] == namespace
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), keys
    _find(objects, "Namespace", namespace)
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"]["namespace"] == namespace
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == namespace, obj["metadata"]["name"]
            _find(objects, subject["kind"], subject["name"])


def test_references_resolve(objects: list[dict[str, Any]]) -> None:
    """Every ConfigMap, claim, service account and Secret a pod names exists (the Secret
    with the documented keys), and every Service and PodDisruptionBudget selects pods."""
    pod_labels = [
        o["spec"]["template"]["metadata"]["labels"] for o in objects if o["kind"] in WORKLOADS
    ]
    for obj in objects:
        if obj["kind"] in ("Service", "PodDisruptionBudget"):
            selector = obj["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            assert any(_selects(selector, labels) for labels in pod_labels), obj["metadata"]
        if obj["kind"] not in WORKLOADS:
            continue
        spec = _pod_spec(obj)
        claims = {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
        if "serviceAccountName" in spec:
            _find(objects, "ServiceAccount", spec["serviceAccountName"])
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                _find(objects, "ConfigMap", volume["configMap"]["name"])
            if "persistentVolumeClaim" in volume:
                _find(
                    objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]
                )
        volumes = claims | {v["name"] for v in spec.get("volumes", [])}
        for container in _containers(obj):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{obj['metadata']['name']}: {mount['name']}"
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == SECRET_NAME and ref["key"] in SECRET_KEYS, ref
                    assert ref.get("optional", False) is not SECRET_KEYS[ref["key"]], ref


def test_no_secret_value_in_the_manifests(objects: list[dict[str, Any]]) -> None:
    """No Secret object is rendered (operators create it), and every variable that holds
    a secret, a token or a password is read from the Secret, never written inline."""
    assert not [o for o in objects if o["kind"] == "Secret"]
    for obj in objects:
        for container in _containers(obj) if obj["kind"] in WORKLOADS else []:
            for item in container.get("env", []):
                if SECRET_LIKE.search(item["name"]):
                    assert "secretKeyRef" in item.get("valueFrom", {}), item["name"]
    for config_map in (o for o in objects if o["kind"] == "ConfigMap"):
        for key in config_map["data"]:
            assert not SECRET_LIKE.search(key), f"{config_map['metadata']['name']}: {key}"


def test_the_documented_secret_command_names_every_key() -> None:
    """docs/operations.md creates the Secret with every required key."""
    text = (REPO / "docs" / "operations.md").read_text()
    command = re.search(r"kubectl -n \S+ create secret generic " + SECRET_NAME + r"\b[^`]*", text)
    assert command, "docs/operations.md does not create the Secret"
    for key, required in SECRET_KEYS.items():
        assert not required or f"--from-literal={key}=" in command[0], key


# ------------------------------------------------------------------------- the layout


def test_the_layout_of_the_compose_file(objects: list[dict[str, Any]]) -> None:
    """Five bookies, and two gateways, auditors and replicators, like docker-compose.yml."""
    workloads = _quire_workloads(objects)
    assert set(workloads) == set(SETTINGS)
    replicas = {module: w["spec"]["replicas"] for module, (w, _) in workloads.items()}
    assert replicas == {"bookie": 5, "gateway": 2, "auditor": 2, "replicator": 2}
    assert workloads["bookie"][0]["kind"] == "StatefulSet"
    for module in ("gateway", "auditor", "replicator"):
        assert workloads[module][0]["kind"] == "Deployment", module


def _headless_service(objects: list[dict[str, Any]], statefulset: dict[str, Any]) -> dict[str, Any]:
    """The StatefulSet's governing Service: headless, publishing not-ready pods, selecting
    exactly its pods."""
    service = _find(objects, "Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert _selects(service["spec"]["selector"], labels)
    assert statefulset["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    return service


def test_a_three_server_zookeeper_ensemble(objects: list[dict[str, Any]]) -> None:
    """Three servers started together, each listing the three by their pod DNS names with
    distinct quorum, election and client ports; a server's id is its ordinal + 1; every
    Quire service connects to all three."""
    statefulset = _find(objects, "StatefulSet", "zookeeper")
    service = _headless_service(objects, statefulset)
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    (container,) = _pod_spec(statefulset)["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ZOO_STANDALONE_ENABLED"] == "false"
    pods = [f"zookeeper-{n}.{service['metadata']['name']}" for n in range(3)]
    service_ports = {p["port"] for p in service["spec"]["ports"]}
    clients = set()
    for ordinal, server in enumerate(env["ZOO_SERVERS"].split()):
        match = ZK_SERVER.match(server)
        assert match, server
        assert (int(match[1]), match[2]) == (ordinal + 1, pods[ordinal])
        assert {int(match[3]), int(match[4]), int(match[5])} == service_ports
        clients.add(f"{match[2]}:{match[5]}")
    assert len(clients) == 3
    assert "ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 ))" in " ".join(container["command"])
    for module, (_, quire) in _quire_workloads(objects).items():
        assert set(_env(objects, quire)["QUIRE_ZK"].split(",")) == clients, module


def test_bookie_ids_are_their_pods_dns_names(objects: list[dict[str, Any]]) -> None:
    """QUIRE_HOST of a bookie is <pod>.<headless service>.<namespace>.svc.<domain>, from
    the downward API, on the port the container and the Service expose; its data dir is
    the one volume of its volumeClaimTemplates."""
    bookies, container = _quire_workloads(objects)["bookie"]
    service = _headless_service(objects, bookies)
    env = _env(objects, container)
    name = service["metadata"]["name"]
    assert env["QUIRE_HOST"] == f"$(POD_NAME).{name}.$(POD_NAMESPACE).svc.$(CLUSTER_DOMAIN)"
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert re.fullmatch(r"[a-z0-9]+(\.[a-z0-9]+)*", env["CLUSTER_DOMAIN"])
    port = int(env["QUIRE_PORT"])
    assert [p["containerPort"] for p in container["ports"]] == [port]
    assert [p["port"] for p in service["spec"]["ports"]] == [port]
    (claim,) = bookies["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["QUIRE_DATA_DIR"]


def test_a_disruption_budget_keeps_all_but_one_bookie(objects: list[dict[str, Any]]) -> None:
    """The bookies' PodDisruptionBudget allows one voluntary disruption at a time and
    selects the bookies' pods and no other pod."""
    bookies, _ = _quire_workloads(objects)["bookie"]
    budgets = [
        o
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
        and _selects(
            o["spec"]["selector"]["matchLabels"], bookies["spec"]["template"]["metadata"]["labels"]
        )
    ]
    assert len(budgets) == 1
    (budget,) = budgets
    assert budget["spec"]["maxUnavailable"] == 1
    for obj in objects:
        if obj["kind"] in WORKLOADS and obj is not bookies:
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert not _selects(budget["spec"]["selector"]["matchLabels"], labels)


def test_probes(objects: list[dict[str, Any]]) -> None:
    """Each Quire service is ready when its /health answers 200 and alive while its HTTP
    server answers /metrics (/health is 503 while ZooKeeper is away, which must not
    restart the services), both on the port it listens on."""
    for module, (_, container) in _quire_workloads(objects).items():
        (port,) = container["ports"]
        assert port["containerPort"] == MODULE_PORTS[module]
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port["name"]}
        assert container["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": port["name"]}


def test_gateways_behind_a_service(objects: list[dict[str, Any]]) -> None:
    """The Service "gateway" reaches the gateways' port."""
    gateways, container = _quire_workloads(objects)["gateway"]
    service = _find(objects, "Service", "gateway")
    assert _selects(service["spec"]["selector"], gateways["spec"]["template"]["metadata"]["labels"])
    (port,) = service["spec"]["ports"]
    assert (
        port["port"] == MODULE_PORTS["gateway"]
        and port["targetPort"] == container["ports"][0]["name"]
    )


def test_services_advertise_their_pod_address(objects: list[dict[str, Any]]) -> None:
    """Gateways, auditors and replicators listen on and advertise their pod's address,
    unique in the cluster (their ids)."""
    for module, (_, container) in _quire_workloads(objects).items():
        if module != "bookie":
            host = _env(objects, container)["QUIRE_HOST"]
            assert host == {"fieldRef": {"fieldPath": "status.podIP"}}, module


def test_environment_is_real_documented_settings(objects: list[dict[str, Any]]) -> None:
    """Every QUIRE_* variable of a Quire container is a setting of its module, documented
    in docs/api.md, and the settings accept the values; any other variable is a helper
    used through $(NAME) by another variable or the command."""
    api = (REPO / "docs" / "api.md").read_text()
    for module, (_, container) in _quire_workloads(objects).items():
        env = _env(objects, container)
        values: dict[str, str] = {}
        used = set(EXPANSION.findall(" ".join(container.get("command", []))))
        for value in env.values():
            used |= set(EXPANSION.findall(value)) if isinstance(value, str) else set()
        for name, value in env.items():
            if not name.startswith("QUIRE_"):
                assert name in used, f"{module}: {name} is not a setting and is not used"
                continue
            field = name.removeprefix("QUIRE_").lower()
            assert field in SETTINGS[module].model_fields, f"{module}: {name}"
            assert f"`--{field.replace('_', '-')}`" in api, (
                f"{name} is not documented (docs/api.md)"
            )
            values[field] = value if isinstance(value, str) else "x"
        values["host"] = "bookie-0.bookie.quire.svc.cluster.local"
        SETTINGS[module].model_validate(values)


def test_containers_are_hardened_and_bounded(objects: list[dict[str, Any]]) -> None:
    """Every container runs as a non-root user, cannot gain privileges, drops every
    capability, has a read-only root file system (but ZooKeeper's), and requests and
    limits CPU and memory."""
    for obj in objects:
        if obj["kind"] not in WORKLOADS:
            continue
        pod = _pod_spec(obj)
        assert pod["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
        assert pod["securityContext"]["runAsUser"] > 0
        for container in _containers(obj):
            where = f"{obj['metadata']['name']}/{container['name']}"
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert security["readOnlyRootFilesystem"] is (container["name"] not in WRITABLE_ROOT)
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) == {"cpu", "memory"}, where


def test_images(objects: list[dict[str, Any]]) -> None:
    """Quire's containers run the repository's image, Spark's its "spark" stage (both set
    in one place, the kustomization's images); ZooKeeper, Prometheus and Grafana the
    images docker-compose.yml runs."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    images = {image["name"]: image for image in _kustomization(BASE)["images"]}
    assert set(images) == {"quire", "quire-spark"}
    for obj in objects:
        for container in _containers(obj) if obj["kind"] in WORKLOADS else []:
            image = container["image"]
            if container["name"] == "zookeeper":
                assert image == compose["zk1"]["image"]
            elif container["name"] in ("prometheus", "grafana"):
                assert image == compose[container["name"]]["image"]
            elif container["name"].startswith("spark"):
                assert image.startswith(images["quire-spark"]["newName"] + ":")
            else:
                assert image.startswith(images["quire"]["newName"] + ":"), container["name"]


# ---------------------------------------------------------------------------- racks


def _rack_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quire_rack", BASE / "rack.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bookies_take_their_rack_from_the_node(objects: list[dict[str, Any]]) -> None:
    """The bookie's init container runs rack.py, which writes the node's zone to a file
    on a volume the bookie shares and reads into --rack; the pod's service account may
    get nodes and do nothing else."""
    bookies, container = _quire_workloads(objects)["bookie"]
    pod = _pod_spec(bookies)
    (init,) = pod["initContainers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in init["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["RACK_LABELS"].split(",")[0] == "topology.kubernetes.io/zone"
    script = init["command"][-1]
    script_mount = next(m for m in init["volumeMounts"] if script.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == script_mount["name"])
    config_map = _find(objects, "ConfigMap", volume["configMap"]["name"])
    assert config_map["data"][Path(script).name] == (BASE / "rack.py").read_text()
    read = set(re.findall(r"os\.environ\[\"(\w+)\"\]", config_map["data"][Path(script).name]))
    assert read - {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} == set(env)
    rack_file = Path(env["RACK_FILE"])
    shared = {m["name"] for m in init["volumeMounts"] if m["mountPath"] == str(rack_file.parent)}
    assert shared & {
        m["name"] for m in container["volumeMounts"] if m["mountPath"] == str(rack_file.parent)
    }
    assert f'--rack "$(cat {rack_file})"' in container["command"][-1]
    account = pod["serviceAccountName"]
    bindings = [
        b
        for b in objects
        if b["kind"] == "ClusterRoleBinding" and any(s["name"] == account for s in b["subjects"])
    ]
    (binding,) = bindings
    role = _find(objects, "ClusterRole", binding["roleRef"]["name"])
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]


class _FakeApiServer(BaseHTTPRequestHandler):
    """Answers GET /api/v1/nodes/NAME with the node of ``nodes`` if the token is right."""

    nodes: dict[str, dict[str, Any]] = {}

    def do_GET(self) -> None:
        name = self.path.removeprefix("/api/v1/nodes/")
        if self.headers["Authorization"] != "Bearer token-1" or name not in self.nodes:
            self.send_error(403 if name in self.nodes else 404)
            return
        body = json.dumps(self.nodes[name]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def api_server() -> Iterator[str]:
    _FakeApiServer.nodes = {
        "node-a": {
            "metadata": {
                "name": "node-a",
                "labels": {
                    "topology.kubernetes.io/zone": "zone-1",
                    "kubernetes.io/hostname": "node-a",
                },
            }
        },
        "node-b": {"metadata": {"name": "node-b", "labels": {"kubernetes.io/hostname": "node-b"}}},
        "node-c": {"metadata": {"name": "node-c"}},
    }
    server = HTTPServer(("127.0.0.1", 0), _FakeApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_rack_script_writes_the_node_zone(api_server: str, tmp_path: Path) -> None:
    """rack.py asks the API server for its node with the service account's token and
    writes the zone; a node without zones gives its own name; a node with neither label,
    or a refused token, fails rather than guess."""
    rack = _rack_module()
    labels = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    output = tmp_path / "rack"
    assert rack.write_rack(api_server, "node-a", "token-1", None, labels, output) == "zone-1"
    assert output.read_text() == "zone-1"
    assert rack.write_rack(api_server, "node-b", "token-1", None, labels, output) == "node-b"
    with pytest.raises(rack.NoRackLabel):
        rack.write_rack(api_server, "node-c", "token-1", None, labels, output)
    with pytest.raises(OSError):
        rack.write_rack(api_server, "node-a", "token-2", None, labels, output)


# ----------------------------------------------------------------------- monitoring


def test_prometheus_scrapes_the_compose_jobs(objects: list[dict[str, Any]]) -> None:
    """The Kubernetes scrape configuration keeps the compose one's global settings and
    jobs: one per Quire module (the dashboard's), found by the pods' component label,
    on their port "http", the one each Quire container listens on."""
    compose = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    config = yaml.safe_load(_find(objects, "ConfigMap", "prometheus")["data"]["prometheus.yml"])
    assert config["global"] == compose["global"]
    compose_jobs = {job["job_name"] for job in compose["scrape_configs"]}
    (quire,) = [job for job in config["scrape_configs"] if "kubernetes_sd_configs" in job]
    relabel = {
        tuple(r["source_labels"]): r for r in quire["relabel_configs"] if r.get("action") == "keep"
    }
    component = relabel[("__meta_kubernetes_pod_label_app_kubernetes_io_component",)]
    modules = set(component["regex"].split("|"))
    assert modules == set(SETTINGS)
    others = {job["job_name"] for job in config["scrape_configs"] if job is not quire}
    assert modules | others == compose_jobs
    port_name = relabel[("__meta_kubernetes_pod_container_port_name",)]["regex"]
    assert any(
        r.get("target_label") == "job"
        and r["source_labels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]
        for r in quire["relabel_configs"]
    )
    for module, (workload, container) in _quire_workloads(objects).items():
        assert (
            workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            == module
        )
        assert [p["name"] for p in container["ports"]] == [port_name]
    prometheus = _find(objects, "Deployment", "prometheus")
    account = _pod_spec(prometheus)["serviceAccountName"]
    binding = _find(objects, "RoleBinding", account)
    role = _find(objects, "Role", binding["roleRef"]["name"])
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]


def test_grafana_has_the_compose_provisioning(objects: list[dict[str, Any]]) -> None:
    """Grafana mounts deploy/grafana's data source and dashboard provider where it reads
    provisioning, and the dashboard where the provider looks; the data source's URL is
    the Prometheus Service; the admin password is read from the Secret."""
    grafana = _find(objects, "Deployment", "grafana")
    (container,) = _pod_spec(grafana)["containers"]
    volumes = {
        v["name"]: v["configMap"]["name"] for v in _pod_spec(grafana)["volumes"] if "configMap" in v
    }
    mounted = {}
    for mount in container["volumeMounts"]:
        if mount["name"] in volumes:
            config_map = _find(objects, "ConfigMap", volumes[mount["name"]])
            for key, text in config_map["data"].items():
                mounted[f"{mount['mountPath']}/{key}"] = text
    datasources = yaml.safe_load(mounted["/etc/grafana/provisioning/datasources/prometheus.yml"])
    providers = yaml.safe_load(mounted["/etc/grafana/provisioning/dashboards/quire.yml"])
    (provider,) = providers["providers"]
    dashboard = mounted[f"{provider['options']['path']}/quire.json"]
    assert dashboard == (DEPLOY / "grafana/quire.json").read_text()
    service = _find(objects, "Service", "prometheus")
    (port,) = service["spec"]["ports"]
    (source,) = datasources["datasources"]
    assert source["url"] == f"http://{service['metadata']['name']}:{port['port']}"
    env = {e["name"]: e for e in container["env"]}
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]["value"]
    assert home in mounted
    ref = env["GF_SECURITY_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": SECRET_NAME, "key": "grafana-admin-password"}
