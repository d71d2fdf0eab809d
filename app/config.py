"""Settings, read once from the environment and checked before the app starts."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from limits import parse_many
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

MiB = 1024 * 1024
MAX_FILE_SIZE = 200 * MiB
MAX_FILES_PER_REQUEST = 25
# 25 files at the limit plus room for the form fields and part headers.
MAX_REQUEST_SIZE = MAX_FILES_PER_REQUEST * MAX_FILE_SIZE + MiB

# The repositoryIdentifier of the OAI identifier guidelines (oai-identifier.xsd): a domain name.
OAI_NAMESPACE = re.compile(r"[a-zA-Z][a-zA-Z0-9-]*(\.[a-zA-Z][a-zA-Z0-9-]*)+")


class ConfigError(Exception):
    """A setting is missing or wrong; the message names it in one line."""


def _int(environ: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None


def _float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None


def _list(value: str | None) -> list[str] | None:
    """A comma-separated setting; unset is None (Flask then trusts any Host)."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


#: Defaults of the S3 transfer and client settings; `app.storage.create_storage` falls back to
#: them for a mapping without the setting and checks the values.
S3_DEFAULTS: dict[str, Any] = {
    # Multipart part size (S3's minimum is 5 MiB); each part in flight holds one in memory.
    "S3_PART_SIZE": 5 * MiB,
    "S3_PARTS_IN_FLIGHT": 2,
    "S3_CONNECT_TIMEOUT": 5.0,
    "S3_READ_TIMEOUT": 60.0,
    # Counts the first try: 3 means two retries of a transient failure.
    "S3_MAX_ATTEMPTS": 3,
    "S3_MAX_POOL_CONNECTIONS": 20,
}


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def database_url(url: str) -> str:
    """`DATABASE_URL` as SQLAlchemy reads it: `postgres://` (Heroku's and libpq's spelling,
    which SQLAlchemy refuses) is PostgreSQL through psycopg, as `postgresql://` is."""
    scheme, sep, rest = url.partition("://")
    if sep and (scheme == "postgres" or scheme.startswith("postgres+")):
        driver = scheme.partition("+")[2] or "psycopg"
        return f"postgresql+{driver}://{rest}"
    return url


