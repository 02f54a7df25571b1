"""A body that is not JSON says why when the request says why: a form, multipart or text Content-Type, or a
Content-Encoding the control plane does not undo; a body over the limit says the limit. A fresh-clone trial
found all of these answered `body: malformed JSON (invalid character (byte 0))` alone, and 413 without the
size."""

from __future__ import annotations

import gzip

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
        (
            {"content-type": "application/json", "content-encoding": "gzip"},
            gzip.compress(b'{"name": "x"}'),
            "; Content-Encoding gzip is not supported: send the JSON uncompressed",
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
