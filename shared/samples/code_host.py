"""The code host: the event name is the ``X-CodeHost-Event`` header and ``X-CodeHost-Delivery`` (a UUID) the
idempotency key; ``X-CodeHost-Hook-ID`` and the installation target headers name the hook. The signature
is ``X-CodeHost-Signature-256: sha256=<hex>`` (``shared.signatures.sign``).

Bodies carry ``repository`` and ``sender`` beside the event's own object, with an ``action`` where the
event has several (``pull_request`` opened, ``issues`` opened...); ``ping`` is what a new hook receives.
"""

from __future__ import annotations

from typing import Any

from shared.samples._gen import Draft, Gen

__all__ = ("EVENT_TYPES", "draft")

EVENT_TYPES = ("ping", "push", "pull_request", "issues", "issue_comment", "release", "workflow_run", "star")

_HOST = "https://codehost.example"
_API = "https://api.codehost.example"


def _user(g: Gen, login: str, kind: str = "User") -> dict[str, Any]:
    number = g.number(8)
    return {
        "login": login,
        "id": number,
        "node_id": f"U_{g.token(12)}",
        "avatar_url": f"https://avatars.codehost.example/u/{number}?v=4",
        "html_url": f"{_HOST}/{login}",
        "type": kind,
        "site_admin": False,
    }


def _repository(g: Gen) -> dict[str, Any]:
    number = g.number(9)
    return {
        "id": number,
        "node_id": f"R_{g.token(12)}",
        "name": "widgets",
        "full_name": "acme/widgets",
        "private": False,
        "owner": _user(g, "acme", "Organization"),
        "html_url": f"{_HOST}/acme/widgets",
        "description": "Widgets, built to spec",
        "fork": False,
        "url": f"{_API}/repos/acme/widgets",
        "clone_url": f"{_HOST}/acme/widgets.git",
        "created_at": g.iso(g.days_ago(300, 900)),
        "updated_at": g.iso(-3_600),
        "pushed_at": g.iso(-60),
        "default_branch": "main",
        "visibility": "public",
        "language": "Python",
        "stargazers_count": g.rng.randrange(10, 5_000),
        "forks_count": g.rng.randrange(0, 300),
        "open_issues_count": g.rng.randrange(0, 80),
        "topics": ["webhooks", "automation"],
    }


def _commit(g: Gen, author: dict[str, Any]) -> dict[str, Any]:
    sha = g.hex(40)
    person = {"name": f"{g.first_name} {g.last_name}", "email": g.email, "username": author["login"]}
    return {
        "id": sha,
        "tree_id": g.hex(40),
        "distinct": True,
        "message": g.choice(("Fix retry backoff jitter", "Add webhook replay docs", "Bump dependencies")),
        "timestamp": g.iso(-30),
        "url": f"{_HOST}/acme/widgets/commit/{sha}",
        "author": person,
        "committer": person,
        "added": [],
        "removed": [],
        "modified": ["src/widgets/retry.py"],
    }


def _issue(g: Gen, author: dict[str, Any]) -> dict[str, Any]:
    number = g.rng.randrange(1, 900)
    return {
        "url": f"{_API}/repos/acme/widgets/issues/{number}",
        "html_url": f"{_HOST}/acme/widgets/issues/{number}",
        "id": g.number(10),
        "node_id": f"I_{g.token(14)}",
        "number": number,
        "title": "Deliveries retry too fast after a 503",
        "user": author,
        "labels": [{"id": g.number(10), "name": "bug", "color": "d73a4a", "default": True}],
        "state": "open",
        "locked": False,
        "assignees": [],
        "comments": 0,
        "created_at": g.iso(-120),
        "updated_at": g.iso(),
        "closed_at": None,
        "author_association": "MEMBER",
        "body": "After a 503 with Retry-After: 120 the next attempt came 5 s later.",
    }


