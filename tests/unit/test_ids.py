"""Identifiers, tokens, API keys and signing secrets."""

from __future__ import annotations

import base64
import os
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import ids

CROCKFORD = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
MAX_MS = 2**48 - 1


@pytest.mark.parametrize("prefix", sorted(ids.PREFIXES))
def test_ids_carry_their_prefix_and_a_ulid(prefix):
    value = ids.new_id(prefix)
    head, _, body = value.rpartition("_")
    assert head == prefix
    assert CROCKFORD.match(body), value


def test_design_prefixes_are_all_known():
    assert {"acct", "ep", "evt", "dst", "rule", "lbl", "al", "dlv", "sch"} <= ids.PREFIXES


@pytest.mark.parametrize("prefix", ["", "endpoint", "EP", "ep_"])
def test_unknown_prefix_is_refused(prefix):
    with pytest.raises(ValueError, match="prefix"):
        ids.new_id(prefix)


@given(st.integers(min_value=0, max_value=MAX_MS))
def test_ulid_time_round_trips(ms):
    assert ids.ulid_time_ms(ids.ulid(ms)) == ms
    assert ids.ulid_time_ms(ids.new_id("evt", ms)) == ms
    assert CROCKFORD.match(ids.ulid(ms))


def test_ulid_time_of_now_is_now():
    before = int(time.time() * 1000)
    value = ids.new_id("ep")
    after = int(time.time() * 1000)
    assert before <= ids.ulid_time_ms(value) <= after


def test_ulid_bounds():
    assert ids.ulid(0).startswith("0000000000")
    assert ids.ulid(MAX_MS).startswith("7ZZZZZZZZZ")


@given(st.lists(st.integers(min_value=0, max_value=MAX_MS), min_size=2, max_size=30, unique=True))
def test_ids_sort_by_time(times):
    made = {ids.new_id("evt", ms): ms for ms in times}
    assert [made[i] for i in sorted(made)] == sorted(times)


def test_ids_of_one_millisecond_are_distinct():
    assert len({ids.new_id("evt", 1_700_000_000_000) for _ in range(1000)}) == 1000


def test_every_random_character_is_uniform_over_the_alphabet():
    """The 80 random bits: each of the 16 characters takes all 32 values about equally often (a table
    that skipped or favoured characters would lose bits of uniqueness silently)."""
    suffixes = [ids.ulid(1_700_000_000_000)[10:] for _ in range(32_000)]
    for position in range(16):
        counts: dict[str, int] = {}
        for suffix in suffixes:
            counts[suffix[position]] = counts.get(suffix[position], 0) + 1
        assert sorted(counts) == sorted("0123456789ABCDEFGHJKMNPQRSTVWXYZ"), position
        # Expected 1,000 each; 800..1,200 is more than six standard deviations either side.
        assert all(800 <= n <= 1200 for n in counts.values()), (position, counts)


def test_ingest_tokens_are_long_random_base62():
    tokens = [ids.ingest_token() for _ in range(500)]
    assert all(re.fullmatch(r"[0-9A-Za-z]{22,}", t) for t in tokens)
    assert len(set(tokens)) == len(tokens)
    # Every base62 character shows up: the alphabet is not accidentally narrowed.
    assert len(set("".join(tokens))) == 62


def test_api_keys_and_temporary_tokens():
    key = ids.api_key()
    assert re.fullmatch(r"hy_live_[0-9A-Za-z]{32}", key)
    tmp = ids.temporary_token()
    assert re.fullmatch(r"hy_tmp_[0-9A-Za-z]{32}", tmp)
    assert len({ids.api_key() for _ in range(200)}) == 200


def test_signing_secret_is_whsec_base64_of_32_bytes():
    secrets = {ids.signing_secret() for _ in range(50)}
    assert len(secrets) == 50
    for secret in secrets:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_a_forked_process_draws_different_ids() -> None:
    """granian forks its workers: each must reseed, or two workers would mint the same event ids."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports and exits at once
        os.write(write_end, ",".join(ids.ulid(0) for _ in range(5)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read_end, 4096).decode().split(",")
    parent = [ids.ulid(0) for _ in range(5)]
    os.close(read_end)
    os.close(write_end)
    assert not set(child) & set(parent)
