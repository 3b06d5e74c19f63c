"""A xiaozhi device for Chela's interop tests, played by the PyPI `xiaozhi-sdk` (headless).

    device.py SCENARIO --ota http://127.0.0.1:PORT/xiaozhi/ota/ --mac aa:bb:cc:dd:ee:01 [options]

Every scenario first onboards the way the firmware does, with the SDK's own OTA client: the OTA
check; when the answer holds an `activation` code, the activation poll until the owner approves
it; then the OTA check again for the WebSocket URL and token. The SDK's `init_connection` cannot
do that part itself (it reads `websocket.token` from the first answer and keeps polling with it).
Chela hands a token out once, in that first answer after approval, and later OTA checks carry
the URL only: the firmware keeps its token in NVS. So the connection after approval goes
through `XiaoZhiWebsocket.init_connection` with that URL and the stored token, as the firmware
does, and the OTA check the SDK would repeat (`ota_url=…`) is shown to give no new token.

Scenarios:
  onboard   onboarding only
  text      `send_text` (listen detect) and the spoken reply
  speech    `--say TEXT` spoken by espeak-ng, resampled to 16 kHz, sent as 60 ms Opus frames in
            real time, then silence until the server's VAD ends the turn (stt arrives)
  mcp       like text, with one device tool (`--tool NAME`) served through `set_mcp_tool`
  (text and mcp: with `--then TEXT`, after the first reply it prints `waiting`, reads one line
  from stdin, and then says TEXT, so the test can script the model between the two turns)
  abort     like text; after `--abort-after N` downlink frames it sends `abort` and listens on

It prints one JSON object per line on stdout (what it saw, as it happens) and logs on stderr. It
ends by itself: after the scenario, or after `--limit` seconds with an `error` line and exit 1.
"""

import argparse
import asyncio
import io
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
import uuid
import wave

import numpy as np
from xiaozhi_sdk import XiaoZhiWebsocket
from xiaozhi_sdk.ota import OtaDevice

RATE = 16000
FRAME = RATE * 60 // 1000


OUT = threading.Lock()


def emit(event, **fields):
    """One JSON line on stdout. Callbacks may run on other threads (paho's, a UDP reader): one
    write under a lock, as print()'s separate write of the newline could interleave."""
    fields["event"] = event
    line = json.dumps(fields, ensure_ascii=False) + "\n"
    with OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


