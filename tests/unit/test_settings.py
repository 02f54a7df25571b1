"""Settings: read from an environment mapping once, converted and validated, failures name the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

from shared.errors import ConfigError
from shared.settings import Settings, env_name, load_settings


def test_defaults():
    s = load_settings({})
    assert s.database_url is None
    assert s.redis_url is None
    assert (s.host, s.edge_port, s.control_port) == ("127.0.0.1", 8080, 8000)
    assert s.redis_prefix == "hy:"
    assert (s.rate_limit_per_s, s.rate_limit_burst) == (50, 100)
    assert s.retention_days == 30
    assert s.max_body_bytes == 1_048_576
    assert s.stream_shards == 1
    assert s.trusted_proxies == ()
    assert s.edge_url == "http://127.0.0.1:8080"
    assert s.control_url == "http://127.0.0.1:8000"


def test_values_are_converted_from_strings():
    s = load_settings(
        {
            "DATABASE_URL": "postgresql://u@db:5432/hy",
            "REDIS_URL": "redis://cache:6379/1",
            "HOOKYARD_EDGE_PORT": "9090",
            "HOOKYARD_CONTROL_PORT": "9000",
            "HOOKYARD_RATE_LIMIT_PER_S": "5",
            "HOOKYARD_EGRESS": "any",
            "HOOKYARD_REDIS_PREFIX": "prod:",
            "HOOKYARD_LOG_LEVEL": "debug",
        }
    )
    assert s.database_url == "postgresql://u@db:5432/hy"
    assert s.redis_url == "redis://cache:6379/1"
    assert (s.edge_port, s.control_port, s.rate_limit_per_s) == (9090, 9000, 5)
    assert isinstance(s.edge_port, int)
    assert (s.egress, s.redis_prefix, s.log_level) == ("any", "prod:", "debug")
    assert s.edge_url == "http://127.0.0.1:9090"


def test_unrelated_environment_variables_are_ignored():
    s = load_settings({"PATH": "/bin", "HOME": "/root", "HOOKYARDX": "1", "EDGE_PORT": "1"})
    assert s.edge_port == 8080


def test_the_client_commands_variables_are_no_typo():
    """A shell that exports HOOKYARD_CONTROL_URL and HOOKYARD_API_KEY for `hookyard listen` runs `up` too."""
    s = load_settings({"HOOKYARD_CONTROL_URL": "http://127.0.0.1:9100", "HOOKYARD_API_KEY": "hy_live_x"})
    assert s.control_url == "http://127.0.0.1:8000"  # the servers' own: the clients read theirs themselves


def test_unknown_hookyard_variable_fails_naming_it_and_listing_the_known_ones():
    with pytest.raises(ConfigError) as info:
        load_settings({"HOOKYARD_EDGE_PROT": "9090"})
    message = str(info.value)
    assert message.startswith("HOOKYARD_EDGE_PROT:")
    assert "HOOKYARD_EDGE_PORT" in message


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"HOOKYARD_EDGE_PORT": "abc"}, "HOOKYARD_EDGE_PORT"),
        ({"HOOKYARD_EDGE_PORT": "0"}, "HOOKYARD_EDGE_PORT"),
        ({"HOOKYARD_CONTROL_PORT": "65536"}, "HOOKYARD_CONTROL_PORT"),
        ({"HOOKYARD_RETENTION_DAYS": "0"}, "HOOKYARD_RETENTION_DAYS"),
        ({"HOOKYARD_MAX_BODY_BYTES": "1.5"}, "HOOKYARD_MAX_BODY_BYTES"),
        ({"HOOKYARD_RATE_LIMIT_BURST": "-1"}, "HOOKYARD_RATE_LIMIT_BURST"),
        ({"HOOKYARD_STREAM_SHARDS": "0"}, "HOOKYARD_STREAM_SHARDS"),
        ({"HOOKYARD_DB_POOL_MAX": "1"}, "HOOKYARD_DB_POOL_MAX"),
        ({"HOOKYARD_EGRESS": "everything"}, "HOOKYARD_EGRESS"),
        ({"HOOKYARD_LOG_LEVEL": "loud"}, "HOOKYARD_LOG_LEVEL"),
        ({"HOOKYARD_REDIS_PREFIX": ""}, "HOOKYARD_REDIS_PREFIX"),
        ({"DATABASE_URL": "mysql://db/hy"}, "DATABASE_URL"),
        ({"REDIS_URL": "http://cache:6379"}, "REDIS_URL"),
        ({"HOOKYARD_PUBLIC_EDGE_URL": "in.example.com"}, "HOOKYARD_PUBLIC_EDGE_URL"),
        ({"HOOKYARD_PUBLIC_CONTROL_URL": "ftp://x"}, "HOOKYARD_PUBLIC_CONTROL_URL"),
        ({"HOOKYARD_TRUSTED_PROXIES": "10.0.0.0/8,not-an-ip"}, "HOOKYARD_TRUSTED_PROXIES"),
    ],
)
def test_bad_values_fail_naming_the_variable(env, variable):
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    message = str(info.value)
    assert message.startswith(f"{variable}: "), message
    assert " - at `$" not in message, "msgspec's path syntax leaked into the message"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("10.0.0.0/8", ("10.0.0.0/8",)),
        ("10.0.0.0/8, 192.168.1.1 ", ("10.0.0.0/8", "192.168.1.1")),
        (" ", ()),
        ("::1,fd00::/8", ("::1", "fd00::/8")),
    ],
)
def test_lists_are_comma_separated(raw, expected):
    assert load_settings({"HOOKYARD_TRUSTED_PROXIES": raw}).trusted_proxies == expected


@pytest.mark.parametrize("raw", ["10.0.0.0/8, 192.168.1.1 ,", " , ", ",10.0.0.1"])
def test_an_empty_list_entry_is_refused(raw):
    """It was dropped unread, as if the list were shorter (tests/cli/test_start_failures.py: at start)."""
    with pytest.raises(ConfigError, match=r"^HOOKYARD_TRUSTED_PROXIES: entry \d of \d is empty"):
        load_settings({"HOOKYARD_TRUSTED_PROXIES": raw})


@pytest.mark.parametrize("url", ["postgres://h/db", "postgresql://u:p@h:5432/db", "postgresql:///db?host=/tmp/socket"])
def test_accepted_database_urls(url):
    assert load_settings({"DATABASE_URL": url}).database_url == url


@pytest.mark.parametrize("url", ["redis://h:6379/0", "rediss://h:6380", "unix:///tmp/redis.sock"])
def test_accepted_redis_urls(url):
    assert load_settings({"REDIS_URL": url}).redis_url == url


def test_empty_server_urls_mean_unset():
    s = load_settings({"DATABASE_URL": "", "REDIS_URL": ""})
    assert (s.database_url, s.redis_url) == (None, None)


def test_overrides_win_over_the_environment_and_none_means_not_given():
    s = load_settings(
        {"HOOKYARD_EDGE_PORT": "9090", "HOOKYARD_CONTROL_PORT": "9000"}, edge_port=7070, control_port=None
    )
    assert (s.edge_port, s.control_port) == (7070, 9000)


def test_bad_override_fails_naming_its_variable():
    with pytest.raises(ConfigError, match=r"^HOOKYARD_EDGE_PORT: "):
        load_settings({}, edge_port=0)


def test_public_urls():
    s = load_settings({"HOOKYARD_PUBLIC_EDGE_URL": "https://in.example.com/", "HOOKYARD_HOST": "0.0.0.0"})
    assert s.edge_url == "https://in.example.com"
    assert s.control_url == "http://127.0.0.1:8000", "0.0.0.0 is a bind address, not one to hand out"
    assert load_settings({"HOOKYARD_HOST": "::1"}).edge_url == "http://[::1]:8080"
    assert load_settings({"HOOKYARD_HOST": "hooks.internal"}).control_url == "http://hooks.internal:8000"


def test_settings_are_frozen():
    s = load_settings({})
    with pytest.raises(AttributeError):
        s.edge_port = 1  # type: ignore[misc]


def test_settings_reject_unknown_fields():
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"edge_prot": 1}, Settings)


def test_env_names():
    assert env_name("database_url") == "DATABASE_URL"
    assert env_name("redis_url") == "REDIS_URL"
    assert env_name("edge_port") == "HOOKYARD_EDGE_PORT"


def test_nothing_is_read_at_import_time():
    """Importing the apps with a broken environment succeeds; only loading the settings fails."""
    env = {**os.environ, "HOOKYARD_EDGE_PROT": "1", "DATABASE_URL": "mysql://nope"}
    code = (
        "import shared.settings, control.app, edge.app\n"
        "from shared.errors import ConfigError\n"
        "try:\n    shared.settings.load_settings()\nexcept ConfigError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("HOOKYARD_EDGE_PROT: unknown setting")


def test_an_empty_optional_variable_means_unset() -> None:
    """Compose files write ``VAR=${X:-}``; an empty optional setting must not stop the process."""
    settings = load_settings({"HOOKYARD_PUBLIC_EDGE_URL": "", "DATABASE_URL": "", "HOOKYARD_EDGE_PORT": "9000"})
    assert settings.public_edge_url is None
    assert settings.database_url is None
    assert settings.edge_url == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("HOOKYARD_EGDE_PORT", "HOOKYARD_EDGE_PORT"),
        ("HOOKYARD_LOG_LEVL", "HOOKYARD_LOG_LEVEL"),
        # The CLI's variables are accepted, so they are suggested too (a list without them said they were invalid).
        ("HOOKYARD_API_KY", "HOOKYARD_API_KEY"),
        ("HOOKYARD_CONTROL_UR", "HOOKYARD_CONTROL_URL"),
    ],
)
def test_a_misspelt_setting_suggests_the_closest_name(typed: str, meant: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({typed: "1"})
    assert str(info.value) == f"{typed}: unknown setting; did you mean {meant}?"


def test_a_name_like_no_setting_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"HOOKYARD_ZZZ": "1"})
    assert "did you mean" not in str(info.value)
    assert "(known: " in str(info.value)
    assert "HOOKYARD_EDGE_PORT" in str(info.value)


def test_the_known_list_names_the_cli_variables() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"HOOKYARD_ZZZ": "1"})
    known = str(info.value).split("(known: ", 1)[1].rstrip(")").split(", ")
    assert {"HOOKYARD_API_KEY", "HOOKYARD_CONTROL_URL", "HOOKYARD_EDGE_PORT"} <= set(known)
    assert known == sorted(known)
    settings = load_settings({"HOOKYARD_API_KEY": "hy_live_x", "HOOKYARD_CONTROL_URL": "http://127.0.0.1:1"})
    assert settings == load_settings({})  # accepted, and no server setting
