"""deploy/ stays in step with the code: files parse, every HOOKYARD_* they set is a real setting, every
command is a real `hookyard` command, and every HTTP role is health-checked on /healthz."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from control.cli import command_names
from shared.settings import Settings, env_name

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
KNOWN_ENV = {env_name(f) for f in Settings.__struct_fields__}
COMMANDS = set(command_names())


def _env_names(env: object) -> set[str]:
    names = set(env) if isinstance(env, dict) else {e.split("=", 1)[0] for e in env or []}
    return {n for n in names if n.startswith("HOOKYARD_") or n in ("DATABASE_URL", "REDIS_URL")}


def test_compose_services_use_real_commands_and_settings() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yml").read_text())
    services = compose["services"]
    app_services = {name: s for name, s in services.items() if s.get("image") == "hookyard:latest"}
    assert set(app_services) == {"migrate", "edge", "control", "worker"}
    for name, service in app_services.items():
        assert service["command"][0] in COMMANDS, name
        assert _env_names(service["environment"]) <= KNOWN_ENV, name
    for name in ("edge", "control"):
        assert "/healthz" in " ".join(services[name]["healthcheck"]["test"])
    assert "--appendonly" in services["redis"]["command"]


@pytest.mark.parametrize("path", sorted((DEPLOY / "k8s").glob("*.yaml")), ids=lambda p: p.name)
def test_kubernetes_manifests(path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert documents
    for doc in documents:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), path.name
        if doc["kind"] == "ConfigMap":
            assert set(doc["data"]) <= KNOWN_ENV
        if doc["kind"] == "Secret":
            assert set(doc["stringData"]) <= KNOWN_ENV
        if doc["kind"] in ("Deployment", "Job"):
            spec = doc["spec"]["template"]["spec"]
            (container,) = spec["containers"]  # one process per container
            assert container["args"][0] in COMMANDS
            if doc["kind"] == "Deployment":
                assert (
                    doc["spec"]["selector"]["matchLabels"].items()
                    <= doc["spec"]["template"]["metadata"]["labels"].items()
                )
            if container["args"][0] in ("edge", "control"):
                assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
                assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_env_example_and_procfile() -> None:
    example = [
        line.split("=", 1)[0]
        for line in (DEPLOY / "hookyard.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert {n for n in example if not n.startswith("GRANIAN_")} <= KNOWN_ENV
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line and not line.startswith("#"):
            command = line.split(":", 1)[1].split()
            assert command[0] == "hookyard"
            assert command[1] in COMMANDS


def test_the_cluster_compose_file_runs_hookyard_on_three_redis_masters() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.cluster.yml").read_text())
    services = compose["services"]
    app_services = {name: s for name, s in services.items() if s.get("image") == "hookyard:latest"}
    assert set(app_services) == {"migrate", "edge", "control", "worker"}
    for name, service in app_services.items():
        assert service["command"][0] in COMMANDS, name
        assert _env_names(service["environment"]) <= KNOWN_ENV, name
        assert service["environment"]["REDIS_URL"].startswith("redis://redis-1:"), name
    masters = [s for s in services.values() if "--cluster-enabled" in s.get("command", [])]
    assert len(masters) == 3
    assert all("--appendonly" in m["command"] for m in masters)
    assert "--cluster" in " ".join(services["redis-cluster"]["command"])


def test_the_edge_autoscaler_and_the_redis_cluster_manifests() -> None:
    (hpa,) = yaml.safe_load_all((DEPLOY / "k8s" / "edge-hpa.yaml").read_text())
    (edge, _) = yaml.safe_load_all((DEPLOY / "k8s" / "edge.yaml").read_text())
    assert hpa["spec"]["scaleTargetRef"]["name"] == edge["metadata"]["name"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    cluster = list(yaml.safe_load_all((DEPLOY / "k8s" / "redis-cluster" / "redis-cluster.yaml").read_text()))
    (statefulset,) = [d for d in cluster if d["kind"] == "StatefulSet"]
    assert statefulset["spec"]["replicas"] == 3
    assert "--cluster-enabled" in statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
    for doc in yaml.safe_load_all((DEPLOY / "k8s" / "redis-cluster" / "overlay.yaml").read_text()):
        assert set(doc.get("data") or doc.get("stringData")) <= KNOWN_ENV
