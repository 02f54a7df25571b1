"""The inbox: what a person sees first on an endpoint's inbox page, in a real browser
against real edge, control and worker processes.

The empty page offers a copy button on the ingest URL and ready-to-paste samples: the ``curl`` (built by the
page's own ``curl.js``) is taken from the clipboard and run with bash against the live edge, and the event
appears with the counter at 1; the ``hookyard trigger`` line runs as copied with the temporary token as
``HOOKYARD_API_KEY``, as the page's hint says. A binary body's raw tab is its hex dump, exactly
``hexdump -C``'s; table headings never break inside a word, even in a phone-wide window. Screenshots land in
test-artifacts/onboarding/."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.destination import serving
from tests.node_packages import node_executable
from tests.onboarding.conftest import ARTIFACTS, person
from tests.stack import Stack, hookyard_command

pytestmark = pytest.mark.slow

HEXDUMP_JS = Path(__file__).resolve().parents[2] / "control" / "static" / "hexdump.js"
BINARY = bytes([0xFF, 0x00, 0xFE]) + bytes((i * 37 + 11) % 256 for i in range(61)) + b"PK\x03\x04 tail"


def hexdump_c(data: bytes) -> str:
    """``hexdump -C`` as util-linux prints it, for data without two equal consecutive lines (which it would
    fold into ``*``); checked against the real tool where it is installed."""
    lines = []
    for offset in range(0, len(data), 16):
        row = data[offset : offset + 16]
        cells = [f"{b:02x} " for b in row] + ["   "] * (16 - len(row))
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{offset:08x}  {''.join(cells[:8])} {''.join(cells[8:])} |{text}|")
    return "\n".join([*lines, f"{len(data):08x}"])


def test_the_reference_is_hexdump_c() -> None:
    tool = shutil.which("hexdump")
    if tool is None:
        pytest.skip("hexdump is not installed (bsdextrautils); the page is still checked against the reference")
    done = subprocess.run([tool, "-C"], input=BINARY, capture_output=True, check=True)
    assert done.stdout.decode().rstrip("\n") == hexdump_c(BINARY)


def test_hexdump_js_in_node_prints_what_hexdump_c_prints() -> None:
    node = node_executable()
    script = (
        "const fs = require('fs'); const vm = require('vm');"
        f"vm.runInThisContext(fs.readFileSync({json.dumps(str(HEXDUMP_JS))}, 'utf8'));"
        "const data = Uint8Array.from(JSON.parse(fs.readFileSync(0, 'utf8')));"
        "process.stdout.write(JSON.stringify([vm.runInThisContext('hookyardHex').hexDump(data),"
        " vm.runInThisContext('hookyardHex').hexDump(data, 32)]));"
    )
    done = subprocess.run([node, "-e", script], input=json.dumps(list(BINARY)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    whole, cut = json.loads(done.stdout)
    assert whole == hexdump_c(BINARY)
    assert cut == hexdump_c(BINARY[:32]) + f"\n({len(BINARY) - 32} more bytes: download the raw body for all of it)"


async def _clipboard(page: Any) -> str:
    return await page.evaluate("navigator.clipboard.readText()")


async def _bash(command: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_empty_page_samples_counter_hex_dump_and_headings(browser: Any, stack: Stack) -> None:
    from playwright.async_api import expect

    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    started = httpx.post(f"{stack.control_url}/api/start", timeout=10).json()
    ep, ingest = started["endpoint_id"], started["ingest_url"]
    who = await person(browser, stack, clipboard=True)
    page = who.page
    await page.goto(started["inbox_url"])
    await expect(page.locator("#status")).to_have_text("live", timeout=10_000)
    count = page.locator("#count")
    await expect(count).to_have_text("0 events")
    assert await page.locator("#empty").is_visible()
    await page.screenshot(path=str(ARTIFACTS / "empty.png"), full_page=True)

    # The copy button beside the ingest URL puts exactly the URL on the clipboard.
    await page.locator("#copy-ingest").click()
    await expect(page.locator("#copy-ingest")).to_have_text("copied")
    assert await _clipboard(page) == ingest

    # The sample curl, as copied, sends a request through the live edge; the page lists it, counted.
    await page.locator("#copy-sample-curl").click()
    copied = await _clipboard(page)
    assert copied == await page.locator("#sample-curl").text_content()
    assert ingest in copied
    code, out, err = await _bash(copied)
    assert code == 0, err
    assert json.loads(out)["id"].startswith("evt_")  # the edge answers {"ok": true, "id": ...}
    await expect(page.locator("li.event")).to_have_count(1, timeout=10_000)
    await expect(count).to_have_text("1 event")
    assert not await page.locator("#empty").is_visible()
    assert await page.title() == "(1) hookyard inbox"
    await page.screenshot(path=str(ARTIFACTS / "first-event.png"), full_page=True)

    # The trigger line, as copied, with the temporary token as HOOKYARD_API_KEY, as the hint beside it says
    # (the CLI asks /mcp with a hy_tmp_ token, which /v1 refuses).
    trigger = await page.locator("#sample-trigger").text_content()
    assert trigger == f"hookyard trigger payments payment_intent.succeeded --endpoint {ep}"
    hint = await page.locator("#sample-token").text_content() or ""
    assert "api_token" in hint, hint
    assert "HOOKYARD_API_KEY" in hint, hint
    env = {**stack.env, "HOOKYARD_API_KEY": started["api_token"]}
    exe = str(Path(hookyard_command()[0]).parent)
    env["PATH"] = f"{exe}:{env.get('PATH', '')}"
    code, out, err = await _bash(trigger or "", env)
    assert code == 0, err
    assert out.startswith(f"sent payments payment_intent.succeeded to {ep}")
    await expect(page.locator("li.event")).to_have_count(2, timeout=10_000)
    await expect(count).to_have_text("2 events")

    # A body that is not UTF-8: its raw tab is the hex dump.
    sent = httpx.post(ingest, content=BINARY, headers={"content-type": "application/octet-stream"}, timeout=10)
    assert sent.status_code == 200, sent.text
    await expect(count).to_have_text("3 events", timeout=10_000)
    await page.locator("li.event").first.click()
    view = page.locator("#body-view")
    await expect(page.get_by_role("tab", name="raw")).to_have_attribute("aria-selected", "true", timeout=10_000)
    assert await view.text_content() == hexdump_c(BINARY)
    await page.screenshot(path=str(ARTIFACTS / "hex-dump.png"), full_page=True)

    # Headings of every table, the deliveries' seven included, stay whole in a phone-wide window.
    with serving() as sink:
        await page.get_by_label("replay URL").fill(sink.url)
        await page.get_by_role("button", name="Replay").click()
        await page.locator("#replay-outcome.ok").wait_for(timeout=10_000)
        await page.locator(".deliveries th", has_text="destination").wait_for(timeout=10_000)
    await page.set_viewport_size({"width": 420, "height": 900})
    headings = await page.locator("th").evaluate_all(
        """cells => cells.map((th) => {
            const range = document.createRange();
            range.selectNodeContents(th);
            return [th.textContent, range.getClientRects().length, getComputedStyle(th).whiteSpace];
        })"""
    )
    names = [name for name, _, _ in headings]
    assert {"name", "value", "destination", "latency", "outcome"} <= set(names), names
    assert [(name, lines) for name, lines, _ in headings if lines != 1] == []
    assert {space for _, _, space in headings} == {"nowrap"}
    await page.locator(".deliveries").scroll_into_view_if_needed()
    await page.screenshot(path=str(ARTIFACTS / "narrow-headings.png"), full_page=True)
    assert who.foreign == []
    assert who.errors == []
    await who.context.close()
