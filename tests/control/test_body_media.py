"""A body that is not JSON says why when the request says why: a form, multipart or text Content-Type; a body
in a Content-Encoding is refused whatever its bytes (control undoes none); a body over the limit says the
limit. A fresh-clone trial found all of these answered `body: malformed JSON (invalid character (byte 0))`
alone, and 413 without the size; a later one found plain JSON labelled gzip accepted."""

from __future__ import annotations

import gzip
import zlib

import msgspec

from tests.helpers import assert_error


async def test_a_body_that_is_not_json_says_why(client, account):
    h = account.headers
    for headers, body, why in [
        (
            {"content-type": "application/x-www-form-urlencoded"},
            b"name=x",
            "; a body must be JSON (Content-Type: application/json), this one is application/x-www-form-urlencoded",
        ),
        (
            {"content-type": "multipart/form-data; boundary=b"},
            b'--b\r\ncontent-disposition: form-data; name="name"\r\n\r\nx\r\n--b--\r\n',
            "; a body must be JSON (Content-Type: application/json), this one is multipart/form-data",
        ),
        (
            {"content-type": "text/plain"},
            b"name: x",
            "; a body must be JSON (Content-Type: application/json), this one is text/plain",
        ),
    ]:
        resp = await client.post("/v1/endpoints", content=body, headers={**h, **headers})
        err = assert_error(resp, 400, "validation_error", field="body")
        assert err["message"].startswith("body: malformed JSON ("), err
        assert err["message"].endswith(why), err
    # curl's -d labels every body a form: one that is an attempt at JSON hears only what is wrong with the JSON
    form = {**h, "content-type": "application/x-www-form-urlencoded"}
    for body in (b'{"name": "x",}', b' \n{"name": ', b"-", b"01", b" [1,", b'"x', b"tru", b"fals", b"nul"):
        resp = await client.post("/v1/endpoints", content=body, headers=form)
        err = assert_error(resp, 400, "validation_error", field="body")
        assert "Content-Type" not in err["message"], (body, err)
    trailing = await client.post("/v1/endpoints", content=b'{"name": "x",}', headers=form)
    assert trailing.json()["error"]["message"] == "body: malformed JSON (trailing comma in object (byte 13))"
    plain = await client.post("/v1/endpoints", content=b"{", headers={**h, "content-type": "application/json"})
    assert assert_error(plain, 400, "validation_error")["message"].endswith(")")  # nothing to add


async def test_a_body_over_the_limit_says_the_limit(client, account):
    resp = await client.post("/v1/endpoints", content=b" " * (2 * 1_048_576 + 1), headers=account.headers)
    err = assert_error(resp, 413, "payload_too_large", field="body")
    assert err["message"] == "body: request body is too large (at most 2,097,152 bytes)"


LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


async def test_a_coded_body_is_refused_whatever_its_bytes(client, account):
    """The header is what is refused: plain JSON labelled gzip (the header ignored, it was created), gzip bytes,
    deflate, a list with a coding in it; on /v1, /mcp (before the SDK reads it) and /api/register alike."""
    h = {**account.headers, "content-type": "application/json"}
    plain = b'{"name": "x"}'
    for coding, body, shown in [
        ("gzip", plain, "gzip"),
        ("gzip", gzip.compress(plain), "gzip"),
        ("deflate", zlib.compress(plain), "deflate"),
        ("BR", plain, "BR"),
        ("identity, gzip", gzip.compress(plain), "identity, gzip"),
    ]:
        resp = await client.post("/v1/endpoints", content=body, headers={**h, "content-encoding": coding})
        err = assert_error(resp, 415, "unsupported_content_encoding", field="Content-Encoding")
        assert err["message"] == (
            f'Content-Encoding: must be identity or absent (request bodies are taken uncompressed), got "{shown}"'
        ), err
        assert resp.headers["accept-encoding"] == "identity"
    listed = await client.get("/v1/endpoints", headers={**h, "content-encoding": "gzip"})
    assert_error(listed, 415, "unsupported_content_encoding", field="Content-Encoding")
    mcp = {**h, **MCP_HEADERS, "content-encoding": "gzip"}
    refused = await client.post("/mcp", content=msgspec.json.encode(LISTING), headers=mcp)
    assert_error(refused, 415, "unsupported_content_encoding", field="Content-Encoding")
    register = await client.post(
        "/api/register", content=b'{"email": "ada@example.com"}', headers={**h, "content-encoding": "gzip"}
    )
    assert_error(register, 415, "unsupported_content_encoding", field="Content-Encoding")
    # identity, or an empty header, is no coding at all
    for coding in ("identity", "Identity", ""):
        made = await client.post("/v1/endpoints", content=plain, headers={**h, "content-encoding": coding})
        assert made.status_code == 201, made.text
    listing = await client.post(
        "/mcp", content=msgspec.json.encode(LISTING), headers={**mcp, "content-encoding": "identity"}
    )
    assert listing.status_code == 200, listing.text