def settings_from_env(environ: Mapping[str, str], instance_path: str) -> dict[str, Any]:
    """Map environment variables to Flask config keys, with the embedded defaults."""
    instance = Path(instance_path)

    def get(name: str, default: str | None = None) -> str | None:
        value = environ.get(name, "").strip()
        return value or default

    return {
        "SQLALCHEMY_DATABASE_URI": get("DATABASE_URL", f"sqlite:///{instance / 'files.sqlite3'}"),
        "STORAGE_BACKEND": get("STORAGE_BACKEND", "local"),
        "STORAGE_LOCAL_ROOT": get("STORAGE_LOCAL_ROOT", str(instance / "storage")),
        "S3_BUCKET": get("S3_BUCKET"),
        "S3_ENDPOINT_URL": get("S3_ENDPOINT_URL"),
        "S3_REGION": get("S3_REGION", "us-east-1"),
        "S3_ADDRESSING_STYLE": get("S3_ADDRESSING_STYLE"),
        **{
            name: (_float if isinstance(default, float) else _int)(environ, name, default)
            for name, default in S3_DEFAULTS.items()
        },
        "ADMIN_EMAIL": get("ADMIN_EMAIL"),
        "ADMIN_PASSWORD": get("ADMIN_PASSWORD"),
        "ADMIN_NAME": get("ADMIN_NAME", "Administrator"),
        "APP_TIMEZONE": get("APP_TIMEZONE", "UTC"),
        "REPOSITORY_NAME": get("REPOSITORY_NAME", "File repository"),
        "OAI_ADMIN_EMAIL": get("OAI_ADMIN_EMAIL"),
        "OAI_NAMESPACE": get("OAI_NAMESPACE", "file-repository.local"),
        "TOKEN_TTL_MINUTES": _int(environ, "TOKEN_TTL_MINUTES", None),
        "TOKEN_CACHE_SECONDS": _int(environ, "TOKEN_CACHE_SECONDS", 60),
        "RECORD_CACHE_SECONDS": _int(environ, "RECORD_CACHE_SECONDS", 60),
        # In the process, or shared by the processes of one `flask serve` (app/shared.py).
        "RATELIMIT_STORAGE_URI": get("RATELIMIT_STORAGE_URI", "processes://"),
        "RATELIMIT_TOKENS": get("RATELIMIT_TOKENS", "10 per minute"),
        "RATELIMIT_UPLOADS": get("RATELIMIT_UPLOADS", "60 per minute"),
        "RATELIMIT_WRITES": get("RATELIMIT_WRITES", "120 per minute"),
        "RATELIMIT_SHARE_LINK_FAILURES": get("RATELIMIT_SHARE_LINK_FAILURES", "20 per minute"),
        "RATELIMIT_LINKS": get("RATELIMIT_LINKS", "30 per minute;300 per day"),
        "SHARE_LINK_MAX_DAYS": _int(environ, "SHARE_LINK_MAX_DAYS", 90),
        "RATELIMIT_KEY_PREFIX": get("RATELIMIT_KEY_PREFIX", "file-repository"),
        "PROXY_COUNT": _int(environ, "PROXY_COUNT", 0),
        "HOST": get("HOST", "127.0.0.1"),
        "PORT": _int(environ, "PORT", 8000),
        "SERVER_THREADS": _int(environ, "SERVER_THREADS", 8),
        "SERVER_PROCESSES": _int(environ, "SERVER_PROCESSES", cores()),
        "CLIENT_STALL_SECONDS": _int(environ, "CLIENT_STALL_SECONDS", 60),
        "HEADER_TIMEOUT_SECONDS": _int(environ, "HEADER_TIMEOUT_SECONDS", 30),
        "CONNECTION_LIMIT": _int(environ, "CONNECTION_LIMIT", 10000),
        "SPOOL_LIMIT_MB": _int(environ, "SPOOL_LIMIT_MB", 20480),
        # 0: a quarter of SERVER_THREADS (app/fairness.py).
        "HEAVY_REQUESTS": _int(environ, "HEAVY_REQUESTS", 0),
        "PUBLIC_BASE_URL": get("PUBLIC_BASE_URL"),
        "TRUSTED_HOSTS": _list(get("TRUSTED_HOSTS")),
        "ZIP_MAX_FILES": _int(environ, "ZIP_MAX_FILES", 1000),
        "ZIP_MAX_MB": _int(environ, "ZIP_MAX_MB", 10240),
        "UPLOAD_EXPIRY_HOURS": _int(environ, "UPLOAD_EXPIRY_HOURS", 24),
        "AUDIT_RETENTION_DAYS": _int(environ, "AUDIT_RETENTION_DAYS", 395),
        "UPLOAD_MAX_UNFINISHED": _int(environ, "UPLOAD_MAX_UNFINISHED", 20),
        "DOWNLOAD_OFFLOAD": get("DOWNLOAD_OFFLOAD"),
        "DOWNLOAD_OFFLOAD_PREFIX": get("DOWNLOAD_OFFLOAD_PREFIX", "/_stored/"),
        "STATS": (get("STATS", "on") or "").lower(),
        "STATS_PUBLIC": (get("STATS_PUBLIC", "on") or "").lower(),
        "KEEP_RELEASED_VERSIONS": (get("KEEP_RELEASED_VERSIONS", "off") or "").lower(),
        "STATS_FLUSH_SECONDS": _float(environ, "STATS_FLUSH_SECONDS", 5.0),
        "STATS_REDIS_URL": get("STATS_REDIS_URL"),
        "ACCESS_LOG_ADDRESSES": (get("ACCESS_LOG_ADDRESSES", "truncated") or "").lower(),
        "RELEASE_APPROVAL": (get("RELEASE_APPROVAL", "off") or "").lower(),
        "SMTP_HOST": get("SMTP_HOST"),
        "SMTP_PORT": _int(environ, "SMTP_PORT", 25),
        "SMTP_USERNAME": get("SMTP_USERNAME"),
        "SMTP_PASSWORD": get("SMTP_PASSWORD"),
        "SMTP_SECURITY": (get("SMTP_SECURITY", "none") or "").lower(),
        "MAIL_FROM": get("MAIL_FROM", "file-repository@localhost"),
        "DATACITE_URL": get("DATACITE_URL"),
        "DATACITE_REPOSITORY": get("DATACITE_REPOSITORY"),
        "DATACITE_PASSWORD": get("DATACITE_PASSWORD"),
        "DATACITE_PREFIX": get("DATACITE_PREFIX"),
        "DATACITE_REGISTER_AT": (get("DATACITE_REGISTER_AT", "release") or "").lower(),
        "COVERS": (get("COVERS", "on") or "").lower(),
        "COVER_TIMEOUT_SECONDS": _int(environ, "COVER_TIMEOUT_SECONDS", 30),
        "COVER_MEMORY_MB": _int(environ, "COVER_MEMORY_MB", 512),
        "COVER_MAX_KB": _int(environ, "COVER_MAX_KB", 10240),
    }


