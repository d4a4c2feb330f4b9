"""The panel's HTTP surface on aiohttp: the page, a JSON API, the event stream, and the token check.

Every request must carry the panel's random token — `?token=` in the URL (the page, its script and
stylesheet, the event stream) or the `X-Panel-Token` header (the page's API calls) — compared in
constant time; anything else is answered 403. Store work runs in worker threads (it takes file
locks), never on the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from acp_server.panel.actions import PanelActions
from acp_server.panel.link import ServerGone
from acp_server.panel.live import LiveFeed
from acp_server.panel.sources import PanelData, PanelQueryError

if TYPE_CHECKING:
    from acp_server.panel.link import ServerLink

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-Panel-Token"
HEARTBEAT_SECONDS = 15.0
MAX_LIMIT = 500
STATIC = {"panel.js": "text/javascript", "panel.css": "text/css"}
SECURITY_HEADERS = {
    # Nothing external may load (the page works offline), and nobody may frame it.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

DATA_KEY = web.AppKey("panel_data", PanelData)
ACTIONS_KEY = web.AppKey("panel_actions", PanelActions)
FEED_KEY = web.AppKey("panel_feed", LiveFeed)
TOKEN_KEY = web.AppKey("panel_token", str)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static(name: str) -> str:
    return resources.files("acp_server.panel").joinpath("static", name).read_text(encoding="utf-8")


def token_ok(given: str | None, expected: str) -> bool:
    """Constant-time comparison of the request's token with the panel's."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    expected = request.app[TOKEN_KEY]
    given = request.headers.get(TOKEN_HEADER) or request.query.get("token")
    if not token_ok(given, expected):
        return web.Response(
            status=403, text="403: this panel needs the token from its URL\n", headers=SECURITY_HEADERS
        )
    try:
        response = await handler(request)
    except PanelQueryError as exc:
        response = web.json_response({"error": str(exc)}, status=exc.status)
    except ServerGone as exc:  # inside an ACP server that is shutting down: nothing was done here
        response = web.json_response({"error": str(exc)}, status=503)
    except LookupError as exc:  # RefinementNotFound and friends
        response = web.json_response({"error": str(exc.args[0] if exc.args else exc)}, status=404)
    if not response.prepared:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


