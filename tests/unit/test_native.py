"""shared._native against the Python definitions it fronts: the compiled Verifier and Attributor must answer
exactly as shared.signatures.Verifier and shared.attribution._attribute do, answer the usual request
themselves (or they would be dead weight), and hand every other request to the Python path.

signatures/ and test_attribution.py run all their cases through both paths; here the two are compared
on generated requests built around validly signed ones, where the compiled path's shortcuts could go wrong.
Pure unit tests: no servers.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import attribution, signatures
from shared.attribution import Attribution
from shared.signatures import HEADERS, SCHEMES, Verdict, check, schemes, sign
from shared.signatures import mac as signature_mac

_native = pytest.importorskip("shared._native", reason="tests/unit/signatures/test_mac.py fails without it")

NOW = 1_700_000_000
BODY = b'{"type":"invoice.paid","id":"evt_1","data":{"object":{"amount":2000}}}'
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAMILIES = [(scheme, family) for scheme, families in HEADERS.items() for family in families]


class Spy:
    """A fallback that records being asked, then asks the Python definition."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.target(*args)


def outcome(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call gives, or which exception it raises: the compiled path must not differ in either."""
    try:
        return "returns", call(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return "raises", type(exc)


def compiled_verifier(secret: str = SECRET, tolerance_s: int = 300) -> tuple[Any, Spy, signatures.Verifier]:
    """The edge's compiled check, built as signatures.verifier builds it, with a spy as its fallback."""
    python = signatures.Verifier(secret, tolerance_s=tolerance_s)
    spy = Spy(python)
    return check.compiled(secret, tolerance_s, spy), spy, python


def compiled_attributor() -> tuple[Any, Spy]:
    """attribution.attribute's compiled object, built the same way, with a spy as its fallback."""
    assert isinstance(attribution.attribute, _native.Attributor)
    spy = Spy(attribution._attribute)
    return attribution._compiled(spy), spy


def signed(scheme: str, family: str, body: bytes = BODY, ts: int = NOW, msg_id: str = "msg_1") -> dict[bytes, bytes]:
    headers = sign(scheme, body, SECRET, msg_id=msg_id, timestamp=ts, header_family=family)  # type: ignore[arg-type]
    return {name.encode(): value.encode() for name, value in headers.items()}


# -- the compiled path answers the usual request itself -----------------------------------------------------


@pytest.mark.parametrize(("scheme", "family"), FAMILIES)
def test_a_validly_signed_request_is_proven_without_python(scheme: str, family: str) -> None:
    check, spy, python = compiled_verifier()
    headers = signed(scheme, family)
    assert check(headers, BODY, float(NOW)) == python(headers, BODY, NOW) == Verdict(True, None, scheme)
    assert check(headers, BODY, NOW + 300) == Verdict(True, None, scheme)  # exactly at the tolerance
    blank_first = {b"relay-signature": b" \t", b"x-shop-hmac-sha256": b"", **headers}  # blank counts as absent
    assert check(blank_first, BODY, NOW) == Verdict(True, None, scheme)
    assert spy.calls == 0


@pytest.mark.parametrize(("scheme", "family"), FAMILIES)
def test_every_failure_is_answered_by_python(scheme: str, family: str) -> None:
    check, spy, python = compiled_verifier()
    headers = signed(scheme, family)
    tampered = BODY + b" "
    assert check(headers, tampered, NOW) == python(headers, tampered, NOW)
    assert not check(headers, tampered, NOW).valid
    assert spy.calls == 2
    if scheme in ("identity", "payments"):
        assert check(headers, BODY, NOW + 301) == Verdict(False, "timestamp_out_of_tolerance", scheme)
        assert spy.calls == 3


def test_unusual_forms_and_arguments_go_to_python() -> None:
    check, spy, python = compiled_verifier()
    usual = signed("payments", "vendor")
    cases: list[tuple[Any, Any, Any]] = [
        (usual, BODY, None),  # no clock given: Python reads it
        (usual, bytearray(BODY), NOW),
        (usual, BODY, True),
        (usual, BODY, 2**60),
        ({k.decode(): v.decode() for k, v in usual.items()}, BODY, NOW),  # text headers
        ({b"stripe-signature": usual[b"stripe-signature"].decode()}, BODY, NOW),
        (dict(usual), BODY, float("nan")),
        ({b"stripe-signature": b"t=0" + usual[b"stripe-signature"][2:]}, BODY, NOW),
    ]
    for headers, body, now in cases:
        if now is None:
            assert check(headers, body).reason == "timestamp_out_of_tolerance"
        else:
            assert outcome(check, headers, body, now) == outcome(python, headers, body, now)
    assert spy.calls == len(cases)


def test_usual_attribution_without_python() -> None:
    attribute, spy = compiled_attributor()
    requests = [
        ({b"relay-id": b"msg_1", b"relay-signature": b"v1,x"}, BODY, Attribution("identity", "invoice.paid", "msg_1")),
        ({b"svix-signature": b"v1,x"}, BODY, Attribution("identity", "invoice.paid", None)),
        ({b"x-shopify-topic": b"orders/paid"}, b"", Attribution("commerce", "orders/paid", None)),
        ({b"x-shop-topic": b"t", b"x-shopify-webhook-id": b"w"}, b"", Attribution("commerce", "t", "w")),
        ({b"stripe-signature": b"t=1,v1=a"}, BODY, Attribution("payments", "invoice.paid", "evt_1")),
        ({b"x-github-event": b"push", b"x-github-delivery": b"d\xff"}, b"", Attribution("code_host", "push", "d\xff")),
        ({b"content-type": b"application/json"}, BODY, Attribution(None, None, None)),
        ({b"relay-id": b"", b"pay-signature": b"x"}, b"{}", Attribution("payments", None, None)),
    ]
    for headers, body, expected in requests:
        assert attribute(headers, body) == attribution._attribute(headers, body) == expected
    assert spy.calls == 0


def test_unusual_attribution_goes_to_python() -> None:
    attribute, spy = compiled_attributor()
    requests: list[tuple[Any, Any]] = [
        ({b"stripe-signature": b"x"}, b'{"type": 17, "id": "evt_1"}'),  # the closer look
        ({b"stripe-signature": b"x"}, b"not json"),
        ({b"relay-id": b"m"}, b'{"type": ""}'),
        ({b"stripe-signature": b"x"}, bytearray(b"{}")),
        ({b"x-shop-topic": "orders/paid"}, b"{}"),
    ]
    for headers, body in requests:
        assert outcome(attribute, headers, body) == outcome(attribution._attribute, headers, body)
    assert spy.calls == len(requests)
    text_names = {"stripe-signature": "x"}  # not the edge's form: no known header is present
    assert attribute(text_names, b"{}") == attribution._attribute(text_names, b"{}") == Attribution(None, None, None)


# -- generated requests around validly signed ones --------------------------------------------------------

_WHITESPACE = st.sampled_from([b"", b" ", b"\t", b"  ", b"\r\n", b"\x0b", b"\x0c", b"\x1c"])


@st.composite
def near_valid(draw: st.DrawFn) -> tuple[dict[bytes, bytes], bytes, float | int, int]:
    """A signed request, then a few of the edits the compiled path's shortcuts must get right."""
    scheme, family = draw(st.sampled_from(FAMILIES))
    body = draw(st.sampled_from([BODY, b"", b"\xff\x00 binary", b'{"type":1}']))
    ts = draw(st.sampled_from([NOW, 7, 0, 10**14, 10**15 + 3, 10**20]))
    msg_id = draw(st.sampled_from(["msg_1", "", " m ", "é"]))
    headers = signed(scheme, family, body, ts, msg_id or "x")
    if not msg_id:
        headers = {k: (b"" if k.endswith(b"-id") else v) for k, v in headers.items()}
    for _ in range(draw(st.integers(0, 3))):
        if not headers:
            break
        name = draw(st.sampled_from(sorted(headers)))
        value = headers[name]
        edit = draw(st.integers(0, 7))
        if edit == 0:  # padding, which the Python path strips where it strips
            value = draw(_WHITESPACE) + value + draw(_WHITESPACE)
        elif edit == 1 and value:  # one byte changed
            i = draw(st.integers(0, len(value) - 1))
            value = value[:i] + bytes([draw(st.integers(0, 255))]) + value[i + 1 :]
        elif edit == 2:  # leading zeros on a timestamp
            value = value.replace(b"t=", b"t=0").replace(str(ts).encode(), b"00" + str(ts).encode())
        elif edit == 3:  # more entries
            value = value + draw(st.sampled_from([b",v0=abc", b",v1=" + b"0" * 64, b" v1,AAAA", b" v2,x", b","]))
        elif edit == 4:  # uppercase encodings: the whole value, or only its last 64 bytes (a hex MAC)
            value = value.upper() if draw(st.booleans()) or len(value) < 64 else value[:-64] + value[-64:].upper()
        elif edit == 5:
            value = b""
        elif edit == 6:  # another scheme's header present too
            other_scheme, other_family = draw(st.sampled_from(FAMILIES))
            headers.update(signed(other_scheme, other_family, body, ts))
            continue
        else:
            del headers[name]
            continue
        headers[name] = value
    now = draw(st.sampled_from([ts, ts + 300, ts - 300, ts + 301, float(ts) + 300.5, float(ts) - 0.25]))
    tolerance = draw(st.sampled_from([300, 1, 2**53 - 1]))
    return headers, body, now, tolerance


@settings(max_examples=1500)
@given(request=near_valid())
def test_compiled_verifier_answers_as_python(request: tuple[dict[bytes, bytes], bytes, float | int, int]) -> None:
    headers, body, now, tolerance = request
    check, _, python = compiled_verifier(tolerance_s=tolerance)
    assert check(headers, body, now) == python(headers, body, now)


@settings(max_examples=1000)
@given(
    names=st.lists(
        st.sampled_from(
            [*attribution._IDENTITY_IDS, *attribution._IDENTITY_SIGNATURES, *attribution._COMMERCE_IDS]
            + [name for pair in (*attribution._COMMERCE, *attribution._CODE_HOST) for name in pair]
            + [*attribution._PAYMENTS, *attribution._CODE_HOST_IDS, b"content-type"]
        ),
        max_size=5,
    ),
    values=st.lists(st.sampled_from([b"", b"v", b"orders/paid", b"\xff\xfe", "é".encode(), b" "]), min_size=5),
    body=st.sampled_from(
        [
            *(BODY, b"", b"{}", b"[]", b"not json", b'{"type":17}', b'{"type":"","id":"x"}', b'{"id":null}'),
            *(b"\xff", b'{"type":"a\\u00e9","id":"b"}', b"[" * 2000, b'{"type":"t","id":"i"} trailing'),
        ]
    ),
)
def test_compiled_attribution_answers_as_python(names: list[bytes], values: list[bytes], body: bytes) -> None:
    headers = dict(zip(names, values, strict=False))
    attribute, _ = compiled_attributor()
    assert attribute(headers, body) == attribution._attribute(headers, body)


# -- the C objects keep their references straight -------------------------------------------------------


def test_no_reference_or_memory_leaks() -> None:
    """Refcounts of everything passed in or handed back, and traced memory, are where they started after many
    calls down every path (proven, failed, fallen back; attributed in C and by the fallback)."""
    check, _, _ = compiled_verifier()
    attribute, _ = compiled_attributor()
    valid = {scheme: signed(scheme, family) for scheme, family in FAMILIES}
    failing = {b"stripe-signature": b"t=1,v1=" + b"0" * 64}
    unusual = {b"stripe-signature": b"x"}
    body, now = BODY, float(NOW)
    watched = [body, now, failing, unusual, *valid.values(), *schemes.VALID.values(), attribution._NONE]

    def round_() -> None:
        for headers in (*valid.values(), failing, unusual):
            check(headers, body, now)
            attribute(headers, body)
        attribute(unusual, b'{"type": 1}')

    round_()
    gc.collect()
    before = [sys.getrefcount(obj) for obj in watched]
    tracemalloc.start()
    try:
        round_()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(2000):
            round_()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(obj) for obj in watched] == before
    assert end - start < 64 * 1024  # 2,000 rounds of 20 calls: one leaked object per call would be ~4 MB


def test_constructors_check_their_tables() -> None:
    mac = signature_mac.plain_mac("k")
    with pytest.raises(ValueError, match="unknown signature scheme"):
        _native.Verifier(((b"x-sig", "nope", None, None, True),), mac, mac, 300, print)
    with pytest.raises(TypeError):
        _native.Verifier(((b"relay-signature", "identity", None, None, True),), mac, mac, 300, print)
    with pytest.raises(TypeError):
        _native.Verifier(((b"x-sig", "payments"),), mac, mac, 300, print)
    with pytest.raises(TypeError):
        _native.Verifier((), "not a mac", mac, 300, print)
    with pytest.raises(TypeError):
        _native.Attributor(
            fallback=print, make=Attribution, probe=print, none=None, identity_ids=("relay-id",),
            identity_signatures=(), commerce=(), commerce_ids=(), payments=(), code_host=(), code_host_ids=(),
        )  # fmt: skip


def test_every_scheme_has_a_compiled_rule() -> None:
    """The table the compiled path gets covers every scheme and every signature header name, in order."""
    table = check.NATIVE_TABLE
    assert [entry[0] for entry in table] == list(schemes.SIGNATURE_HEADERS)
    assert {entry[1] for entry in table} == set(SCHEMES)
