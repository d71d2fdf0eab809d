"""Extension objects, created unbound and attached to an app in the factory."""

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


# Objects keep what they hold after a commit: a view answers with the record it just wrote,
# without reading it again (which would fail if a concurrent delete came in between).
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()
limiter = Limiter(key_func=get_remote_address, default_limits=[])


def read_without_transaction() -> None:
    """Let a GET or HEAD request read in autocommit mode.

    Its statements then run without the BEGIN and ROLLBACK around them, two of the round
    trips a read would otherwise make; each statement still sees committed data only. A
    write such a request makes (a token's coarse last-use time) commits at once. Call it
    before the request's first statement.
    """
    from flask import request

    if request.method in ("GET", "HEAD"):
        db.session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
