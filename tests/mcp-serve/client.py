"""Drives Chela's MCP server with the official Python SDK client (`mcp` 2.x).

Usage: client.py MODE TARGET [COMMAND ARGS...]
  MODE    "legacy" (initialize handshake) or "2026-07-28" (stateless)
  TARGET  an http://…/mcp URL, or "stdio" followed by the command that runs `chela mcp serve`
Prints one line per step, KEY=VALUE, for the Rust test to check:
  VERSION, TOOLS (sorted names), STORED, RECALL, CHAT, CHAT_ERROR, UNKNOWN (the error's code).
"""
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


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
        print("VERSION=" + client.protocol_version, flush=True)
        tools = await client.list_tools()
        print("TOOLS=" + ",".join(sorted(t.name for t in tools.tools)), flush=True)
        stored = await client.call_tool("memory_store", {"content": "the sdk client was here (" + mode + ")"})
        print("STORED=" + json.dumps({"error": stored.is_error, "text": text_of(stored)}), flush=True)
        recall = await client.call_tool("memory_recall", {"query": "sdk client"})
        print("RECALL=" + json.dumps({"error": recall.is_error, "text": text_of(recall)}), flush=True)
        chat = await client.call_tool("chat", {"message": "hello from " + mode})
        print("CHAT=" + json.dumps({"error": chat.is_error, "text": text_of(chat)}), flush=True)
        bad = await client.call_tool("chat", {"message": "x", "session": "../etc"})
        print("CHAT_ERROR=" + json.dumps({"error": bad.is_error, "text": text_of(bad)}), flush=True)
        try:
            await client.call_tool("file_write", {"path": "x", "content": "y"})
            print("UNKNOWN=none", flush=True)
        except MCPError as e:
            print("UNKNOWN=" + str(e.error.code), flush=True)


asyncio.run(main())
