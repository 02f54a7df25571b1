"""The layering docs/architecture.md draws (import-linter contracts) and the published interface description."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest
from litestar.routes import HTTPRoute

from tests.helpers import module_database

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

_LINT = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n"
)


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LINT], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _importlinter_config() -> str:
    """The [tool.importlinter] part of pyproject.toml, verbatim."""
    text = PYPROJECT.read_text(encoding="utf-8")
    start = text.index("[tool.importlinter]")
    rest = text[start:]
    following = re.search(r"^\[(?!\[?tool\.importlinter)", rest[1:], flags=re.MULTILINE)
    return rest if following is None else rest[: following.start() + 1]


def test_contracts_cover_what_design_requires():
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert config["include_external_packages"] is True, "external packages must be visible to forbid them"
    forbidden = {
        tuple(c["source_modules"]): set(c["forbidden_modules"]) for c in config["contracts"] if c["type"] == "forbidden"
    }
    assert {"control", "litestar", "asyncpg", "httpx"} <= forbidden[("edge",)]
    assert {"edge", "control"} <= forbidden[("shared",)]
    layers = {c["containers"][0]: c for c in config["contracts"] if c["type"] == "layers"}
    assert layers["control"]["layers"] == [
        "cli",
        "app",
        "api | mcp",
        "workers",
        "service",
        "delivery | routing | schemas",
        "support",
        "transform",
        "db",
        "records",
    ]
    assert layers["control"]["exhaustive"] is True, "a new loose module of control must be given a layer"
    assert layers["control.cli"]["exhaustive"] is True
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["control"] for c in config["contracts"])


def test_import_contracts_are_kept():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Contracts: \d+ kept, 0 broken", done.stdout), done.stdout


# One violation per contract, added to a copy of the real tree: (file, line appended to it).
VIOLATIONS = [
    ("edge/app.py", "import httpx"),
    ("edge/app.py", "import control"),
    ("shared/keys.py", "import edge.app"),
    ("control/records/replay.py", "from control.delivery.send import send"),  # a lower layer, a higher one
    ("control/api/events.py", "from control.mcp.registry import TOOLS"),  # api and mcp are siblings
    ("control/loose.py", "import control.app"),  # a module at the top of control with no layer
    # the import-cycle dodge remote.py once had: a late import counts as much as one at the top
    ("control/cli/remote.py", "def _late():\n    from control.cli.commands.open import add_parser"),
    ("control/service/accounts.py", "import control.service.registration"),  # registration imports accounts
    ("control/support/sealing.py", "import control.service.endpoints"),  # support sits below the operations
]


def test_import_contracts_catch_violations(tmp_path):
    """The same configuration fails a copy of this tree with one broken rule per contract, so a green run
    means something."""
    (tmp_path / "pyproject.toml").write_text(_importlinter_config(), encoding="utf-8")
    for package in ("edge", "control", "shared"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    for name, line in VIOLATIONS:
        with (tmp_path / name).open("a", encoding="utf-8") as out:
            out.write(f"\n{line}\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0 kept, 5 broken" in done.stdout, done.stdout
    assert "edge.app -> httpx" in done.stdout
    assert "edge.app -> control" in done.stdout
    assert "shared.keys -> edge.app" in done.stdout
    assert "control.records is not allowed to import control.delivery" in done.stdout
    assert "control.api is not allowed to import control.mcp" in done.stdout
    assert "control.loose" in done.stdout
    assert "control.cli.remote is not allowed to import control.cli.commands" in done.stdout
    assert "No cycles are allowed in control.service." in done.stdout
    assert "control.support is not allowed to import control.service" in done.stdout


def test_service_holds_the_operations_of_v1_and_mcp():
    """control/service/ reads as the list of operations: every module of it (or, for a resource with several,
    its package) is called by a /v1 handler or an MCP tool. A job belongs beside its loop in control/workers,
    a helper or a piece of infrastructure in control/support
    (docs/adr/0066-operations-jobs-and-support.md)."""
    graph = grimp.build_graph("control")
    fronts = ("control.api", "control.mcp")
    uncalled = []
    for entry in sorted(graph.find_children("control.service")):
        modules = {entry} | graph.find_descendants(entry)
        callers = {c for m in modules for c in graph.find_modules_that_directly_import(m)}
        if not any(c.startswith(fronts) for c in callers):
            uncalled.append(entry)
    assert uncalled == []


def test_importing_the_edge_loads_no_control_plane_module():
    code = (
        "import sys, edge.app\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'control', 'litestar', 'asyncpg', 'httpx'})\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the edge pulls in: {done.stdout}"


# -- OpenAPI --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def database_url(servers, template_database) -> Iterator[str]:
    with module_database(servers, template_database) as url:
        yield url


# The error statuses docs/reference/endpoints.md promises per /v1/endpoints route; the schema may document more,
# never fewer.
SPEC_ERRORS = {
    ("get", "/v1/endpoints"): {401, 429},
    ("post", "/v1/endpoints"): {400, 401, 403, 409, 429},
    ("get", "/v1/endpoints/{endpoint_id}"): {401, 404},
    ("patch", "/v1/endpoints/{endpoint_id}"): {400, 401, 404, 409},
    ("delete", "/v1/endpoints/{endpoint_id}"): {401, 404},
}


def _schema_path(path: str) -> str:
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


async def test_openapi_documents_every_v1_route_with_enveloped_errors_and_bearer_auth(client):
    resp = await client.get("/schema/openapi.json")
    assert resp.status_code == 200
    schema = resp.json()
    assert schema["info"]["version"] == "1.0.0"
    assert schema["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}

    envelope = schema["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["required"] == ["error"]
    body_ref = envelope["properties"]["error"]["$ref"].rsplit("/", 1)[-1]
    error_body = schema["components"]["schemas"][body_ref]
    assert sorted(error_body["required"]) == ["code", "message"]

    # Every /v1 route the app serves is in the schema...
    served = {
        (method.lower(), _schema_path(route.path))
        for route in client.app.routes
        if isinstance(route, HTTPRoute) and route.path.startswith("/v1")
        for method in route.methods
        if method not in ("OPTIONS", "HEAD")
    }
    documented = {(method, path) for path, item in schema["paths"].items() if path.startswith("/v1") for method in item}
    assert served, "no /v1 routes found"
    assert served <= documented, served - documented

    # ...with bearer security, and every error status it documents carries the envelope.
    for method, path in sorted(documented):
        operation = schema["paths"][path][method]
        assert operation.get("security") == [{"bearer": []}], (method, path)
        assert operation.get("operationId"), (method, path)
        errors = {int(s) for s in operation["responses"] if int(s) >= 400}
        assert 401 in errors, (method, path)
        for status in errors:
            content = operation["responses"][str(status)]["content"]["application/json"]["schema"]
            assert content == {"$ref": "#/components/schemas/ErrorEnvelope"}, (method, path, status)

    for (method, path), statuses in SPEC_ERRORS.items():
        responses = schema["paths"][path][method]["responses"]
        assert statuses <= {int(s) for s in responses}, (method, path)
        assert str(201 if method == "post" else 200) in responses, (method, path)

    assert "signing_secret" in schema["components"]["schemas"]["EndpointCreated"]["properties"]
    assert "signing_secret" not in schema["components"]["schemas"]["Endpoint"]["properties"]


def test_context_and_principal_have_one_import_path():
    """``Context`` and ``Principal`` are defined in ``control.db.context`` and imported from there alone (they
    were re-exported through ``control.service`` and imported both ways, 59 and 13 times)."""
    imported = re.compile(r"^from (control\.[\w.]+) import ([^\n(]+|\([^)]*\))", re.MULTILINE)
    elsewhere = []
    for path in [*ROOT.glob("control/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/**/*.py")]:
        for module, names in imported.findall(path.read_text()):
            named = {name.strip(" ()\n") for name in names.split(",")}
            if module != "control.db.context" and named & {"Context", "Principal"}:
                elsewhere.append(f"{path.relative_to(ROOT)}: from {module}")
    assert elsewhere == []


def test_sql_is_only_in_control_db():
    """A statement is written in ``control/db`` alone, so a schema change has one place to look: no module
    elsewhere in control/ hands a connection a statement of its own (an alert cap's lock in the service and
    the health check's ``SELECT 1`` in the app did)."""
    statement = re.compile(r"\.(?:execute|executemany|fetch|fetchrow|fetchval|prepare)\(\s*[rbf]?[\"']")
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in ROOT.glob("control/**/*.py")
        if "db" not in path.relative_to(ROOT / "control").parts[:1]
        for text in [path.read_text()]
        for match in statement.finditer(text)
    ]
    assert found == []


def test_every_connection_is_opened_by_control_db_connection():
    """The follow's horizon lets a transaction of hookyard's database pass when its connection lacks
    ``control.db.connection.MARK`` (ADR 0087): a product connection opened without it would let followers
    skip the events it stores. So asyncpg's openers are called in ``control/db/connection.py`` alone, which
    marks every connection (the migrator, the LISTEN connection and ``control.db`` opened their own)."""
    opener = re.compile(r"asyncpg\s*\.\s*(?:connect|create_pool|Pool|connection\.connect|pool\.create_pool)\s*\(")
    imported = re.compile(r"^\s*from asyncpg(?:\.\w+)* import [^\n]*\b(?:connect|create_pool|Pool)\b", re.MULTILINE)
    allowed = ROOT / "control" / "db" / "connection.py"
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in [*ROOT.glob("control/**/*.py"), *ROOT.glob("shared/**/*.py"), *ROOT.glob("edge/**/*.py")]
        if path != allowed
        for text in [path.read_text()]
        for pattern in (opener, imported)
        for match in pattern.finditer(text)
    ]
    assert found == []
