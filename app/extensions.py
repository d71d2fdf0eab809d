"""Extension objects, created unbound and attached to an app in the factory."""

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

from app.database import Base, Session

# Objects keep what they hold after a commit: a view answers with the record it just wrote,
# without reading it again (which would fail if a concurrent delete came in between).
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False, "class_": Session})
migrate = Migrate()
limiter = Limiter(key_func=get_remote_address, default_limits=[])
