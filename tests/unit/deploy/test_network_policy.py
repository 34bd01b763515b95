"""The NetworkPolicies of deploy/k8s/networkpolicy.yaml, evaluated offline.

Kubernetes' rules, applied to the manifests' own pod templates and to the peers an
operator runs beside them (the memory API, chat servers, Prometheus in `monitoring`,
pods of other namespaces, the internet): a pod that no policy selects for a direction is
open in that direction; otherwise some rule of a policy selecting it must admit the peer
and the port, at both ends. test_manifests.py validates the objects against the schema.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

K8S = Path(__file__).resolve().parents[3] / "deploy" / "k8s"
Doc = dict[str, Any]


def _docs() -> list[Doc]:
    return [doc for path in sorted(K8S.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text("utf-8")) if doc]


DOCS = _docs()


def _policies() -> list[Doc]:
    return [doc for doc in DOCS if doc["kind"] == "NetworkPolicy"]


def _pod_templates() -> list[tuple[str, Doc]]:
    return [(f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"])
            for doc in DOCS if doc["kind"] in ("Deployment", "StatefulSet", "Job")]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


NAMESPACE = {"kubernetes.io/metadata.name": "memfleet"}
Peer = tuple[dict[str, str], dict[str, str] | None, str | None]  # ns labels, pod labels, ip


def _matches(selector: Doc, labels: dict[str, str]) -> bool:
    if not _selects(selector.get("matchLabels", {}), labels):
        return False
    for expr in selector.get("matchExpressions", []):
        value, present = labels.get(expr["key"]), expr["key"] in labels
        ok = {"In": present and value in expr.get("values", []),
              "NotIn": not present or value not in expr.get("values", []),
              "Exists": present, "DoesNotExist": not present}[expr["operator"]]
        if not ok:
            return False
    return True


def _in_cidr(ip: str, block: Doc) -> bool:
    address = ipaddress.ip_address(ip)
    if address not in ipaddress.ip_network(block["cidr"]):
        return False
    return not any(address in ipaddress.ip_network(e) for e in block.get("except", []))


def _peer_matches(rule_peers: list[Doc] | None, peer: Peer) -> bool:
    if not rule_peers:
        return True  # no from/to: every peer
    ns_labels, pod_labels, ip = peer
    for item in rule_peers:
        if "ipBlock" in item:
            if ip is not None and _in_cidr(ip, item["ipBlock"]):
                return True
            continue
        if pod_labels is None:
            continue
        if "namespaceSelector" in item:
            ns_ok = _matches(item["namespaceSelector"], ns_labels)
        else:
            ns_ok = ns_labels == NAMESPACE
        if ns_ok and _matches(item.get("podSelector", {}), pod_labels):
            return True
    return False


def _port_matches(ports: list[Doc] | None, port: int, protocol: str) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol
                            and p.get("port", port) == port for p in ports)


def _allowed(direction: str, selected: dict[str, str], peer: Peer, port: int,
             protocol: str) -> bool:
    """Kubernetes' rule: a pod no policy selects for this direction is open; otherwise
    one rule of one policy selecting it must admit the peer and the port."""
    kind, peers_key = ("Ingress", "from") if direction == "ingress" else ("Egress", "to")
    policies = [p["spec"] for p in _policies()
                if kind in p["spec"].get("policyTypes", ["Ingress"])
                and _matches(p["spec"]["podSelector"], selected)]
    if not policies:
        return True
    return any(_peer_matches(rule.get(peers_key), peer)
               and _port_matches(rule.get("ports"), port, protocol)
               for policy in policies for rule in policy.get(direction, []))


def _reaches(source: Peer, target: Peer, port: int, protocol: str = "TCP") -> bool:
    """Both ends' policies admit the connection (only this namespace has policies)."""
    out = source[1] is None or source[0] != NAMESPACE or _allowed(
        "egress", source[1], target, port, protocol)
    inward = target[1] is None or target[0] != NAMESPACE or _allowed(
        "ingress", target[1], source, port, protocol)
    return out and inward


def _pod(owner: str) -> Peer:
    templates = dict(_pod_templates())
    return NAMESPACE, templates[owner]["metadata"]["labels"], None


