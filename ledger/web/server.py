"""`privacy-ledger serve`: the checks before listening, then uvicorn.

Beyond loopback, someone other than the server's own user can reach it, so it refuses to start
without an auth mode (people.py). uvicorn's own reading of X-Forwarded-* headers is off: the
client address the app compares with the trusted proxy is the connection's, never a header's.
"""

from __future__ import annotations

import ipaddress

from ..core.errors import fail
from .people import LOOPBACK, Auth

AUTH_MODES = ("proxy-header",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_from_options(host: str, auth: str | None, header: str | None, trusted_proxy: str | None) -> Auth:
    """The auth mode the options ask for, or InputErrors naming the option that is wrong."""
    if auth is None:
        if header is not None or trusted_proxy is not None:
            raise fail("command line", "--auth", "--trusted-proxy and the header name need --auth proxy-header")
        if not is_loopback(host):
            raise fail("command line", "--host", f"{host!r} is beyond loopback: give an auth mode "
                                                 "(--auth proxy-header NAME --trusted-proxy ADDR)")
        return Auth()
    if auth != "proxy-header":
        raise fail("command line", "--auth", f"unknown auth mode {auth!r}; the one mode is proxy-header")
    if not header or not header.strip():
        raise fail("command line", "--auth", "proxy-header needs the header's name (e.g. X-Forwarded-User)")
    if not trusted_proxy:
        raise fail("command line", "--trusted-proxy", "proxy-header needs the proxy's address")
    try:
        ipaddress.ip_address(trusted_proxy)
    except ValueError:
        raise fail("command line", "--trusted-proxy", f"{trusted_proxy!r} is not an IP address") from None
    return Auth("proxy-header", header.strip(), trusted_proxy)


def serve(url: str | None, host: str, port: int, auth: Auth, prebuild_every: float | None = None) -> None:
    """uvicorn serving the app; `prebuild_every`: as create_app's (None: its default; 0: off)."""
    import uvicorn

    from .app import create_app
    from .prebuild import INTERVAL

    every = INTERVAL if prebuild_every is None else prebuild_every or None
    uvicorn.run(create_app(url, auth, prebuild_every=every), host=host, port=port, proxy_headers=False,
                server_header=False, log_level="info", access_log=True)