#: Fixed values, not settings: the contract's limits (200 MiB a file, 25 files a request, 100
#: records a page) and internals that only the tests change. Every value an operator sets comes
#: from `settings_from_env` and is in the README's settings table (tests/test_config.py checks).
DEFAULTS: dict[str, Any] = {
    # Statement parameters never reach error messages or logs.
    "SQLALCHEMY_ENGINE_OPTIONS": {"hide_parameters": True},
    # A pooled connection idle for longer than this is checked before use (not one in
    # steady use: see database.ping_idle_connections).
    "DB_PING_AFTER_IDLE_SECONDS": 1.0,
    "MAX_CONTENT_LENGTH": MAX_REQUEST_SIZE,
    "MAX_FILE_SIZE": MAX_FILE_SIZE,
    "MAX_FILES_PER_REQUEST": MAX_FILES_PER_REQUEST,
    "PAGE_SIZE": 100,
    "MAX_JSON_BODY": MiB,
    # Werkzeug's scrypt defaults; tests pass cheaper parameters.
    "PASSWORD_HASH_METHOD": "scrypt",
    "RATELIMIT_HEADERS_ENABLED": True,
    "RATELIMIT_ENABLED": True,
    # Seconds between writes of a token's last_used_at; keeps reads write-free.
    "TOKEN_LAST_USED_RESOLUTION": 300,
    # The statistics' clock (seconds since the epoch); tests pass one they move by hand.
    "STATS_CLOCK": None,
    # Off in tests, which flush by hand: no thread then writes behind a test's back.
    "STATS_BACKGROUND_FLUSH": True,
    # /readyz writes to the storage at most once per this many seconds per process (the answer
    # in between is the last one), and waits for that write at most this long (app/health.py).
    "READYZ_CACHE_SECONDS": 5.0,
    "READYZ_PROBE_TIMEOUT_SECONDS": 2.0,
    # The pages' language (app/pages/i18n.py): German unless the reader asks for English;
    # None: the catalogues compiled at start-up from app/translations.
    "BABEL_DEFAULT_LOCALE": "de",
    "BABEL_TRANSLATION_DIRECTORIES": None,
    # The mail outbox (app/releases/mail.py): sent by a thread after each commit that wrote
    # mail (off in tests, which send by hand), with this many tries, the n-th retry after
    # MAIL_RETRY_SECONDS * 2**(n-1) seconds, and this timeout per SMTP connection.
    "MAIL_BACKGROUND": True,
    "MAIL_MAX_ATTEMPTS": 8,
    "MAIL_RETRY_SECONDS": 30.0,
    "SMTP_TIMEOUT_SECONDS": 10.0,
    # The DOI outbox (app/doi/worker.py): worked by a thread after each commit that made a DOI
    # due (off in tests, which work it by hand), the n-th retry after DOI_RETRY_SECONDS *
    # 2**(n-1) seconds (at most DOI_RETRY_MAX_SECONDS), this timeout per DataCite call.
    "DOI_BACKGROUND": True,
    "DOI_RETRY_SECONDS": 30.0,
    "DOI_RETRY_MAX_SECONDS": 3600.0,
    "DATACITE_TIMEOUT_SECONDS": 10.0,
    # The covers' outbox (app/covers/making.py): worked by a thread after each commit that made
    # a cover due (off in tests, which work it by hand); a storage failure is retried after
    # COVER_RETRY_SECONDS * 2**(n-1) seconds, this many tries in all.
    "COVER_BACKGROUND": True,
    "COVER_RETRY_SECONDS": 60.0,
    "COVER_MAX_ATTEMPTS": 5,
}

