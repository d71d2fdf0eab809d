"""The pages' language: German by default, English when the reader asks for it.

The templates are written in German, the institute's language, and `app/translations/` holds
the English catalogue (`pybabel extract -F babel.cfg -o messages.pot .` then `pybabel update
-i messages.pot -d app/translations`). The catalogues are compiled from their `.po` files when
the first app of a process starts, into a folder of that process, so the repository keeps no
compiled file. A reader chooses by `Accept-Language` or by the visible switch, which adds
`?lang=de|en` to the address: no cookie, so a shared cache keys a page by its address and the
`Accept-Language` it varies on. A choice by the address carries over to every link to a page
(`in_language`, and a hidden `lang` field in the search forms).

A page's templates come from `page_templates()`: one Jinja environment per language, whose
templates hold their constant strings already translated (`TranslatedConstants`), so a page
pays no gettext call for them; strings with values and plurals are translated while rendering
(`bound_translations`). Either way a page is the same (tests/pages/test_language.py).
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from flask import Flask, current_app, render_template, request
from flask_babel import Babel, get_locale, get_translations
from jinja2 import Environment
from jinja2.ext import Extension
from jinja2.lexer import TOKEN_DOT, Token, TokenStream
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


def language_url(language: str) -> str:
    """This page's address in `language` (the other parameters kept, e.g. a search)."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "lang"]
    return "?" + urlencode([*args, ("lang", language)])


def address_language() -> str | None:
    """The language the address chose (`?lang=`), if it names one the pages have."""
    asked = request.args.get("lang")
    return asked if asked in LANGUAGES else None


def in_language(url: str) -> str:
    """`url`, a link to a page, in the language the reader chose by the address: the choice
    carries over to the next page (without it, the next page falls back to Accept-Language)."""
    language = address_language()
    if language is None:
        return url
    return f"{url}{'&' if '?' in url else '?'}lang={language}"


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


#: How the templates translate a string: `_('Herunterladen')` or `gettext('Herunterladen')`.
_GETTEXT_NAMES = frozenset({"_", "gettext"})
#: The tokens of such a call with a constant string and nothing else.
_CONSTANT_CALL = ("name", "lparen", "string", "rparen")
#: Templates kept per language, as many as Jinja keeps by default.
_TEMPLATES_KEPT = 400


class TranslatedConstants(Extension):
    """Translates `_('constant')` when a template is compiled, into the language of the
    environment it is bound to (`translations`): the translation becomes part of the
    template's text, as if the template had been written in that language, and costs nothing
    when a page is rendered. A call with values (`_('Version %(number)s', number=...)`) and
    `ngettext` stay calls, answered by `bound_translations`. The text is what that gettext
    gives (markup, with `%%` read as `%`), marked safe as it marks it."""

    translations: Any = None

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        tokens = list(stream)
        index = 0
        while index < len(tokens):
            call = tokens[index : index + len(_CONSTANT_CALL)]
            if (
                tuple(token.type for token in call) == _CONSTANT_CALL
                and call[0].value in _GETTEXT_NAMES
                and (index == 0 or tokens[index - 1].type != TOKEN_DOT)
            ):
                text = str(Markup(self.translations.ugettext(call[2].value)) % {})
                line = call[0].lineno
                # `('text'|safe)`: a constant Jinja folds into the template's text.
                yield Token(line, "lparen", "(")
                yield Token(line, "string", text)
                yield Token(line, "pipe", "|")
                yield Token(line, "name", "safe")
                yield Token(line, "rparen", ")")
                index += len(_CONSTANT_CALL)
                continue
            yield tokens[index]
            index += 1


def page_templates() -> Environment:
    """The app's templates, compiled with their constant strings in the page's language
    (`TranslatedConstants`): one environment per language, made by the first page in it."""
    language = page_language()
    environments = current_app.extensions.setdefault("page_templates", {})
    environment = environments.get(language)
    if environment is None:
        extension = type(
            "TranslatedConstants", (TranslatedConstants,), {"translations": get_translations()}
        )
        environment = current_app.jinja_env.overlay(
            extensions=[extension], cache_size=_TEMPLATES_KEPT
        )
        environments[language] = environment
    return environment


def render_page(name: str, **context: Any) -> str:
    """`render_template` of a page's template, translated into the page's language."""
    return render_template(page_templates().get_template(name), **context)


def init_app(app: Flask) -> None:
    if not app.config.get("BABEL_TRANSLATION_DIRECTORIES"):
        app.config["BABEL_TRANSLATION_DIRECTORIES"] = compiled_catalogues()
    Babel(app, locale_selector=chosen_language)
    app.jinja_env.globals["page_language"] = page_language
    app.jinja_env.globals["LANGUAGES"] = LANGUAGES
    app.jinja_env.globals["in_language"] = in_language
    app.jinja_env.globals["address_language"] = address_language
    app.context_processor(bound_translations)
