"""A MimiClaw WebSocket client written from MimiClaw's documentation ("WebSocket Protocol":
port 18789; client → {"type": "message", "content": …, "chat_id": …}; server →
{"type": "response", "content": …, "chat_id": …}; "Client chat_id is auto-assigned on
connection (ws_) but can be overridden in the first message"). Events of other types that come
before the response (Chela streams tokens and tool steps) are skipped, as such a client would.

Usage: client.py URL  (ws://host:port/ws?token=…)
Prints KEY=VALUE lines: FIRST and SECOND (the chat_id of the answers on one connection whose
first message overrides chat_id with "ws_override" and whose second names none), SECOND_TEXT,
OWN (the chat_id a second connection that names none is given).
"""
import asyncio
import json
import sys

from websockets.asyncio.client import connect


async def ask(ws, content, chat_id=None):
    message = {"type": "message", "content": content}
    if chat_id is not None:
        message["chat_id"] = chat_id
    await ws.send(json.dumps(message))
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if event["type"] in ("response", "error"):
            return event


async def main():
    url = sys.argv[1]
    async with connect(url) as ws:
        first = await ask(ws, "remember: my colour is blue", "ws_override")
        print("FIRST=" + first["chat_id"], flush=True)
        second = await ask(ws, "what is my colour?")
        print("SECOND=" + second["chat_id"], flush=True)
        print("SECOND_TEXT=" + second["content"], flush=True)
    async with connect(url) as ws:
        own = await ask(ws, "hello")
        print("OWN=" + own["chat_id"], flush=True)


asyncio.run(main())
