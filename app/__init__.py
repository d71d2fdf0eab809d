"""Application factory: configure, middleware, extensions, storage, blueprints, the rules
every response follows, errors, CLI. The one module that imports the feature packages: the
core modules below them get what they need of them from here (README, "Layout")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, request
from limits.errors import ConfigurationError as LimitsConfigurationError
from sqlalchemy import event
from sqlalchemy.engine import make_url
from werkzeug.middleware.proxy_fix import ProxyFix

from app.access_log import RequestLogMiddleware, configure_logging, secret_paths
from app.config import DEFAULTS, ConfigError, database_url, settings_from_env, validate
from app.database import NEVER_BY_COUNT


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__, instance_relative_config=True)
    _configure(app, test_config)
    _wrap_middleware(app)
    _init_extensions(app)
    _init_storage(app)
    _register_blueprints(app)
    _add_response_rules(app)
    _register_error_handlers(app)
    _register_cli(app)
    return app


def _configure(app: Flask, test_config: Mapping[str, Any] | None) -> None:
    os.makedirs(app.instance_path, exist_ok=True)
    app.config.from_mapping(DEFAULTS)
    app.config.from_mapping(settings_from_env(os.environ, app.instance_path))
    if test_config is None:
        app.config.from_pyfile("config.py", silent=True)
    else:
        app.config.from_mapping(test_config)
    uri = app.config["SQLALCHEMY_DATABASE_URI"]
    app.config["SQLALCHEMY_DATABASE_URI"] = database_url(uri) if isinstance(uri, str) else uri
    validate(app.config)
    if make_url(app.config["SQLALCHEMY_DATABASE_URI"]).get_backend_name() == "postgresql":
        # Never switch to server-side prepared statements by count: their generic plan cannot
        # use the path index for `path LIKE 'prefix%'`, so path filters would scan the table.
        # Only a statement that asks is prepared (app/database.py `PREPARED`); psycopg would
        # ignore that ask under `None`, so the threshold is one no connection ever reaches.
        options = dict(app.config["SQLALCHEMY_ENGINE_OPTIONS"])
        connect_args = {"prepare_threshold": NEVER_BY_COUNT, **options.get("connect_args", {})}
        options["connect_args"] = connect_args
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = options
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.compact = True  # type: ignore[attr-defined]
    app.url_map.strict_slashes = False


def _wrap_middleware(app: Flask) -> None:
    from app.links.holder import SECRET_PREFIXES
    from app.tus.override import MethodOverride

    configure_logging()
    # Innermost: tus's X-HTTP-Method-Override must change the method before Flask routes.
    wsgi_app: Any = MethodOverride(app.wsgi_app)
    wsgi_app = RequestLogMiddleware(
        wsgi_app, secret_paths(SECRET_PREFIXES), app.config["ACCESS_LOG_ADDRESSES"]
    )
    if app.config["PROXY_COUNT"]:
        # Client address, scheme and host as the trusted proxies in front saw them; outermost,
        # so the access log records the real client too.
        n = app.config["PROXY_COUNT"]
        wsgi_app = ProxyFix(wsgi_app, x_for=n, x_proto=n, x_host=n, x_port=n)
    app.wsgi_app = wsgi_app  # type: ignore[method-assign]


def _init_extensions(app: Flask) -> None:
    from app import (
        audit,
        cache,
        covers,
        fairness,
        models,  # noqa: F401  (registers the tables on the metadata)
        oai,
        pages,
        releases,
        search,
        stats,
    )
    from app.auth.guard import caller_of
    from app.database import (
        ping_idle_connections,
        prepare_marked_statements,
        refuse_missing_sqlite_file,
        sqlite_pragmas,
    )
    from app.doi import worker as doi_worker
    from app.extensions import db, limiter, migrate
    from app.files import answers
    from app.pages import i18n
    from app.shared import ProcessesStorage  # registers `processes://` with limits

    # The server's check of the token that may send a large body (app/server.py).
    app.extensions["caller_of"] = caller_of
    db.init_app(app)
    search.init_app()
    oai.init_app()
    audit.init_app()
    stats.init_app(app)
    pages.init_app()
    releases.init_app(app)
    doi_worker.init_app(app)
    covers.init_app(app)
    i18n.init_app(app)
    with app.app_context():
        if not app.config["SQLALCHEMY_ENGINE_OPTIONS"].get("pool_pre_ping"):
            ping_idle_connections(db.engine, app.config["DB_PING_AFTER_IDLE_SECONDS"])
        if db.engine.dialect.name == "sqlite":
            event.listen(db.engine, "connect", sqlite_pragmas)
            path = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).database or ""
            refuse_missing_sqlite_file(db.engine, relative=not os.path.isabs(path))
        prepare_marked_statements(db.engine)
        cache.init_app(app, db)
        answers.init_app(app, db.engine)
    migrations = os.path.join(os.path.dirname(app.root_path), "migrations")
    migrate.init_app(app, db, directory=migrations, render_as_batch=True)
    try:
        limiter.init_app(app)
    except LimitsConfigurationError as exc:
        raise ConfigError(f"RATELIMIT_STORAGE_URI cannot be used: {exc}") from None
    if app.config["RATELIMIT_ENABLED"] and isinstance(limiter.storage, ProcessesStorage):
        # Several processes of `flask serve` count in one file (app/processes.py).
        app.extensions.setdefault("share_between_processes", []).append(limiter.storage.share)
    fairness.init_app(app)


def _init_storage(app: Flask) -> None:
    from app.storage import create_storage

    try:
        app.extensions["storage"] = create_storage(app.config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _register_blueprints(app: Flask) -> None:
    from app.archives.routes import bp as archives_bp
    from app.audit.routes import bp as audit_bp
    from app.auth.routes import bp as auth_bp
    from app.covers.routes import bp as covers_bp
    from app.docs.routes import bp as docs_bp
    from app.feeds.routes import bp as feeds_bp
    from app.files.routes import bp as files_bp
    from app.health import bp as health_bp
    from app.links.routes import bp as links_bp
    from app.links.routes import shared_bp
    from app.oai.routes import bp as oai_bp
    from app.pages.routes import bp as pages_bp
    from app.public.routes import bp as public_bp
    from app.releases.routes import bp as releases_bp
    from app.series.routes import bp as series_bp
    from app.stats.routes import bp as stats_bp
    from app.tus.routes import bp as tus_bp

    app.register_blueprint(auth_bp)
    app.register_blueprint(files_bp)
    app.register_blueprint(covers_bp)
    app.register_blueprint(public_bp)
    app.register_blueprint(archives_bp)
    app.register_blueprint(tus_bp)
    app.register_blueprint(docs_bp)
    app.register_blueprint(health_bp)
    app.register_blueprint(oai_bp)
    app.register_blueprint(feeds_bp)
    app.register_blueprint(audit_bp)
    app.register_blueprint(links_bp)
    app.register_blueprint(shared_bp)
    app.register_blueprint(stats_bp)
    app.register_blueprint(releases_bp)
    app.register_blueprint(series_bp)
    app.register_blueprint(pages_bp)


def _add_response_rules(app: Flask) -> None:
    """The headers every response gets, whichever blueprint (or error handler) made it."""

    from app.http import PUBLIC_CACHE

    @app.after_request
    def public_cache_headers(response: Response) -> Response:
        # Also for errors and unmatched ids under the public prefix.
        if request.path.startswith("/api/public/"):
            response.headers["Cache-Control"] = PUBLIC_CACHE
        if response.status_code == 204:
            # No content, so no type of it (Flask would label the empty body text/html).
            response.headers.pop("Content-Type", None)
        return response


def _register_error_handlers(app: Flask) -> None:
    from app.errors import register_error_handlers
    from app.links.holder import SECRET_PREFIXES
    from app.pages.errors import page_of_error

    register_error_handlers(app, page_of_error, secret_paths(SECRET_PREFIXES))


def _register_cli(app: Flask) -> None:
    from app.audit.cli import audit_group
    from app.auth.cli import (
        create_user_command,
        provision_admin_command,
        tokens_group,
        users_group,
    )
    from app.cli import present_to_operators, serve_command
    from app.covers.cli import covers_group
    from app.doi.cli import doi_group
    from app.ops import register_cli
    from app.pages.cli import pages_cli
    from app.releases.cli import (
        grant_approver_command,
        mail_group,
        releases_group,
        revoke_approver_command,
    )
    from app.search.cli import search_cli
    from app.stats.cli import stats_group

    app.cli.add_command(create_user_command)
    app.cli.add_command(provision_admin_command)
    app.cli.add_command(users_group)
    app.cli.add_command(tokens_group)
    app.cli.add_command(serve_command)
    app.cli.add_command(search_cli)
    app.cli.add_command(audit_group)
    app.cli.add_command(stats_group)
    app.cli.add_command(pages_cli)
    app.cli.add_command(releases_group)
    app.cli.add_command(mail_group)
    app.cli.add_command(doi_group)
    app.cli.add_command(covers_group)
    users_group.add_command(grant_approver_command)
    users_group.add_command(revoke_approver_command)
    register_cli(app)
    present_to_operators()
