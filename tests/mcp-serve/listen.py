"""Listens for Chela's tool list changes with the official Python SDK's `Client.listen()`
(`mcp` 2.x, protocol 2026-07-28), as its documentation shows.

Usage: listen.py TARGET [COMMAND ARGS...]
  TARGET  an http://…/mcp URL, or "stdio" followed by the command that runs `chela mcp serve`
Prints KEY=VALUE lines for the Rust test: HONORED (the acknowledged filter) once the stream is
live (the test then changes the tools), EVENT (the first event's type), TOOLS (the sorted names
listed again after it). Gives up after 30 s without an event.
"""
import asyncio
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main():
    target = sys.argv[1]
    if target == "stdio":
        command, *args = sys.argv[2:]
        server = StdioServerParameters(command=command, args=args, env={k: os.environ[k] for k in ("HOME", "PATH")})
    else:
        headers = {"Authorization": "Bearer " + os.environ["CHELA_GATEWAY_TOKEN"]}
        server = streamable_http_client(target, http_client=create_mcp_http_client(headers=headers))
    async with Client(server, mode="2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as sub:
            print("HONORED=" + str(bool(sub.honored.tools_list_changed)), flush=True)
            with anyio.fail_after(30):
                async for event in sub:
                    print("EVENT=" + type(event).__name__, flush=True)
                    break
        tools = await client.list_tools()
        print("TOOLS=" + ",".join(sorted(t.name for t in tools.tools)), flush=True)


asyncio.run(main())
