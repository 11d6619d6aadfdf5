"""Settings: given options beat BASHT_BSO_* variables, which beat defaults; URLs get async drivers."""

from __future__ import annotations

import pytest

from basht.bso.config import ServerSettings
from basht.bso.db.engine import async_url, redact
from basht.bso.errors import BSOError


def test_options_then_environment_then_defaults():
    env = {"BASHT_BSO_PORT": "9000", "BASHT_BSO_TOKEN": "t", "BASHT_BSO_ECHO_SQL": "yes"}
    settings = ServerSettings.from_env(env, port=None, host="0.0.0.0")
    assert (settings.host, settings.port, settings.token, settings.echo_sql) == (
        "0.0.0.0",
        9000,
        "t",
        True,
    )
    assert settings.db == "sqlite:///basht-bso.db" and settings.workers == 1
    assert ServerSettings.from_env(env, port=8001).port == 8001


def test_settings_survive_the_trip_to_worker_processes():
    settings = ServerSettings(
        db="sqlite:///x.db", port=8123, token="abc", workers=3, echo_sql=True, trial_timeout=2.5
    )
    assert ServerSettings.from_env(settings.to_env()) == settings


def test_the_crash_limit_defaults_to_two_and_zero_means_never():
    assert ServerSettings.from_env({}).crash_limit == 2
    assert ServerSettings.from_env({"BASHT_BSO_CRASH_LIMIT": "0"}).crash_limit == 0
    assert ServerSettings.from_env(ServerSettings(crash_limit=5).to_env()).crash_limit == 5


def test_the_trial_timeout_defaults_to_a_day_and_zero_means_never():
    assert ServerSettings.from_env({}).trial_timeout == 86400
    assert ServerSettings.from_env({"BASHT_BSO_TRIAL_TIMEOUT": "0"}).trial_timeout == 0
    assert ServerSettings.from_env({"BASHT_BSO_TRIAL_TIMEOUT": "90"}, trial_timeout=1.5) == (
        ServerSettings(trial_timeout=1.5)
    )


def test_bodies_are_limited_to_a_mebibyte_and_reads_are_open_by_default():
    settings = ServerSettings.from_env({})
    assert settings.max_body_bytes == 1024 * 1024 and settings.protect_reads is False
    env = {"BASHT_BSO_TOKEN": "t", "BASHT_BSO_PROTECT_READS": "yes"}
    assert ServerSettings.from_env(env).protect_reads is True
    assert ServerSettings.from_env(env, protect_reads=None).protect_reads is True
    limited = ServerSettings(token="t", protect_reads=True, max_body_bytes=4096)
    assert ServerSettings.from_env(limited.to_env()) == limited


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"BASHT_BSO_WORKERS": "many"}, "BASHT_BSO_WORKERS='many': expected an integer"),
        ({"BASHT_BSO_ECHO_SQL": "maybe"}, "expected true or false"),
        ({"BASHT_BSO_TRIAL_TIMEOUT": "1h"}, "BASHT_BSO_TRIAL_TIMEOUT='1h': expected a number"),
        ({"BASHT_BSO_TRIAL_TIMEOUT": "-5"}, "trial timeout -5: expected seconds"),
        ({"BASHT_BSO_TRIAL_TIMEOUT": "nan"}, "trial timeout nan"),
        ({"BASHT_BSO_CRASH_LIMIT": "-1"}, "crash limit -1: expected 0 or more"),
        ({"BASHT_BSO_TOKEN": "  "}, "token: empty"),
        ({"BASHT_BSO_TOKEN": "pässword"}, "printable ASCII"),
        ({"BASHT_BSO_TOKEN": " secret"}, "without surrounding spaces"),
        ({"BASHT_BSO_TOKEN": "sec\nret"}, "printable ASCII"),
        ({"BASHT_BSO_MAX_BODY_BYTES": "1M"}, "BASHT_BSO_MAX_BODY_BYTES='1M': expected an integer"),
        ({"BASHT_BSO_MAX_BODY_BYTES": "100"}, "max body bytes 100: expected at least 1024"),
        ({"BASHT_BSO_PROTECT_READS": "true"}, "protect reads: needs a token"),
    ],
)
def test_bad_environment_values_are_named(env, fragment):
    with pytest.raises(BSOError, match=fragment):
        ServerSettings.from_env(env)


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("sqlite:///bso.db", "sqlite+aiosqlite"),
        ("sqlite+pysqlite:///bso.db", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
        ("postgresql+psycopg2://u@h/db", "postgresql+asyncpg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
    ],
)
def test_urls_get_an_async_driver(url, driver):
    assert async_url(url).drivername == driver


def test_passwords_are_redacted():
    assert "secret" not in redact("postgresql://me:secret@db/bso")


def test_a_token_no_header_can_carry_is_refused_by_the_client_too():
    """httpx failed with a bare UnicodeEncodeError (a traceback) on a non-ASCII token."""
    from basht.bso.http import BSOClient

    with pytest.raises(BSOError, match="printable ASCII"):
        BSOClient("http://127.0.0.1:8000", token="pässword")
    BSOClient("http://127.0.0.1:8000", token="a-b_c.d~e+f/g=").close()
