"""The safeguards every page and form goes through.

- Headers on every response: a Content-Security-Policy of `default-src 'self'` (no inline script
  or style can run: the pages have none), no framing, no MIME sniffing, no referrer.
- CSRF, double-submit: each browser gets a random token in a SameSite=Strict, HttpOnly cookie, and
  every form carries it in a hidden field; a POST whose field does not equal its cookie is refused
  (403) before anything is read from the ledger. A cross-site page can neither read the cookie nor
  make the browser send it (SameSite=Strict), so it cannot forge the pair.
- Request bodies are bounded (MAX_BODY, 413), and a body of unknown length is refused (411).
- In local mode, a request must name a loopback host (LoopbackHost): a page of another site whose
  name is made to resolve to 127.0.0.1 (DNS rebinding) would otherwise be same-origin with the app,
  read a token and post it.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_COOKIE = "ledger_csrf"
CSRF_FIELD = "csrf"
MAX_BODY = 1_000_000  # bytes: a plan file of thousands of releases fits well under it
HEADERS = (
    (b"content-security-policy", (b"default-src 'self'; img-src 'self' data:; form-action 'self'; "
                                  b"frame-ancestors 'none'; base-uri 'none'")),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


class SecureHeaders:
    """ASGI middleware: the headers above on every response."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, with_headers)


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


class LoopbackHost:
    """ASGI middleware: 421 for a request whose Host header is not a loopback name."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
            try:
                name = urlsplit("//" + host).hostname
            except ValueError:
                name = None
            if name not in LOOPBACK_NAMES:
                await send({"type": "http.response.start", "status": 421,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send({"type": "http.response.body", "body": b"421: this server answers on a loopback "
                                                                  b"address only (127.0.0.1, localhost, ::1)\n"})
                return
        await self.app(scope, receive, send)


def csrf_token(request: Request) -> str:
    """The browser's token (made on its first page; set by `remember_token`)."""
    token = request.cookies.get(CSRF_COOKIE)
    if not token or len(token) > 100:
        token = getattr(request.state, "new_csrf", None) or secrets.token_urlsafe(32)
        request.state.new_csrf = token
    return token


def remember_token(request: Request, response) -> None:
    """Set the cookie when this request made a new token."""
    token = getattr(request.state, "new_csrf", None)
    if token:
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")


async def checked_form(request: Request) -> FormData:
    """The POSTed form, once its size is bounded and its CSRF token matches the cookie."""
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise HTTPException(411, "a form must say its length")
    if int(length) > MAX_BODY:
        raise HTTPException(413, f"the form is larger than {MAX_BODY // 1000} kB")
    body = b""
    async for chunk in request.stream():  # (never more than the declared length is kept)
        body += chunk
        if len(body) > MAX_BODY:
            raise HTTPException(413, f"the form is larger than {MAX_BODY // 1000} kB")
    request._body = body  # (Starlette parses the form from the body read here)
    form = await request.form(max_files=1, max_fields=50, max_part_size=MAX_BODY)
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = form.get(CSRF_FIELD)
    if not cookie or not isinstance(sent, str) or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise HTTPException(403, "the form's security token is missing or stale: reload the page and try again")
    return form