class Device(XiaoZhiWebsocket):
    """The SDK's client with its downlink counted: every binary frame's arrival time and size,
    and every MCP request the server sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.frame_times = []
        self.opus_bytes = 0
        self.first_frame = asyncio.Event()

    async def _handle_websocket_message(self, message):
        if isinstance(message, bytes):
            self.frame_times.append(time.monotonic())
            self.opus_bytes += len(message)
            self.first_frame.set()
        await super()._handle_websocket_message(message)

    async def mcp(self, data):
        payload = data.get("payload", {})
        emit("mcp", method=payload.get("method"), id=payload.get("id"), params=payload.get("params"))
        await super().mcp(data)


class Seen:
    """The JSON messages the SDK hands to its callback."""

    def __init__(self):
        self.messages = []
        self.tts_stop = asyncio.Event()
        self.stt = asyncio.Event()
        self.closed = asyncio.Event()

    async def __call__(self, data):
        self.messages.append(data)
        if data.get("type") == "websocket" and data.get("state") == "close":
            emit("closed", source=data.get("source"))
            self.closed.set()
            return
        emit("message", data=data)
        if data.get("type") == "tts" and data.get("state") == "stop":
            self.tts_stop.set()
        if data.get("type") == "stt":
            self.stt.set()


async def onboard(args):
    mac = args.mac.lower()
    ota = OtaDevice(mac, str(uuid.uuid5(uuid.NAMESPACE_DNS, mac)), args.ota)
    info = await ota.activate_device()
    activation = info.get("activation")
    emit(
        "ota",
        activation_code=(activation or {}).get("code"),
        activation_message=(activation or {}).get("message"),
        websocket=bool(info.get("websocket")),
        firmware=info.get("firmware"),
        server_time=bool(info.get("server_time")),
    )
    if not activation:
        raise RuntimeError(f"a new device got no activation code: {info}")
    while True:
        approved = await ota.check_activate(activation["challenge"])
        emit("activate", approved=approved)
        if approved:
            break
        await asyncio.sleep(0.2)
    info = await ota.activate_device()
    ws = info.get("websocket") or {}
    emit(
        "ota",
        activation_code=(info.get("activation") or {}).get("code"),
        websocket=bool(ws),
        websocket_url=ws.get("url"),
        websocket_version=ws.get("version"),
        token_len=len(ws.get("token") or ""),
    )
    # The check a rebooting device makes: the URL, and no token that would replace its own.
    again = (await ota.activate_device()).get("websocket") or {}
    emit("ota_again", websocket_url=again.get("url"), has_token="token" in again)
    return ws.get("url"), ws.get("token")


async def connect(args, seen, stored):
    url, token = stored
    device = Device(seen, url=url, audio_sample_rate=RATE)
    device.websocket_token = token
    if args.tool:
        calls = []

        def tool(arguments):
            calls.append(arguments)
            emit("tool_call", name=args.tool, arguments=arguments)
            return {"level": args.tool_result}, False

        await device.set_mcp_tool(
            [
                {
                    "name": args.tool,
                    "description": "The battery's charge level in percent.",
                    "inputSchema": {"type": "object", "properties": {}},
                    "tool_func": tool,
                    "is_async": False,
                }
            ]
        )
    if not await device.init_connection(args.mac):
        raise RuntimeError("the SDK could not open the WebSocket (see its log on stderr)")
    emit("connected", session_id=device.session_id, url=device.url)
    return device


def speech(text):
    """`text` spoken by espeak-ng, as 16 kHz mono int16 samples."""
    wav = subprocess.run(["espeak-ng", "--stdout", text], check=True, capture_output=True, timeout=20).stdout
    with wave.open(io.BytesIO(wav)) as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise RuntimeError("espeak-ng did not write 16-bit mono")
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64)
    n = int(len(samples) * RATE / rate)
    resampled = np.interp(np.arange(n) * rate / RATE, np.arange(len(samples)), samples)
    return np.clip(np.round(resampled), -32768, 32767).astype(np.int16)


async def send_paced(device, frames, until=None):
    """Sends 60 ms frames in real time, as a microphone would; stops early once `until` is set."""
    start = time.monotonic()
    for i, frame in enumerate(frames):
        if until is not None and until.is_set():
            return i
        await device.send_audio(frame.tobytes())
        delay = start + (i + 1) * 0.06 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    return len(frames)


def decoded(device):
    """What the SDK decoded from the downlink Opus, summed up."""
    chunks = list(device.output_audio_queue)
    pcm = np.concatenate([np.asarray(c).reshape(-1) for c in chunks]) if chunks else np.zeros(0, dtype=np.int16)
    pcm = pcm.astype(np.float64)
    rms = float(math.sqrt(np.mean(pcm * pcm))) if len(pcm) else 0.0
    peak_hz = 0.0
    if len(pcm) >= 1024:
        spectrum = np.abs(np.fft.rfft(pcm * np.hanning(len(pcm))))
        spectrum[0] = 0
        peak_hz = float(np.argmax(spectrum) * device.audio_opus.output_sample_rate / len(pcm))
    return {
        "frames": len(device.frame_times),
        "opus_bytes": device.opus_bytes,
        "samples": int(len(pcm)),
        "sample_rate": device.audio_opus.output_sample_rate,
        "ms": int(len(pcm) * 1000 / device.audio_opus.output_sample_rate),
        "rms": round(rms, 1),
        "peak_hz": round(peak_hz, 1),
        # First to last downlink frame: paced in real time, this is about the audio's length.
        "span_ms": round((device.frame_times[-1] - device.frame_times[0]) * 1000) if device.frame_times else 0,
    }


async def stdin_line():
    """One line from stdin, read on a daemon thread so a test that never writes cannot keep
    this process alive past its limit."""
    loop = asyncio.get_running_loop()
    got = loop.create_future()

    def read():
        line = sys.stdin.readline()
        loop.call_soon_threadsafe(lambda: got.done() or got.set_result(line))

    threading.Thread(target=read, daemon=True).start()
    return await got


async def scenario(args):
    stored = await onboard(args)
    if args.scenario == "onboard":
        return
    seen = Seen()
    device = await connect(args, seen, stored)
    try:
        if args.scenario in ("text", "mcp"):
            await device.send_text(args.text)
            await seen.tts_stop.wait()
            if args.then:
                emit("waiting")
                await stdin_line()
                seen.tts_stop.clear()
                await device.send_text(args.then)
                await seen.tts_stop.wait()
            # Frames paced after `tts stop` would be a fault: give them a moment to show.
            await asyncio.sleep(0.3)
            emit("audio", **decoded(device))
        elif args.scenario == "speech":
            pcm = speech(args.say)
            pad = (-len(pcm)) % FRAME
            pcm = np.concatenate([pcm, np.zeros(pad, dtype=np.int16)])
            frames = pcm.reshape(-1, FRAME)
            emit("speech", frames=len(frames), ms=len(frames) * 60, rms=round(float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))), 1))
            await send_paced(device, frames)
            # Silence until the server's VAD ends the utterance (it answers with stt), at most 5 s.
            silence = np.zeros((int(5 / 0.06), FRAME), dtype=np.int16)
            sent = await send_paced(device, silence, until=seen.stt)
            emit("silence", frames=sent, ms=sent * 60)
            await asyncio.wait_for(seen.stt.wait(), timeout=5)
            await seen.tts_stop.wait()
            await asyncio.sleep(0.3)
            emit("audio", **decoded(device))
        elif args.scenario == "abort":
            await device.send_text(args.text)
            while len(device.frame_times) < args.abort_after:
                await asyncio.sleep(0.005)
            await device.send_abort()
            at = time.monotonic()
            before = len(device.frame_times)
            emit("abort_sent", frames_before=before)
            await asyncio.sleep(args.listen_after)
            late = [round((t - at) * 1000) for t in device.frame_times[before:]]
            emit("after_abort", frames=len(late), ms_after_abort=late, tts_stop=seen.tts_stop.is_set())
            emit("audio", **decoded(device))
        else:
            raise RuntimeError(f"unknown scenario {args.scenario}")
    finally:
        await device.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["onboard", "text", "speech", "mcp", "abort"])
    p.add_argument("--ota", required=True, help="the OTA URL, http://HOST:PORT/xiaozhi/ota/")
    p.add_argument("--mac", required=True)
    p.add_argument("--text", default="hello")
    p.add_argument("--then", default="", help="a second utterance, after a line on stdin")
    p.add_argument("--say", default="What is the weather like today?")
    p.add_argument("--tool", default="")
    p.add_argument("--tool-result", default="72%")
    p.add_argument("--abort-after", type=int, default=8, help="downlink frames before abort")
    p.add_argument("--listen-after", type=float, default=1.5, help="seconds to listen after abort")
    p.add_argument("--limit", type=float, default=60, help="the whole run's time limit in seconds")
    args = p.parse_args()
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # Its handshake lines would print the device token.
    logging.getLogger("websockets").setLevel(logging.INFO)
    try:
        asyncio.run(asyncio.wait_for(scenario(args), timeout=args.limit))
    except asyncio.TimeoutError:
        emit("error", message=f"the scenario did not finish within {args.limit} s")
        end(1)
    except Exception as e:  # noqa: BLE001 - the test reads the reason
        emit("error", message=f"{type(e).__name__}: {e}")
        end(1)
    emit("done")
    end(0)


def end(code):
    # A stdin reader thread may still wait (it holds stdin's lock): leave without the
    # interpreter's shutdown, which could wait on it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