#: The DataCite settings: DOIs are on with all of them, off with none.
DATACITE_SETTINGS = ("DATACITE_URL", "DATACITE_REPOSITORY", "DATACITE_PASSWORD", "DATACITE_PREFIX")


def validate(config: Mapping[str, Any]) -> None:
    """Fail start-up with a one-line message naming the setting that is wrong."""
    try:
        url = make_url(config["SQLALCHEMY_DATABASE_URI"])
    except ArgumentError:
        raise ConfigError("DATABASE_URL is not a valid SQLAlchemy database URL") from None
    if url.get_backend_name() == "sqlite" and (url.host or url.username or url.port):
        raise ConfigError(
            f"DATABASE_URL {url.render_as_string(hide_password=True)} names a host, which "
            "SQLite has not: sqlite:///name.sqlite3 is a file in the instance folder, "
            "sqlite:////path/name.sqlite3 one at an absolute path"
        )
    try:
        url.get_dialect().import_dbapi()
    except NoSuchModuleError:
        raise ConfigError(
            f"DATABASE_URL names an unknown kind of database {url.drivername!r}: "
            "use postgresql://... or sqlite:///..."
        ) from None
    except ImportError as exc:
        raise ConfigError(
            f"DATABASE_URL needs the driver {exc.name or url.drivername!r}, which is not "
            "installed: use postgresql://... (psycopg) or sqlite:///..."
        ) from None

    # Storage settings are checked where the storage is built (`app.storage.create_storage`).
    try:
        ZoneInfo(str(config.get("APP_TIMEZONE")))
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"APP_TIMEZONE is not a known time zone: {config.get('APP_TIMEZONE')!r}"
        ) from None

    ttl = config.get("TOKEN_TTL_MINUTES")
    if ttl is not None and ttl <= 0:
        raise ConfigError("TOKEN_TTL_MINUTES must be a positive number of minutes")
    for name in (
        "RATELIMIT_TOKENS",
        "RATELIMIT_UPLOADS",
        "RATELIMIT_WRITES",
        "RATELIMIT_SHARE_LINK_FAILURES",
        "RATELIMIT_LINKS",
    ):
        try:
            parse_many(str(config.get(name)))
        except ValueError:
            raise ConfigError(
                f"{name} is not a rate limit such as '10 per minute': {config.get(name)!r}"
            ) from None
    for name in ("TOKEN_CACHE_SECONDS", "RECORD_CACHE_SECONDS"):
        cache_seconds = config.get(name)
        if not isinstance(cache_seconds, int) or cache_seconds < 0:
            raise ConfigError(
                f"{name} must be 0 (off) or a number of seconds, got {cache_seconds!r}"
            )
    for name in (
        "AUDIT_RETENTION_DAYS",
        "CLIENT_STALL_SECONDS",
        "HEADER_TIMEOUT_SECONDS",
        "CONNECTION_LIMIT",
        "SERVER_PROCESSES",
        "SPOOL_LIMIT_MB",
    ):
        value = config.get(name)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
    heavy = config.get("HEAVY_REQUESTS")
    if not isinstance(heavy, int) or heavy < 0:
        raise ConfigError(f"HEAVY_REQUESTS must be 0 (automatic) or more, got {heavy!r}")
    base_url = config.get("PUBLIC_BASE_URL")
    if base_url is not None and not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", base_url):
        raise ConfigError(f"PUBLIC_BASE_URL must be an http(s) URL, got {base_url!r}")
    for name in (
        "ZIP_MAX_FILES",
        "ZIP_MAX_MB",
        "UPLOAD_EXPIRY_HOURS",
        "UPLOAD_MAX_UNFINISHED",
        "SHARE_LINK_MAX_DAYS",
        "COVER_TIMEOUT_SECONDS",
        "COVER_MEMORY_MB",
        "COVER_MAX_KB",
    ):
        value = config.get(name)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
    namespace = config.get("OAI_NAMESPACE")
    if not isinstance(namespace, str) or not OAI_NAMESPACE.fullmatch(namespace):
        raise ConfigError(
            f"OAI_NAMESPACE must be a domain name such as 'repo.example.org', got {namespace!r}"
        )
    offload = config.get("DOWNLOAD_OFFLOAD")
    if offload not in (None, "nginx"):
        raise ConfigError(f"DOWNLOAD_OFFLOAD must be 'nginx' or unset, got {offload!r}")
    prefix = config.get("DOWNLOAD_OFFLOAD_PREFIX", "/_stored/")
    if not re.fullmatch(r"/((?!\.+/)[A-Za-z0-9._~-]+/)+", str(prefix)):
        raise ConfigError(
            f"DOWNLOAD_OFFLOAD_PREFIX must be a path such as '/_stored/', got {prefix!r}"
        )
    for name, default in (
        ("STATS", "on"),
        ("STATS_PUBLIC", "on"),
        ("KEEP_RELEASED_VERSIONS", "off"),
        ("RELEASE_APPROVAL", "off"),
        ("COVERS", "on"),
    ):
        if config.get(name, default) not in ("on", "off"):
            raise ConfigError(f"{name} must be 'on' or 'off', got {config.get(name)!r}")
    addresses = config.get("ACCESS_LOG_ADDRESSES", "truncated")
    if addresses not in ("full", "truncated", "none"):
        raise ConfigError(
            f"ACCESS_LOG_ADDRESSES must be 'full', 'truncated' or 'none', got {addresses!r}"
        )
    redis_url = config.get("STATS_REDIS_URL")
    if redis_url is not None and not re.match(r"(rediss?|unix)://", str(redis_url)):
        raise ConfigError(f"STATS_REDIS_URL must be a redis:// URL, got {redis_url!r}")
    interval = config.get("STATS_FLUSH_SECONDS")
    if not isinstance(interval, int | float) or not interval > 0:
        raise ConfigError(f"STATS_FLUSH_SECONDS must be a positive number, got {interval!r}")
    security = config.get("SMTP_SECURITY", "none")
    if security not in ("none", "starttls", "ssl"):
        raise ConfigError(f"SMTP_SECURITY must be 'none', 'starttls' or 'ssl', got {security!r}")
    smtp_port = config.get("SMTP_PORT", 25)
    if not isinstance(smtp_port, int) or not 0 < smtp_port < 65536:
        raise ConfigError(f"SMTP_PORT must be between 1 and 65535, got {smtp_port!r}")
    _validate_datacite(config)
    proxies = config.get("PROXY_COUNT")
    if not isinstance(proxies, int) or proxies < 0:
        raise ConfigError(f"PROXY_COUNT must be 0 or a positive number, got {proxies!r}")
    port = config.get("PORT")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"PORT must be between 1 and 65535, got {port!r}")


