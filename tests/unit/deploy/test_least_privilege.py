"""Every container of deploy/ runs with the least it needs, checked offline.

Kubernetes (deploy/k8s): every pod spec is restricted as the Pod Security Standards'
"restricted" profile asks, and more: a non-root numeric uid, no privilege escalation,
every capability dropped, the RuntimeDefault seccomp profile, a read-only root file
system (emptyDir volumes where a program writes), no service-account token. Redis keeps
its image's entrypoint and runs as the image's valkey uid. Compose (deploy/compose): the
same spirit with compose's keys. The images built here (deploy/Dockerfile,
deploy/compose/api.Dockerfile and mcp.Dockerfile) end on a numeric USER, so runAsNonRoot
can verify it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
COMPOSE_FILE = ROOT / "deploy" / "compose" / "docker-compose.yml"
DOCKERFILES = {"memfleet": ROOT / "deploy" / "Dockerfile",
               "memfleet-api": ROOT / "deploy" / "compose" / "api.Dockerfile",
               "memfleet-mcp": ROOT / "deploy" / "compose" / "mcp.Dockerfile"}
# The uid and gid of the user the pinned images were made for: valkey/valkey:8.1.10
# (Debian: `useradd -r -g valkey -u 999 valkey`) and pgvector/pgvector:0.8.1-pg17 (on
# postgres:17, Debian: postgres is uid 999).
VALKEY_UID = 999
POSTGRES_UID = 999
Doc = dict[str, Any]


# --- Kubernetes ----------------------------------------------------------------------


def _k8s_objects() -> list[Doc]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text("utf-8"))
                 if d and d.get("kind") != "Kustomization"]
    return docs


def _pod_specs() -> list[tuple[str, Doc]]:
    """(owner, pod spec) of every object that makes pods."""
    found = []
    for doc in _k8s_objects():
        spec = doc.get("spec", {})
        owner = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] == "Pod":
            found.append((owner, spec))
        elif doc["kind"] == "CronJob":
            found.append((owner, spec["jobTemplate"]["spec"]["template"]["spec"]))
        elif "template" in spec and "spec" in spec["template"]:
            found.append((owner, spec["template"]["spec"]))
    return found


def _containers(pod: Doc) -> list[Doc]:
    return [*pod.get("initContainers", []), *pod["containers"],
            *pod.get("ephemeralContainers", [])]


def _effective(pod: Doc, container: Doc, key: str) -> Any:
    """A container's setting, else the pod's (the container's overrides the pod's)."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod.get("securityContext", {}).get(key)


