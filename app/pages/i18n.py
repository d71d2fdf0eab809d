"""The pages' language: German by default, English when the reader asks for it.

The templates are written in German, the institute's language, and `app/translations/` holds
the English catalogue (`pybabel extract -F babel.cfg -o messages.pot .` then `pybabel update
-i messages.pot -d app/translations`). The catalogues are compiled from their `.po` files when
the first app of a process starts, into a folder of that process, so the repository keeps no
compiled file. A reader chooses by `Accept-Language` or by the visible switch, which adds
`?lang=de|en` to the address: no cookie, so a shared cache keys a page by its address and the
`Accept-Language` it varies on.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from flask import Flask, request
from flask_babel import Babel, get_locale, get_translations
from markupsafe import Markup

LANGUAGES = ("de", "en")
DEFAULT = "de"
CATALOGUES = Path(__file__).resolve().parent.parent / "translations"


def chosen_language() -> str:
    """`?lang=` when it names a language the pages have, else the best of Accept-Language."""
    asked = request.args.get("lang", "")
    if asked in LANGUAGES:
        return asked
    return request.accept_languages.best_match(LANGUAGES, default=DEFAULT)


def page_language() -> str:
    return str(get_locale() or DEFAULT)


@cache
def compiled_catalogues() -> str:
    """A folder of `.mo` files made from the `.po` files, once per process."""
    folder = Path(tempfile.mkdtemp(prefix="pages-i18n-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for source in sorted(CATALOGUES.glob("*/LC_MESSAGES/*.po")):
        target = folder / source.relative_to(CATALOGUES).with_suffix(".mo")
        target.parent.mkdir(parents=True, exist_ok=True)
        with source.open("rb") as po, target.open("wb") as mo:
            write_mo(mo, read_po(po, locale=source.parts[-3]))
    return str(folder)


def catalogue_digest() -> str:
    """Changes when a translation does: part of every page's ETag."""
    digest = hashlib.sha256()
    for source in sorted(CATALOGUES.glob("*/LC_MESSAGES/*.po")):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def bound_translations() -> dict[str, Any]:
    """The templates' `gettext`, `ngettext` and `page_language`, bound to the request's
    catalogue once per page: Flask-Babel's own look the catalogue and the locale up again
    for every string, which took about half of a record page's rendering. They behave as
    Jinja's "newstyle" gettext does in an autoescaped template (the translation is markup,
    the `%(name)s` values are escaped into it)."""
    translations = get_translations()
    language = page_language()

    def gettext(string: str, **variables: Any) -> Markup:
        return Markup(translations.ugettext(string)) % variables

    def ngettext(singular: str, plural: str, num: int, **variables: Any) -> Markup:
        variables.setdefault("num", num)
        return Markup(translations.ungettext(singular, plural, num)) % variables

    return {"gettext": gettext, "ngettext": ngettext, "page_language": lambda: language}


def init_app(app: Flask) -> None:
    if not app.config.get("BABEL_TRANSLATION_DIRECTORIES"):
        app.config["BABEL_TRANSLATION_DIRECTORIES"] = compiled_catalogues()
    Babel(app, locale_selector=chosen_language)
    app.jinja_env.globals["page_language"] = page_language
    app.jinja_env.globals["LANGUAGES"] = LANGUAGES
    app.context_processor(bound_translations)