PODS = {
    "worker": "Deployment/memfleet-worker",
    "exporter": "Deployment/memfleet-exporter",
    "migrate": "Job/memfleet-migrate",
    "redis": "StatefulSet/memfleet-redis",
    "postgres": "StatefulSet/memfleet-postgres",
    "mcp": "Deployment/memfleet-mcp",
}
# Peers that are not in the manifests: what the operator runs beside them, and strangers.
OTHERS: dict[str, Peer] = {
    "api": (NAMESPACE, {"app": "memfleet-api", "memfleet.io/client": "true"}, None),
    "chat server": (NAMESPACE, {"app": "chat", "memfleet.io/client": "true"}, None),
    "unlabelled pod": (NAMESPACE, {"app": "something-else"}, None),
    "prometheus": ({"kubernetes.io/metadata.name": "monitoring"}, {"app": "prometheus"}, None),
    "other namespace": ({"kubernetes.io/metadata.name": "default"}, {"app": "x"}, None),
    "internet": ({}, None, "203.0.113.7"),
}
DNS: Peer = ({"kubernetes.io/metadata.name": "kube-system"}, {"k8s-app": "kube-dns"}, None)


def _peer(name: str) -> Peer:
    return _pod(PODS[name]) if name in PODS else OTHERS[name]


def test_a_default_deny_policy_covers_every_pod() -> None:
    denies = [p for p in _policies() if p["spec"]["podSelector"] == {}
              and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
              and not p["spec"].get("ingress") and not p["spec"].get("egress")]
    assert len(denies) == 1


@pytest.mark.parametrize("client", ["worker", "exporter", "migrate", "api", "chat server"])
def test_memfleet_clients_reach_redis_and_postgres(client: str) -> None:
    assert _reaches(_peer(client), _peer("redis"), 6379)
    assert _reaches(_peer(client), _peer("postgres"), 5432)
    assert not _reaches(_peer(client), _peer("redis"), 5432)  # only the server's port


@pytest.mark.parametrize("stranger", ["unlabelled pod", "prometheus", "other namespace",
                                      "internet", "redis", "postgres", "mcp"])
def test_nothing_else_reaches_redis_or_postgres(stranger: str) -> None:
    if stranger != "redis":
        assert not _reaches(_peer(stranger), _peer("redis"), 6379)
    if stranger != "postgres":
        assert not _reaches(_peer(stranger), _peer("postgres"), 5432)


def test_only_the_monitoring_namespace_scrapes_the_metrics() -> None:
    for target in ("worker", "exporter"):
        assert _reaches(_peer("prometheus"), _peer(target), 9464)
        for stranger in ("other namespace", "internet", "unlabelled pod", "api"):
            assert not _reaches(_peer(stranger), _peer(target), 9464), (stranger, target)


def test_only_the_api_and_the_mcp_server_are_reachable_from_outside() -> None:
    assert _reaches(_peer("internet"), _peer("api"), 8088)
    assert not _reaches(_peer("internet"), _peer("api"), 9464)
    assert _reaches(_peer("internet"), _peer("mcp"), 8090)
    assert _reaches(_peer("other namespace"), _peer("mcp"), 8090)
    assert not _reaches(_peer("internet"), _peer("mcp"), 9464)
    for name in set(PODS) - {"mcp"}:
        ports = [p["containerPort"] for c in _pod_templates_by_owner()[PODS[name]]
                 for p in c.get("ports", [])]
        for port in ports or [80]:
            assert not _reaches(_peer("internet"), _peer(name), port), (name, port)
            assert not _reaches(_peer("other namespace"), _peer(name), port), (name, port)


def _pod_templates_by_owner() -> dict[str, list[Doc]]:
    return {owner: t["spec"]["containers"] for owner, t in _pod_templates()}


def test_egress_is_only_what_each_part_needs() -> None:
    for name in [*PODS, "api"]:
        assert _reaches(_peer(name), DNS, 53, "UDP"), name
    assert _reaches(_peer("worker"), _peer("internet"), 443)  # the model endpoint
    assert not _reaches(_peer("worker"), _peer("internet"), 80)
    assert not _reaches(_peer("worker"), OTHERS["other namespace"], 443)
    for name in ("exporter", "migrate", "redis", "postgres"):
        assert not _reaches(_peer(name), _peer("internet"), 443), name
    assert not _reaches(_peer("redis"), _peer("postgres"), 5432)


def test_the_mcp_server_reaches_the_api_alone() -> None:
    assert _reaches(_peer("mcp"), _peer("api"), 8088)
    assert not _reaches(_peer("mcp"), _peer("api"), 9464)
    for target, port in (("redis", 6379), ("postgres", 5432), ("worker", 9464),
                         ("exporter", 9464), ("chat server", 8080), ("internet", 443),
                         ("internet", 80), ("other namespace", 8088), ("prometheus", 9090)):
        assert not _reaches(_peer("mcp"), _peer(target), port), (target, port)
