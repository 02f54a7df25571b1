"""Every operation of the OpenAPI document answers a coded body (``Content-Encoding: gzip``) with 415
``unsupported_content_encoding`` (``control.api.content_encoding``, a middleware in front of every route), and
the document says so: its 415 was in no operation's ``responses``, so a client generated from the document
had no case for an answer every route can give."""

from __future__ import annotations

from tests.control.bad_input.walk import _operations, _url
from tests.helpers import assert_error


async def test_every_operation_documents_and_answers_415(client, account, document, made, subtests):
    envelope = document["paths"]["/v1/endpoints"]["post"]["responses"]["400"]["content"]
    checked = 0
    for operation_id, method, path, operation in _operations(document):
        with subtests.test(operation=operation_id):
            documented = operation["responses"].get("415")
            assert documented is not None, sorted(operation["responses"])
            assert "`unsupported_content_encoding`" in documented["description"]
            assert documented["content"] == envelope  # the error envelope, as every error status
            headers = {**account.headers, "content-type": "application/json", "content-encoding": "gzip"}
            resp = await client.request(method, _url(path, made), content=b"{}", headers=headers)
            assert_error(resp, 415, "unsupported_content_encoding", field="Content-Encoding")
            checked += 1
    assert checked > 60, checked
