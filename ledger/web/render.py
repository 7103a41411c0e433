"""Pages from the templates (Jinja2, autoescaped: every name, title and reason a ledger holds is
text, never markup), with what every page carries: the person, the datasets, the CSRF token."""

from __future__ import annotations

from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..core.numbers import figure_fields
from . import figures
from .guard import CSRF_FIELD, csrf_token, remember_token
from .people import person_of

ENVIRONMENT = Environment(loader=PackageLoader("ledger.web", "templates"), autoescape=True,
                          undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
ENVIRONMENT.filters.update(figure=figures.figure, headroom=figures.headroom_text, delta=figures.delta_text,
                           change=figures.change_text, parameter=figures.parameter_text)


def link(path: str, **query) -> str:
    """`path?query`, each value URL-encoded (a list value repeats its key); empty values left out."""
    pairs = [(key, item) for key, value in query.items() if value not in (None, "")
             for item in (value if isinstance(value, (list, tuple)) else [value])]
    return path + ("?" + urlencode(pairs) if pairs else "")


# figure_fields: a figure's `data-value` is what --json prints of it, its exact field where it has one
ENVIRONMENT.globals.update(link=link, csrf_field=CSRF_FIELD, statuses=figures.STATUSES, inf=float("inf"),
                           figure_fields=figure_fields)


def page(request: Request, template: str, status_code: int = 200, **context) -> HTMLResponse:
    """The template rendered for `request`'s person, with the CSRF token its forms carry."""
    context.setdefault("dataset", None)
    context.setdefault("message", None)
    context.setdefault("problem", None)
    html = ENVIRONMENT.get_template(template).render(
        person=person_of(request), csrf=csrf_token(request), path=request.url.path, **context)
    response = HTMLResponse(html, status_code=status_code)
    remember_token(request, response)
    return response


def error_page(request: Request, status_code: int, text: str) -> HTMLResponse:
    """An error as a page: what went wrong in one line, no traceback, the person omitted (it may be
    what was refused)."""
    html = ENVIRONMENT.get_template("error.html").render(status=status_code, text=text, person=None,
                                                         csrf="", path="", dataset=None, message=None,
                                                         problem=None)
    return HTMLResponse(html, status_code=status_code)
