"""Cancels a slow `chat` call through the official Python SDK client (`mcp` 2.x), then chats again.

Usage: cancel.py MODE TARGET [COMMAND ARGS...]   (MODE and TARGET as in client.py)
The SDK abandons the first call after ABANDON seconds: in the handshake era it sends
`notifications/cancelled`; at 2026-07-28 over HTTP it closes the request's POST. If Chela
stopped the first turn, the second call (same conversation, so queued behind the first one
otherwise) is answered at once. Prints KEY=VALUE lines: ABANDONED (true when the first call
gave no result), SECOND (its text) and SECOND_SECS (how long it took).
"""
import asyncio
import os
import sys
import time

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ABANDON = 1.5


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main():
    mode, target = sys.argv[1], sys.argv[2]
    if target == "stdio":
        command, *args = sys.argv[3:]
        server = StdioServerParameters(command=command, args=args, env={k: os.environ[k] for k in ("HOME", "PATH")})
    else:
        # The gateway asks for its token on loopback too.
        headers = {"Authorization": "Bearer " + os.environ["CHELA_GATEWAY_TOKEN"]}
        server = streamable_http_client(target, http_client=create_mcp_http_client(headers=headers))
    async with Client(server, mode=mode) as client:
        first = None
        with anyio.move_on_after(ABANDON):
            first = await client.call_tool("chat", {"message": "a slow question"})
        print("ABANDONED=" + str(first is None).lower(), flush=True)
        started = time.monotonic()
        second = await client.call_tool("chat", {"message": "a quick one"})
        print("SECOND=" + text_of(second), flush=True)
        print("SECOND_SECS=%.2f" % (time.monotonic() - started), flush=True)


asyncio.run(main())