def _int(request: web.Request, name: str, default: int, *, low: int = 0, high: int = MAX_LIMIT) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PanelQueryError(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise PanelQueryError(f"{name} must be between {low} and {high}, not {value}")
    return value


def _opt(request: web.Request, name: str) -> str | None:
    return request.query.get(name) or None


def _flag(request: web.Request, name: str, value: str) -> bool:
    """A filter switched on by `name=value` (absent or empty: off)."""
    raw = request.query.get(name) or ""
    if raw and raw != value:
        raise PanelQueryError(f"{name} must be {value!r} or left out, not {raw!r}")
    return raw == value


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise PanelQueryError("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise PanelQueryError("the request body must be a JSON object")
    return body


def _str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise PanelQueryError(f"{name} must be a non-empty string")
    return value


async def index(request: web.Request) -> web.Response:
    # The token goes into the page's own links (script, stylesheet), html-safe: it is url-safe base64.
    html = _static("index.html").replace("__TOKEN__", request.app[TOKEN_KEY])
    return web.Response(text=html, content_type="text/html")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    return web.Response(text=_static(name), content_type=STATIC[name])


async def overview(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    feed = request.app[FEED_KEY]
    sessions = await asyncio.to_thread(data.sessions)
    quiet = await asyncio.to_thread(feed.quiescence)
    welcome = await asyncio.to_thread(data.welcome)
    for session in sessions:
        # From memory for the sessions this server has open (`/harness ui`), else from the
        # quiescence.json each server keeps for its open sessions.
        session["quiescence"] = quiet.get(session["session_id"])
    return web.json_response(
        {
            "home": str(data.home),
            "sessions": sessions,
            "in_server": feed.link is not None,
            "welcome": welcome,
        }
    )


async def entries(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    answer = await asyncio.to_thread(
        lambda: data.entries(
            scope=_opt(request, "scope"),
            session=_opt(request, "session"),
            kind=_opt(request, "kind"),
            trust=_opt(request, "trust"),
            query=_opt(request, "q"),
            marked=_flag(request, "review", "marked"),
            offset=_int(request, "offset", 0, high=10**9),
            limit=_int(request, "limit", 100, low=1),
        )
    )
    return web.json_response(answer)


async def entry(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    actions = request.app[ACTIONS_KEY]
    m = request.match_info
    answer = await asyncio.to_thread(data.entry, m["store"], m["kind"], m["id"])
    answer["promote_targets"] = await asyncio.to_thread(actions.promote_targets, m["store"])
    return web.json_response(answer)


async def timeline(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    answer = await asyncio.to_thread(
        lambda: data.timeline(
            scope=_opt(request, "scope"),
            session=_opt(request, "session"),
            kind=_opt(request, "kind"),
            trigger=_opt(request, "trigger"),
            before=_opt(request, "before"),
            limit=_int(request, "limit", 50, low=1),
        )
    )
    return web.json_response(answer)


async def refinement(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    return web.json_response(await asyncio.to_thread(data.refinement, request.match_info["id"]))


async def as_of(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    return web.json_response(await asyncio.to_thread(data.as_of, request.match_info["id"]))


async def tombstones(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    return web.json_response({"tombstones": await asyncio.to_thread(data.tombstones)})


async def pending(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    return web.json_response({"pending": await asyncio.to_thread(data.pending)})


async def transcript(request: web.Request) -> web.Response:
    data = request.app[DATA_KEY]
    return web.json_response(await asyncio.to_thread(data.transcript, request.match_info["session"]))


async def act(request: web.Request) -> web.Response:
    actions = request.app[ACTIONS_KEY]
    body = await _json_body(request)
    name = request.match_info["action"]
    if name == "rollback":
        rid, force = _str(body, "refinement_id"), body.get("force") is True
        result = await asyncio.to_thread(lambda: actions.rollback(rid, force=force))
    elif name == "review":
        pid, decision, store = _str(body, "proposal_id"), _str(body, "decision"), _str(body, "store")
        result = await asyncio.to_thread(lambda: actions.review(pid, decision, store_key=store))
    elif name in ("verify", "delete"):
        store, kind, eid = _str(body, "store"), _str(body, "kind"), _str(body, "id")
        method = actions.verify if name == "verify" else actions.delete
        result = await asyncio.to_thread(method, store, kind, eid)
    elif name == "promote":
        store, kind, eid = _str(body, "store"), _str(body, "kind"), _str(body, "id")
        target = _str(body, "target")
        result = await asyncio.to_thread(actions.promote, store, kind, eid, target)
    else:
        raise web.HTTPNotFound()
    log.info("panel action %s: %s", name, result.message)
    return web.json_response(result.to_json(), status=200 if result.ok else 409)


async def events(request: web.Request) -> web.StreamResponse:
    feed = request.app[FEED_KEY]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    queue = feed.subscribe()
    try:
        await response.write(b"retry: 1000\nevent: hello\ndata: {}\n\n")
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            line = json.dumps(event, separators=(",", ":"))
            await response.write(f"event: {event['type']}\ndata: {line}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        feed.unsubscribe(queue)
    return response


def build_app(
    data: PanelData, token: str, *, feed: LiveFeed | None = None, link: ServerLink | None = None
) -> web.Application:
    """The panel application over `data`; every route requires `token`. With `link` (the panel
    runs inside an ACP server) actions go through its open sessions and quiescence is shown."""
    app = web.Application(middlewares=[_guard])
    app[DATA_KEY] = data
    app[ACTIONS_KEY] = PanelActions(data, link)
    app[FEED_KEY] = feed or LiveFeed(data.home, link=link)
    app[TOKEN_KEY] = token

    async def start_feed(app: web.Application) -> None:
        app[FEED_KEY].start()

    async def stop_feed(app: web.Application) -> None:
        await app[FEED_KEY].stop()

    app.on_startup.append(start_feed)
    app.on_cleanup.append(stop_feed)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/overview", overview)
    app.router.add_get("/api/entries", entries)
    app.router.add_get("/api/entries/{store}/{kind}/{id}", entry)
    app.router.add_get("/api/timeline", timeline)
    app.router.add_get("/api/refinements/{id}", refinement)
    app.router.add_get("/api/as-of/{id}", as_of)
    app.router.add_get("/api/tombstones", tombstones)
    app.router.add_get("/api/pending", pending)
    app.router.add_get("/api/sessions/{session}/transcript", transcript)
    app.router.add_get("/api/events", events)
    app.router.add_post("/api/actions/{action}", act)
    return app