def _pod_faults(pod: Doc) -> list[str]:
    """What a pod spec lacks of the settings every pod of deploy/k8s must have."""
    faults = []
    if pod.get("automountServiceAccountToken") is not False:
        faults.append("automountServiceAccountToken is not false")
    faults += [f"{key} is on" for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    for container in _containers(pod):
        name, own = container["name"], container.get("securityContext", {})
        if _effective(pod, container, "runAsNonRoot") is not True:
            faults.append(f"{name}: runAsNonRoot is not true")
        uid = _effective(pod, container, "runAsUser")
        if not isinstance(uid, int) or uid <= 0:
            faults.append(f"{name}: runAsUser is not a non-root uid ({uid})")
        if own.get("allowPrivilegeEscalation") is not False:
            faults.append(f"{name}: allowPrivilegeEscalation is not false")
        if own.get("privileged"):
            faults.append(f"{name}: privileged")
        if own.get("readOnlyRootFilesystem") is not True:
            faults.append(f"{name}: readOnlyRootFilesystem is not true")
        capabilities = own.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            faults.append(f"{name}: capabilities do not drop ALL")
        if capabilities.get("add"):
            faults.append(f"{name}: capabilities added {capabilities['add']}")
        seccomp = _effective(pod, container, "seccompProfile") or {}
        if seccomp.get("type") != "RuntimeDefault":
            faults.append(f"{name}: seccompProfile is not RuntimeDefault")
    return faults


POD_SPECS = _pod_specs()


def test_the_pod_specs_are_found() -> None:
    owners = {owner for owner, _ in POD_SPECS}
    assert {"StatefulSet/memfleet-redis", "StatefulSet/memfleet-postgres",
            "Job/memfleet-migrate", "Deployment/memfleet-exporter",
            "Deployment/memfleet-worker", "Deployment/memfleet-mcp"} <= owners


@pytest.mark.parametrize(("owner", "pod"), POD_SPECS, ids=[owner for owner, _ in POD_SPECS])
def test_every_pod_runs_restricted(owner: str, pod: Doc) -> None:
    assert _pod_faults(pod) == []


def _parent(pod: Doc, path: str) -> tuple[Any, str]:
    """The node holding the last part of a dotted path (numbers index lists)."""
    *parents, last = path.split(".")
    node: Any = pod
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    return node, last


def _drop_key(path: str) -> Callable[[Doc], None]:
    def damage(pod: Doc) -> None:
        node, last = _parent(pod, path)
        del node[last]
    return damage


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def damage(pod: Doc) -> None:
        node, last = _parent(pod, path)
        node[last] = value
    return damage


BROKEN = [
    ("token mounted", _drop_key("automountServiceAccountToken"), "automountServiceAccountToken"),
    ("may run as root", _drop_key("securityContext.runAsNonRoot"), "runAsNonRoot"),
    ("uid 0", _set("securityContext.runAsUser", 0), "runAsUser"),
    ("escalation", _drop_key("containers.0.securityContext.allowPrivilegeEscalation"),
     "allowPrivilegeEscalation"),
    ("writable root", _set("containers.0.securityContext.readOnlyRootFilesystem", False),
     "readOnlyRootFilesystem"),
    ("a capability kept", _set("containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}),
     "drop ALL"),
    ("a capability added",
     _set("containers.0.securityContext.capabilities", {"drop": ["ALL"], "add": ["NET_ADMIN"]}),
     "added"),
    ("no seccomp", _drop_key("securityContext.seccompProfile"), "seccompProfile"),
    ("host network", _set("hostNetwork", True), "hostNetwork"),
]


@pytest.mark.parametrize(("case", "damage", "named"), BROKEN, ids=[c for c, *_ in BROKEN])
def test_a_pod_missing_a_setting_is_caught(case: str, damage: Any, named: str) -> None:
    pod = copy.deepcopy(dict(POD_SPECS)["Deployment/memfleet-worker"])
    assert _pod_faults(pod) == []
    damage(pod)
    assert any(named in fault for fault in _pod_faults(pod)), (case, _pod_faults(pod))


def _pod(owner: str) -> Doc:
    return dict(POD_SPECS)[owner]


def test_redis_keeps_the_images_entrypoint_and_runs_as_valkey() -> None:
    """A `command:` replaces the image's entrypoint, which is what drops root to the
    valkey user: Redis ran as root. It is `args:` now, and the pod runs as valkey's uid
    (the entrypoint then only checks that /data is writable and execs)."""
    pod = _pod("StatefulSet/memfleet-redis")
    (redis,) = [c for c in pod["containers"] if c["name"] == "redis"]
    assert "command" not in redis
    assert redis["args"][0] == "valkey-server"
    assert _effective(pod, redis, "runAsUser") == VALKEY_UID
    assert _effective(pod, redis, "runAsGroup") == VALKEY_UID
    # The volume claim is group-writable for it, also one written earlier as root.
    assert pod["securityContext"]["fsGroup"] == VALKEY_UID


def test_postgres_runs_as_postgres_with_its_socket_directory_writable() -> None:
    pod = _pod("StatefulSet/memfleet-postgres")
    (postgres,) = pod["containers"]
    assert "command" not in postgres  # the image's entrypoint initialises the data dir
    assert _effective(pod, postgres, "runAsUser") == POSTGRES_UID
    assert pod["securityContext"]["fsGroup"] == POSTGRES_UID
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in postgres["volumeMounts"]}
    for path in ("/var/run/postgresql", "/tmp"):
        assert "emptyDir" in volumes[mounts[path]], path


def _dockerfile_user(path: Path) -> str:
    """The USER of a Dockerfile's last stage."""
    text = path.read_text("utf-8")
    last_stage = text[text.rindex("\nFROM "):]
    users = re.findall(r"^USER\s+(\S+)", last_stage, re.M)
    assert users, f"{path.name}: the last stage sets no USER (root)"
    return str(users[-1])


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_the_images_built_here_run_as_a_numeric_non_root_user(image: str) -> None:
    user = _dockerfile_user(DOCKERFILES[image])
    uid, _, gid = user.partition(":")
    # A name cannot be verified by runAsNonRoot (the kubelet refuses to start the pod).
    assert uid.isdigit() and int(uid) > 0, user
    assert gid == "" or (gid.isdigit() and int(gid) > 0), user
    text = DOCKERFILES[image].read_text("utf-8")
    assert re.search(rf"useradd\b[^\n]*--uid {uid}\b", text), "the user exists in the image"


def test_memfleet_pods_run_as_the_uid_of_the_image() -> None:
    seen = 0
    for owner, pod in POD_SPECS:
        for container in _containers(pod):
            image = container["image"].partition(":")[0]
            if image in DOCKERFILES:
                seen += 1
                uid = int(_dockerfile_user(DOCKERFILES[image]).partition(":")[0])
                assert _effective(pod, container, "runAsUser") == uid, owner
                # The root file system is read-only: Python's tempfile writes to /tmp.
                volumes = {v["name"]: v for v in pod["volumes"]}
                mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                assert "emptyDir" in volumes[mounts["/tmp"]], owner
    assert seen == 4  # migrate, exporter, worker (memfleet); the MCP server (memfleet-mcp)


# --- Compose ---------------------------------------------------------------------------


def _compose_services() -> dict[str, Doc]:
    doc = yaml.safe_load(COMPOSE_FILE.read_text("utf-8"))  # merges the `<<:` anchors
    return dict(doc["services"])


def _builds_non_root(service: Doc) -> bool:
    build = service.get("build")
    if not build:
        return False
    dockerfile = (COMPOSE_FILE.parent / build["context"] / build["dockerfile"]).resolve()
    uid = _dockerfile_user(dockerfile).partition(":")[0]
    return uid.isdigit() and int(uid) > 0


@pytest.mark.parametrize("name", sorted(_compose_services()))
def test_every_compose_service_runs_restricted(name: str) -> None:
    service = _compose_services()[name]
    assert service.get("cap_drop") == ["ALL"], name
    assert "no-new-privileges:true" in service.get("security_opt", []), name
    assert service.get("read_only") is True, name
    assert "cap_add" not in service and not service.get("privileged"), name
    user = str(service.get("user", ""))
    # Its own numeric user, or an image built here that ends on one.
    assert (user.split(":")[0].isdigit() and int(user.split(":")[0]) > 0) or (
        not user and _builds_non_root(service)), (name, user)


def test_compose_gives_each_writer_its_writable_paths() -> None:
    services = _compose_services()
    assert services["redis"]["user"] == f"{VALKEY_UID}:{VALKEY_UID}"
    assert services["postgres"]["user"] == f"{POSTGRES_UID}:{POSTGRES_UID}"
    assert {"/var/run/postgresql", "/tmp"} <= set(services["postgres"]["tmpfs"])
    for name in ("migrate", "worker", "exporter", "api", "mcp", "llm-stub"):
        assert "/tmp" in services[name]["tmpfs"], name
