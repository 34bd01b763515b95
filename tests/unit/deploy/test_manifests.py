"""The deployment files, checked offline.

Every Kubernetes object under deploy/k8s/ is validated against the JSON schema of
its kind (tests/fixtures/k8s_schemas/: Kubernetes 1.33's own schemas in their
strict flavour, and KEDA's ScaledObject; README.md there says where they come
from), then the objects are checked against each other: what the ScaledObject
scales, what the PodDisruptionBudget and the Services select, what the
autoscaling queries read, where the MCP server listens and what it reaches. Who may reach
whom under the NetworkPolicies: test_network_policy.py. The compose stack is checked in
test_compose.py.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs
import pytest
import yaml

from worker.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
SCHEMAS = ROOT / "tests" / "fixtures" / "k8s_schemas"
OPERATIONS = ROOT / "docs" / "operations.md"

# The exporter's fleet-wide gauges: all the autoscaler may read.
FLEET_METRICS = {
    "memfleet_queue_depth",
    "memfleet_queue_oldest_ready_age_seconds",
    "memfleet_fleet_lag_seconds",
    "memfleet_fleet_sessions_waiting",
    "memfleet_fleet_workers",
}
QUEUE_STATES = {"ready", "deferred", "in_progress", "orphaned"}
Doc = dict[str, Any]


# --- loading -----------------------------------------------------------------------


def _manifest_files() -> list[Path]:
    return sorted(p for p in K8S.iterdir() if p.suffix in (".yaml", ".yml"))


def _load_all() -> list[tuple[str, Doc]]:
    out = []
    for path in _manifest_files():
        for doc in yaml.safe_load_all(path.read_text("utf-8")):
            if doc is None:
                continue
            assert isinstance(doc, dict), f"{path.name}: a document that is not a mapping"
            name = doc.get("metadata", {}).get("name", "?")
            out.append((f"{path.name}:{doc.get('kind')}/{name}", doc))
    return out


DOCS = _load_all()
OBJECTS = [(ident, doc) for ident, doc in DOCS if doc.get("kind") != "Kustomization"]


def _objects(kind: str) -> list[Doc]:
    return [doc for _, doc in OBJECTS if doc["kind"] == kind]


def _one(kind: str, name: str) -> Doc:
    found = [doc for doc in _objects(kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} named {name}, found {len(found)}"
    return found[0]


def _schema_path(doc: Doc) -> Path:
    """kubernetes-validate's naming: <kind>-<group's first label>-<version>.json."""
    kind, api_version = doc["kind"].lower(), doc["apiVersion"]
    if api_version == "keda.sh/v1alpha1":
        return SCHEMAS / f"{kind}-keda-v1alpha1.json"
    group, _, version = api_version.rpartition("/")
    name = f"{kind}-{group.split('.')[0]}-{version}" if group else f"{kind}-{version}"
    return SCHEMAS / "kubernetes" / f"{name}.json"


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


@cache
def _validator(path: Path) -> Any:
    schema = json.loads(path.read_text("utf-8"))
    # Self-contained, or the validator would go to the network for the rest.
    outside = sorted({ref for ref in _refs(schema) if not ref.startswith("#")})
    assert not outside, f"{path.name} refers outside itself: {outside}"
    return jsonschema_rs.Draft202012Validator(schema)


def _errors(doc: Doc) -> list[str]:
    path = _schema_path(doc)
    assert path.exists(), (f"no schema for {doc['kind']} {doc['apiVersion']}: add it to "
                           f"{SCHEMAS.relative_to(ROOT)} (see its README.md)")
    return [f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}"
            for e in _validator(path).iter_errors(doc)]


# --- every object against its schema -------------------------------------------------


def test_the_manifests_are_found() -> None:
    kinds = {doc["kind"] for _, doc in OBJECTS}
    assert {"Job", "Deployment", "Service", "ScaledObject", "PodDisruptionBudget",
            "StatefulSet", "ConfigMap", "NetworkPolicy"} <= kinds


@pytest.mark.parametrize(("ident", "doc"), OBJECTS, ids=[ident for ident, _ in OBJECTS])
def test_each_object_matches_the_schema_of_its_kind(ident: str, doc: Doc) -> None:
    assert _errors(doc) == []


def _worker_deployment() -> Doc:
    return _one("Deployment", "memfleet-worker")


def _scaled_object() -> Doc:
    return _one("ScaledObject", "memfleet-worker")


def _break_trigger_metadata(so: Doc) -> None:
    del so["spec"]["triggers"][0]["metadata"]


def _break_metric_type(so: Doc) -> None:
    so["spec"]["triggers"][1]["metricType"] = "Average"


def _break_scaled_object_field(so: Doc) -> None:
    so["spec"]["maxReplicas"] = 20  # the HPA's name for it, not KEDA's


def _break_replicas(dep: Doc) -> None:
    dep["spec"]["replicas"] = "three"


def _break_container_field(dep: Doc) -> None:
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"


def _break_probe_port(dep: Doc) -> None:
    dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9464"


def _network_policy() -> Doc:
    return _one("NetworkPolicy", "memfleet-redis")


def _break_network_policy_field(policy: Doc) -> None:
    policy["spec"]["ingress"][0]["form"] = policy["spec"]["ingress"][0].pop("from")


BROKEN = [
    ("networkpolicy 'form' for 'from'", _network_policy, _break_network_policy_field, "form"),
    ("scaledobject trigger without metadata", _scaled_object, _break_trigger_metadata,
     "metadata"),
    ("scaledobject unknown metricType", _scaled_object, _break_metric_type, "Average"),
    ("scaledobject unknown field", _scaled_object, _break_scaled_object_field, "maxReplicas"),
    ("deployment replicas 'three'", _worker_deployment, _break_replicas, "three"),
    ("deployment unknown container field", _worker_deployment, _break_container_field,
     "imagePullPolicyy"),
    ("deployment port as a string", _worker_deployment, _break_probe_port, "9464"),
]


@pytest.mark.parametrize(("case", "pick", "damage", "named"), BROKEN,
                         ids=[case for case, *_ in BROKEN])
def test_a_broken_manifest_is_rejected(case: str, pick: Any, damage: Any, named: str) -> None:
    doc = copy.deepcopy(pick())
    assert _errors(doc) == []
    damage(doc)
    errors = _errors(doc)
    assert errors, f"{case}: accepted"
    assert any(named in error for error in errors), errors


def test_every_manifest_file_is_listed_in_the_kustomization() -> None:
    kustomizations = [doc for _, doc in DOCS if doc.get("kind") == "Kustomization"]
    assert len(kustomizations) == 1
    listed = kustomizations[0]["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in _manifest_files()} - {"kustomization.yaml"}
    assert set(listed) == on_disk


# --- the objects against each other --------------------------------------------------


def _pod_templates() -> list[tuple[str, Doc]]:
    """(owner, pod template) of every Deployment, StatefulSet and Job."""
    return [(f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"])
            for _, doc in OBJECTS if doc["kind"] in ("Deployment", "StatefulSet", "Job")]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _container(template: Doc, name: str) -> Doc:
    return next(c for c in template["spec"]["containers"] if c["name"] == name)


def _env(container: Doc) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}


def test_workloads_select_their_own_pods() -> None:
    for _, doc in OBJECTS:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            selector = doc["spec"]["selector"]["matchLabels"]
            assert _selects(selector, doc["spec"]["template"]["metadata"]["labels"])


def test_the_scaled_object_scales_the_worker_deployment() -> None:
    target = _scaled_object()["spec"]["scaleTargetRef"]
    assert target.get("kind", "Deployment") == "Deployment"
    assert target.get("apiVersion", "apps/v1") == "apps/v1"
    assert _one("Deployment", target["name"]) is _worker_deployment()


def test_the_replica_bounds_are_consistent() -> None:
    spec = _scaled_object()["spec"]
    low, high = spec.get("minReplicaCount", 0), spec["maxReplicaCount"]
    assert 0 <= low <= high  # KEDA's CRD checks this with a CEL rule, not the schema
    assert spec["fallback"]["replicas"] <= high
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] > 0


def _triggers() -> dict[str, Doc]:
    return {t["name"]: t for t in _scaled_object()["spec"]["triggers"]}


def test_the_triggers_read_only_the_exporters_fleet_gauges() -> None:
    triggers = _triggers()
    assert set(triggers) == {"jobs", "lag"}
    for trigger in triggers.values():
        assert trigger["type"] == "prometheus"
        query = trigger["metadata"]["query"]
        metrics = set(re.findall(r"\b(memfleet_[a-z_]+)\b", query))
        assert metrics and metrics <= FLEET_METRICS, query
        # Every selector in the query names the exporter's job, never the workers'.
        selectors = re.findall(r"memfleet_[a-z_]+\{([^}]*)\}", query)
        assert len(selectors) == len(re.findall(r"memfleet_[a-z_]+", query)), query
        for selector in selectors:
            assert 'job="memfleet-exporter"' in selector, query
        states = re.findall(r'state=~?"([^"]*)"', query)
        for state in states:
            assert set(state.split("|")) <= QUEUE_STATES, query
        float(trigger["metadata"]["threshold"])
        # An empty answer must be an error (then fallback), not a zero that scales down.
        assert trigger["metadata"]["ignoreNullValues"] == "false"


def test_the_jobs_trigger_counts_max_jobs_per_replica() -> None:
    jobs, lag = _triggers()["jobs"], _triggers()["lag"]
    assert jobs["metricType"] == "AverageValue"
    assert lag["metricType"] == "Value"
    assert "sum(" in jobs["metadata"]["query"]
    assert "max(" in lag["metadata"]["query"]
    worker = _container(_worker_deployment()["spec"]["template"], "worker")
    assert float(jobs["metadata"]["threshold"]) == float(_env(worker)["MEMFLEET_MAX_JOBS"])
    assert float(jobs["metadata"]["activationThreshold"]) == 0


def test_the_worker_drains_within_its_grace_period() -> None:
    template = _worker_deployment()["spec"]["template"]
    timeout = float(_env(_container(template, "worker"))["MEMFLEET_JOB_TIMEOUT_S"])
    assert template["spec"]["terminationGracePeriodSeconds"] > timeout


def test_the_worker_is_live_while_it_answers_and_ready_while_its_servers_do() -> None:
    # A worker waits out a lost server (docs/operations.md): liveness on /readyz would
    # restart it for nothing; readiness on /healthz would never report the outage.
    container = _container(_one("Deployment", "memfleet-worker")["spec"]["template"], "worker")
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_pdb_covers_exactly_the_worker_pods() -> None:
    pdbs = _objects("PodDisruptionBudget")
    assert len(pdbs) == 1
    selector = pdbs[0]["spec"]["selector"]["matchLabels"]
    matched = [owner for owner, template in _pod_templates()
               if _selects(selector, template["metadata"]["labels"])]
    assert matched == ["Deployment/memfleet-worker"]
    assert "maxUnavailable" in pdbs[0]["spec"]


def test_every_service_selects_pods_that_serve_its_ports() -> None:
    for service in _objects("Service"):
        selector = service["spec"]["selector"]
        matched = [template for _, template in _pod_templates()
                   if _selects(selector, template["metadata"]["labels"])]
        assert matched, f"Service {service['metadata']['name']} selects no pod template"
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for template in matched:
                ports = [p for c in template["spec"]["containers"] for p in c.get("ports", [])]
                assert any(p.get("name") == target or p["containerPort"] == target
                           for p in ports), (service["metadata"]["name"], target)


def test_statefulsets_have_their_service_and_volumes() -> None:
    services = {s["metadata"]["name"] for s in _objects("Service")}
    config_maps = {c["metadata"]["name"] for c in _objects("ConfigMap")}
    for sts in _objects("StatefulSet"):
        assert sts["spec"]["serviceName"] in services
        claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}
        pod = sts["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in claims | volumes.keys()
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps


def test_the_exporter_is_one_process_apart_from_the_workers() -> None:
    exporter = _one("Deployment", "memfleet-exporter")
    assert exporter["spec"]["replicas"] == 1
    # Never two at once (a rolling update would double the summed queue depth).
    assert exporter["spec"]["strategy"]["type"] == "Recreate"
    container = _container(exporter["spec"]["template"], "exporter")
    assert container["args"] == ["exporter"]
    port = _env(container)["MEMFLEET_METRICS_PORT"]
    assert {"name": "metrics", "containerPort": int(port)} in container["ports"]
    # Liveness asks only that the process answers; readiness that its Redis answers too.
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    service = _one("Service", "memfleet-exporter")
    assert {"name": "metrics", "port": int(port), "targetPort": "metrics"} in (
        service["spec"]["ports"])


def test_redis_keeps_its_append_only_file_on_a_volume() -> None:
    conf = _one("ConfigMap", "memfleet-redis")["data"]["redis.conf"]
    settings = dict(line.split(None, 1) for line in conf.splitlines()
                    if line.strip() and not line.lstrip().startswith("#"))
    assert settings["appendonly"] == "yes"
    assert settings["appendfsync"] == "everysec"
    assert settings["maxmemory-policy"] == "noeviction"
    sts = _one("StatefulSet", "memfleet-redis")
    mounts = _container(sts["spec"]["template"], "redis")["volumeMounts"]
    data = [m for m in mounts if m["mountPath"] == settings["dir"]]
    assert [m["name"] for m in data] == ["data"]  # the volume claim template


def _postgres_settings() -> dict[str, str]:
    args = _container(_one("StatefulSet", "memfleet-postgres")["spec"]["template"],
                      "postgres")["args"]
    assert args[::2] == ["-c"] * (len(args) // 2)
    return dict(arg.split("=", 1) for arg in args[1::2])


def test_postgres_has_a_connection_for_every_worker_at_full_scale() -> None:
    settings = _postgres_settings()
    assert settings["synchronous_commit"] == "on"
    assert "shared_buffers" in settings
    worker = _worker_deployment()
    surge = worker["spec"]["strategy"]["rollingUpdate"]["maxSurge"]
    high = _scaled_object()["spec"]["maxReplicaCount"]
    extra = (math.ceil(high * int(surge.rstrip("%")) / 100) if str(surge).endswith("%")
             else int(surge))
    pool = int(_env(_container(worker["spec"]["template"], "worker"))["MEMFLEET_DB_POOL_MAX"])
    # Workers at maxReplicaCount during a rolling update, plus the exporter, the API
    # and a few for migrate, the CLI and admins.
    assert int(settings["max_connections"]) >= (high + extra) * pool + 20


def test_memfleet_containers_take_their_settings_from_the_secret() -> None:
    for owner, template in _pod_templates():
        for container in template["spec"]["containers"]:
            if container["image"].startswith("memfleet:"):
                assert {"secretRef": {"name": "memfleet"}} in container["envFrom"], owner


# --- the MCP server (mcp.yaml) -------------------------------------------------------


def _mcp() -> tuple[Doc, Doc, argparse.Namespace]:
    """Its Deployment, its container, and its command as memfleet's own parser reads it
    (the image has no entrypoint: args is the whole command)."""
    deployment = _one("Deployment", "memfleet-mcp")
    container = _container(deployment["spec"]["template"], "mcp")
    assert container["args"][:2] == ["memfleet", "mcp"]
    return deployment, container, build_parser().parse_args(container["args"][1:])


def test_the_mcp_server_listens_where_its_service_and_probes_look() -> None:
    _, container, options = _mcp()
    # Not loopback: the Service reaches it.
    assert options.http and options.host == "0.0.0.0"  # noqa: S104 - the pod's setting
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert list(ports.values()) == [options.port]
    service = _one("Service", "memfleet-mcp")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == list(ports)
    # No health path, and /mcp answers 401 to a request without a credential, which an
    # httpGet probe counts as a failure (2xx and 3xx pass): the port answering is the check.
    for probe in ("livenessProbe", "readinessProbe"):
        assert set(container[probe]) & {"httpGet", "exec", "grpc"} == set(), probe
        assert container[probe]["tcpSocket"]["port"] in (*ports, options.port), probe


def test_the_mcp_server_reaches_the_api_its_policy_lets_it() -> None:
    _, _, options = _mcp()
    api = urlsplit(options.api_url)
    # The memory API's Service (not in these manifests) on its pods' port.
    assert (api.scheme, api.hostname) == ("http", "memfleet-api")
    (rule,) = _one("NetworkPolicy", "memfleet-mcp")["spec"]["egress"]
    assert rule["to"] == [{"podSelector": {"matchLabels": {"app": "memfleet-api"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": api.port}]
    api_ingress = _one("NetworkPolicy", "memfleet-api")["spec"]["ingress"]
    assert {"protocol": "TCP", "port": api.port} in api_ingress[0]["ports"]


def test_the_mcp_server_holds_no_secret_and_reaches_no_data_store() -> None:
    deployment, container, _ = _mcp()
    assert "memfleet.io/client" not in deployment["spec"]["template"]["metadata"]["labels"]
    assert "envFrom" not in container
    assert all("valueFrom" not in item for item in container.get("env", []))


def test_an_mcp_session_stays_on_the_pod_that_opened_it() -> None:
    """A session lives in one process: more than one replica needs client affinity."""
    deployment, _, options = _mcp()
    service = _one("Service", "memfleet-mcp")
    assert deployment["spec"].get("replicas", 1) == 1 or (
        service["spec"].get("sessionAffinity") == "ClientIP")
    # A tool call waits at most --timeout for the API: it ends within the grace period.
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > options.timeout


# --- the Prometheus scrape configuration shown in docs/operations.md ----------------


def test_the_documented_scrape_configs_name_the_jobs_the_queries_select() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", OPERATIONS.read_text("utf-8"), re.S)
    jobs = set()
    for block in blocks:
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and "scrape_configs" in doc:
            jobs |= {c["job_name"] for c in doc["scrape_configs"]}
    assert {"memfleet-worker", "memfleet-exporter"} <= jobs


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_runbook_links_into_the_operations_guide_resolve() -> None:
    anchors = _anchors(OPERATIONS.read_text("utf-8"))
    linked = set()
    for path in (ROOT / "deploy").rglob("*.y*ml"):
        linked |= set(re.findall(r"docs/operations\.md#([a-z0-9_-]+)", path.read_text("utf-8")))
    for path in (ROOT / "deploy" / "README.md", ROOT / "README.md"):
        linked |= set(re.findall(r"operations\.md#([a-z0-9_-]+)", path.read_text("utf-8")))
    assert linked - anchors == set()


# --- secrets and Redis's password ----------------------------------------------------

SECRET_NAME = re.compile(r"PASSWORD|SECRET|_KEY$|TOKEN", re.I)


def test_no_secret_is_written_in_a_manifest() -> None:
    """Every secret comes from a Secret the operator generates, never a literal."""
    for owner, template in _pod_templates():
        for container in template["spec"]["containers"]:
            for item in container.get("env", []):
                if SECRET_NAME.search(item["name"]):
                    assert "secretKeyRef" in item.get("valueFrom", {}), (owner, item["name"])
                assert not re.search(r"://[^:/@\s]*:[^@\s]+@", str(item.get("value", ""))), (
                    owner, item["name"])
    assert _objects("Secret") == []


def test_redis_requires_its_password_and_keeps_protected_mode() -> None:
    conf = _one("ConfigMap", "memfleet-redis")["data"]["redis.conf"]
    settings = dict(line.split(None, 1) for line in conf.splitlines()
                    if line.strip() and not line.lstrip().startswith("#"))
    assert settings["protected-mode"] == "yes"
    assert "requirepass" not in settings  # the password is not in a ConfigMap
    redis = _container(_one("StatefulSet", "memfleet-redis")["spec"]["template"], "redis")
    args = redis["args"]  # after the image's entrypoint (test_least_privilege.py)
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    password = next(e for e in redis["env"] if e["name"] == "REDIS_PASSWORD")
    assert password["valueFrom"] == {"secretKeyRef": {"name": "memfleet-redis",
                                                      "key": "password"}}
    for probe in ("readinessProbe", "livenessProbe"):
        assert '-a "$REDIS_PASSWORD"' in " ".join(redis[probe]["exec"]["command"])
