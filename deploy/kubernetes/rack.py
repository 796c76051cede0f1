"""The rack of a bookie pod: run by its init container (deploy/kubernetes/bookie.yaml).

A pod cannot read the labels of its node through the downward API, only its node's
name. This asks the API server for that node (``GET /api/v1/nodes/NAME``) with the
pod's service account token, which the ClusterRole ``quire-bookie-rack`` allows (get
nodes, nothing else: deploy/kubernetes/bookie-rack.yaml), and writes the value of the
first label of ``RACK_LABELS`` the node has (its zone, ``topology.kubernetes.io/zone``,
or on a cluster without zones the node's own name) to ``RACK_FILE``, which the bookie
reads into ``--rack`` when it starts. A node with none of the labels is an error: the
init container fails, and the pod does not start with a wrong rack.

Standard library only: it runs in the Quire image, before the bookie, and is mounted
from a ConfigMap (deploy/kubernetes/kustomization.yaml).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REQUEST_TIMEOUT_S = 10.0


class NoRackLabel(Exception):
    """The node has none of the labels that name a rack."""


def rack_of(node: dict[str, Any], labels: list[str]) -> str:
    """The value of the first of ``labels`` the node carries."""
    node_labels = node.get("metadata", {}).get("labels") or {}
    for label in labels:
        value = node_labels.get(label)
        if value:
            return str(value)
    raise NoRackLabel(f"node {node.get('metadata', {}).get('name')} has none of {labels}")


def fetch_node(api: str, name: str, token: str, context: ssl.SSLContext | None) -> dict[str, Any]:
    """The node object, as the API server returns it."""
    request = urllib.request.Request(
        f"{api}/api/v1/nodes/{name}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S, context=context) as answer:
        node: dict[str, Any] = json.load(answer)
    return node


def write_rack(
    api: str,
    node_name: str,
    token: str,
    context: ssl.SSLContext | None,
    labels: list[str],
    output: Path,
) -> str:
    """Fetch the node, write its rack to ``output`` and return it."""
    rack = rack_of(fetch_node(api, node_name, token, context), labels)
    output.write_text(rack)
    return rack


def main() -> int:
    """Read the pod's environment and service account, and write the rack."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    api = f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}"
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    token = (SERVICE_ACCOUNT / "token").read_text().strip()
    node_name = os.environ["NODE_NAME"]
    labels = [label.strip() for label in os.environ["RACK_LABELS"].split(",") if label.strip()]
    try:
        rack = write_rack(api, node_name, token, context, labels, Path(os.environ["RACK_FILE"]))
    except NoRackLabel as exc:
        print(f"rack: {exc}", file=sys.stderr)
        return 1
    print(f"rack: node {node_name} is in rack {rack}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