def _validate_datacite(config: Mapping[str, Any]) -> None:
    given = [name for name in DATACITE_SETTINGS if config.get(name)]
    if given and len(given) < len(DATACITE_SETTINGS):
        missing = [name for name in DATACITE_SETTINGS if name not in given]
        raise ConfigError(
            f"DOIs need all of {', '.join(DATACITE_SETTINGS)} or none: {', '.join(missing)} missing"
        )
    url = config.get("DATACITE_URL")
    if url and not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", str(url)):
        raise ConfigError(f"DATACITE_URL must be an http(s) URL, got {url!r}")
    prefix = config.get("DATACITE_PREFIX")
    if prefix and not re.fullmatch(r"10\.\d{4,9}", str(prefix)):
        raise ConfigError(f"DATACITE_PREFIX must be a DOI prefix such as '10.5072', got {prefix!r}")
    if given and not config.get("PUBLIC_BASE_URL"):
        raise ConfigError(
            "DOIs (DATACITE_*) need PUBLIC_BASE_URL: the address a DOI resolves to is fixed"
        )
    register_at = config.get("DATACITE_REGISTER_AT", "release")
    if register_at not in ("release", "sperrfrist"):
        raise ConfigError(
            f"DATACITE_REGISTER_AT must be 'release' or 'sperrfrist', got {register_at!r}"
        )