def _event(event_type: str, g: Gen, repository: dict[str, Any], sender: dict[str, Any]) -> dict[str, Any]:
    if event_type == "ping":
        hook_id = g.number(9)
        config = {"content_type": "json", "insecure_ssl": "0", "url": "https://hooks.acme.example/code"}
        hook = {"type": "Repository", "id": hook_id, "name": "web", "active": True, "events": ["*"], "config": config}
        return {"zen": "Design for failure.", "hook_id": hook_id, "hook": hook}
    if event_type == "push":
        commit = _commit(g, sender)
        before = g.hex(40)
        return {
            "ref": "refs/heads/main",
            "before": before,
            "after": commit["id"],
            "created": False,
            "deleted": False,
            "forced": False,
            "base_ref": None,
            "compare": f"{_HOST}/acme/widgets/compare/{before[:12]}...{commit['id'][:12]}",
            "commits": [commit],
            "head_commit": commit,
            "pusher": {"name": sender["login"], "email": g.email},
        }
    if event_type == "pull_request":
        number = g.rng.randrange(1, 900)
        branch = {"label": "acme:fix/retry-after", "ref": "fix/retry-after", "sha": g.hex(40), "repo": repository}
        pull = {
            "url": f"{_API}/repos/acme/widgets/pulls/{number}",
            "html_url": f"{_HOST}/acme/widgets/pull/{number}",
            "id": g.number(10),
            "node_id": f"PR_{g.token(14)}",
            "number": number,
            "state": "open",
            "locked": False,
            "title": "Honour Retry-After on 503",
            "user": sender,
            "body": "Waits for Retry-After when it is longer than the next step of the schedule.",
            "created_at": g.iso(),
            "updated_at": g.iso(),
            "closed_at": None,
            "merged_at": None,
            "draft": False,
            "head": branch,
            "base": {**branch, "label": "acme:main", "ref": "main", "sha": g.hex(40)},
            "merged": False,
            "commits": 1,
            "additions": 12,
            "deletions": 3,
            "changed_files": 2,
        }
        return {"action": "opened", "number": number, "pull_request": pull}
    if event_type == "issues":
        return {"action": "opened", "issue": _issue(g, sender)}
    if event_type == "issue_comment":
        number = g.number(10)
        comment = {
            "id": number,
            "node_id": f"IC_{g.token(14)}",
            "html_url": f"{_HOST}/acme/widgets/issues/1#issuecomment-{number}",
            "user": sender,
            "created_at": g.iso(),
            "updated_at": g.iso(),
            "author_association": "MEMBER",
            "body": "Reproduced: the second attempt ignores Retry-After.",
        }
        return {"action": "created", "issue": _issue(g, sender), "comment": comment}
    if event_type == "release":
        tag = f"v1.{g.rng.randrange(0, 20)}.{g.rng.randrange(0, 10)}"
        release = {
            "id": g.number(9),
            "node_id": f"RE_{g.token(14)}",
            "tag_name": tag,
            "target_commitish": "main",
            "name": tag,
            "draft": False,
            "prerelease": False,
            "created_at": g.iso(-300),
            "published_at": g.iso(),
            "author": sender,
            "html_url": f"{_HOST}/acme/widgets/releases/tag/{tag}",
            "tarball_url": f"{_API}/repos/acme/widgets/tarball/{tag}",
            "body": "Retries honour Retry-After.",
            "assets": [],
        }
        return {"action": "published", "release": release}
    if event_type == "workflow_run":
        workflow_id = g.number(8)
        run_id = g.number(10)
        run = {
            "id": run_id,
            "name": "CI",
            "node_id": f"WFR_{g.token(14)}",
            "head_branch": "main",
            "head_sha": g.hex(40),
            "run_number": g.rng.randrange(1, 2_000),
            "event": "push",
            "status": "completed",
            "conclusion": "success",
            "workflow_id": workflow_id,
            "html_url": f"{_HOST}/acme/widgets/actions/runs/{run_id}",
            "created_at": g.iso(-240),
            "updated_at": g.iso(),
            "run_attempt": 1,
            "run_started_at": g.iso(-240),
        }
        workflow = {"id": workflow_id, "name": "CI", "path": ".codehost/workflows/ci.yml", "state": "active"}
        return {"action": "completed", "workflow_run": run, "workflow": workflow}
    return {"action": "created", "starred_at": g.iso()}  # star


def draft(event_type: str, g: Gen, family: str) -> Draft:
    prefix = "x-github-" if family == "vendor" else "x-codehost-"
    repository = _repository(g)
    sender = _user(g, f"{g.first_name}{g.last_name}".lower())
    delivery = g.uuid()
    headers = {
        "content-type": "application/json",
        "user-agent": f"CodeHost-Hookshot/{g.hex(7)}",
        "accept": "*/*",
        f"{prefix}event": event_type,
        f"{prefix}delivery": delivery,
        f"{prefix}hook-id": str(g.number(9)),
        f"{prefix}hook-installation-target-type": "repository",
        f"{prefix}hook-installation-target-id": str(repository["id"]),
    }
    body = {**_event(event_type, g, repository, sender), "repository": repository, "sender": sender}
    return Draft(headers, body, delivery)
