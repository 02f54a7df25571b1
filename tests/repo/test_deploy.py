"""deploy/ stays in step with the code: files parse, every HOOKYARD_* they set is a real setting, every
command is a real `hookyard` command, compose health-checks /healthz while Kubernetes probes /livez, and the
image is built with the C fast path its figures were measured with (no Docker engine: the Dockerfile is parsed)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml

from control.cli import command_names
from shared.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
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
            _probes_check_no_dependency(container)


def _probes_check_no_dependency(container: dict[str, Any]) -> None:
    """Every long-lived role's probes on ``/livez``: ``/healthz`` answers 503 while Postgres or Redis is away, so
    as liveness it restarted every pod a minute into an outage, and as the edge's readiness it emptied the
    Service (refused connections, not ingest's 503 with Retry-After). The edge gets only the secret it reads."""
    role = container["args"][0]
    if role not in ("edge", "control", "worker"):
        return
    ports = {p["name"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez", role
    assert container["livenessProbe"]["httpGet"]["port"] in ports, role
    if role in ("edge", "control"):
        assert container["readinessProbe"]["httpGet"]["path"] == "/livez", role
    if role == "edge":
        assert not [s for s in container.get("envFrom", []) if "secretRef" in s], "the edge gets the whole Secret"
        secrets = {e["valueFrom"]["secretKeyRef"]["key"] for e in container.get("env", []) if "valueFrom" in e}
        assert secrets == {"REDIS_URL"}


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
            # honcho and foreman stop every process when one exits: a one-shot (migrate) stopped the stack
            assert command[1] in ("edge", "control", "worker"), line


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


class Stage(msgspec.Struct):
    base: str
    name: str | None
    steps: list[tuple[str, str]]  # (INSTRUCTION, its arguments), continuation lines joined

    def runs(self) -> list[str]:
        return [args for instruction, args in self.steps if instruction == "RUN"]


def dockerfile_stages(text: str) -> list[Stage]:
    """The Dockerfile's stages in order, ``${ARG}`` in FROM resolved from the ARG defaults before it."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction, rest = instruction.upper(), " ".join(rest.split())
        if instruction == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            stages.append(Stage(base, words[2] if len(words) == 3 and words[1].upper() == "AS" else None, []))
        elif instruction == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            stages[-1].steps.append((instruction, rest))
    return stages


def _apt_installs(stage: Stage) -> set[str]:
    packages: set[str] = set()
    for run in stage.runs():
        for command in run.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["apt-get", "install"]:
                packages |= {w for w in words[2:] if not w.startswith("-")}
    return packages


def test_the_image_builds_the_c_fast_path_and_refuses_to_run_without_it() -> None:
    """setuptools skips an optional extension that does not compile without failing the install, so an
    image built without a compiler or OpenSSL's headers ran the Python paths only. The build stage must have
    both and make wheels; the runtime stage installs those (no source beside them) and imports every
    extension pyproject.toml declares, so the image build fails where one is missing."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extensions = pyproject["tool"]["setuptools"]["ext-modules"]
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    stages = dockerfile_stages((DEPLOY / "Dockerfile").read_text())
    assert len(stages) >= 2, "one stage: no room for a compiler that stays out of the runtime image"
    runtime = stages[-1]
    mounts = [re.search(r"from=([\w.-]+)", args) for instruction, args in runtime.steps if "from=" in args]
    (build,) = [s for s in stages if s.name and any(m and m.group(1) == s.name for m in mounts)]
    assert build.base == runtime.base, "the headers built against and the libcrypto run against must match"

    assert {"gcc", "libc6-dev"} <= _apt_installs(build), "the build stage has no C compiler"
    if any("crypto" in e.get("libraries", []) for e in extensions):
        assert "libssl-dev" in _apt_installs(build), "the build stage has no OpenSSL headers"
    copied = {args.split()[0] for instruction, args in build.steps if instruction == "COPY"}
    assert {"pyproject.toml", *packages} <= copied, "the build stage misses part of the source"
    (wheel,) = [shlex.split(r) for r in build.runs() if "pip wheel" in r]
    wheel_dir = wheel[wheel.index("--wheel-dir") + 1]

    assert not {"gcc", "libssl-dev"} & _apt_installs(runtime), "the compiler stays in the build stage"
    assert "libssl3" in _apt_installs(runtime), "the runtime stage has no libcrypto for the extension"
    assert not [a for i, a in runtime.steps if i in ("COPY", "ADD") and "--from" not in a], (
        "source in the runtime stage: the import check could find an extension built elsewhere"
    )
    runs = runtime.runs()
    installs = [i for i, r in enumerate(runs) if f"--no-index --find-links {wheel_dir} hookyard" in r]
    assert installs, f"the runtime stage does not install hookyard from the build stage's {wheel_dir}"
    for extension in extensions:
        check = f'python -c "import {extension["name"]}"'
        checked = [i for i, r in enumerate(runs) if r == check]
        assert checked, f"the image is built without checking that {extension['name']} imports ({check})"
        assert checked[0] > installs[0], f"{check} runs before hookyard is installed"


def _published(service: dict[str, Any]) -> dict[int, int]:
    """Host port → container port of a compose service's short-syntax ``ports`` ("8080" alone publishes the
    container's port on a random host port, so it maps nothing)."""
    mapped: dict[int, int] = {}
    for entry in service.get("ports", []):
        parts = str(entry).split(":")
        if len(parts) >= 2:
            mapped[int(parts[-2])] = int(parts[-1])
    return mapped


@pytest.mark.parametrize("name", ["compose.yml", "compose.cluster.yml"])
def test_compose_public_urls_name_ports_that_are_published(name: str) -> None:
    """A trial's compose stack handed out ingest URLs on http://localhost:8080 while the edge published
    ``ports: ["8080"]`` (a random host port per replica, no load balancer): nothing listened on 8080."""
    services = yaml.safe_load((DEPLOY / name).read_text())["services"]
    for role, variable in (("edge", "HOOKYARD_PUBLIC_EDGE_URL"), ("control", "HOOKYARD_PUBLIC_CONTROL_URL")):
        service = services[role]
        url = urlsplit(service["environment"][variable])
        assert url.hostname == "localhost", (role, url)
        command = service["command"]
        serves = int(command[command.index("--port") + 1])
        assert _published(service).get(url.port or 80) == serves, f"{name}: {variable} names no published port"
