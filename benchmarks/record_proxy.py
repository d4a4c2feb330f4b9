"""A recording reverse proxy for a model endpoint (bench_llama_cpp.py's `--capture`).

    python benchmarks/record_proxy.py UPSTREAM PORT LOG.jsonl

Forwards every request on 127.0.0.1:PORT to UPSTREAM unchanged, streams the answer back as it comes,
and appends one JSON line per request: the body, the status, the raw response text (SSE included)
and the error if the upstream connection broke.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web


def main() -> None:
    upstream, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    log = open(log_path, "a", encoding="utf-8")  # open for the process's life
    numbers = itertools.count()

    async def forward(request: web.Request) -> web.StreamResponse:
        number, body, started = next(numbers), await request.read(), time.time()
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode(errors="replace")
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        async with ClientSession(timeout=ClientTimeout(total=None)) as session:
            async with session.request(
                request.method, upstream + request.path_qs, data=body, headers=headers
            ) as reply:
                answer = web.StreamResponse(status=reply.status, headers={"Content-Type": reply.content_type})
                await answer.prepare(request)
                raw, broken = bytearray(), None
                try:
                    async for piece in reply.content.iter_any():
                        raw += piece
                        await answer.write(piece)
                except Exception as exc:  # the upstream cut the response: recorded, then passed on
                    broken = repr(exc)
                record = {
                    "n": number, "started": started, "seconds": round(time.time() - started, 3),
                    "method": request.method, "path": request.path, "request": parsed,
                    "status": reply.status, "response": raw.decode(errors="replace"), "broken": broken,
                }  # fmt: skip
                log.write(json.dumps(record) + "\n")
                log.flush()
                if broken is None:
                    await answer.write_eof()
                elif request.transport is not None:
                    request.transport.close()  # pass the cut on: the client must see it too
                return answer

    app = web.Application(client_max_size=100 * 2**20)
    app.router.add_route("*", "/{tail:.*}", forward)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main()
