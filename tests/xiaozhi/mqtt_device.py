"""A xiaozhi device on the MQTT + UDP transport, for Chela's interop tests, following the firmware
(xiaozhi-esp32 `ota.cc`, `mqtt_protocol.cc`) with `paho-mqtt`, a UDP socket, AES-128-CTR from
`cryptography` and Opus through `opuslib` (what the WebSocket simulator's SDK uses).

    mqtt_device.py SCENARIO --ota http://127.0.0.1:PORT/xiaozhi/ota/ --mac aa:bb:cc:dd:ee:01 [options]

Onboarding is the firmware's: the OTA check (`Device-Id`, `Client-Id`, `Activation-Version: 1`,
the system info body); with an `activation` block, `POST {ota}/activate` with `{}` until 200 (the
owner approved the code); then the OTA check again, whose `mqtt` block (endpoint, client id,
username, password, topics, keep-alive) the firmware keeps in NVS. A device never subscribes: it
connects with those credentials, publishes JSON to `publish_topic`, and reads what the server
pushes on its connection. Its hello is version 3 with `"transport":"udp"`; the answer's `udp`
block gives the server, port, key and nonce. Every datagram's header is the nonce with bytes
[2..4) (payload length), [8..12) (timestamp) and [12..16) (sequence, from 1) overwritten, and is
the AES-128-CTR IV of the Opus payload.

Scenarios (the WebSocket simulator's names and event lines, so tests run on both transports):
  check     one OTA check of an approved device, and which blocks its answer holds
  onboard   onboarding only (`--known`: approved already, the first answer has the login)
  text      `listen detect` with `--text`, the spoken reply as tts messages and UDP Opus
  speech    `--say TEXT` spoken by espeak-ng as 60 ms Opus frames over UDP in real time, then
            silence until the server's VAD ends the turn
  mcp       like text, serving one device tool (`--tool NAME`) over MCP on MQTT
  (text and mcp: with `--then TEXT`, after the first reply it prints `waiting`, reads a line
  from stdin, then says TEXT)
  abort     like text; after `--abort-after N` downlink frames it sends `abort` and listens on
  abuse     hostile and broken behaviour, each followed by a check the device still works: wrong
            credentials, an unknown client id, datagrams for no conversation, forged / replayed /
            wrong-ssrc datagrams, a second connection with the same client id, and a device that
            vanishes (no DISCONNECT, no pings) until the server closes its connection

Every scenario but onboard ends with a `goodbye`. One JSON object per line on stdout, logs on
stderr; it ends after the scenario or after `--limit` seconds with an `error` line and exit 1.
"""

import argparse
import json
import logging
import queue
import select
import socket
import sys
import threading
import time
import uuid

import numpy as np
import opuslib
import paho.mqtt.client as mqtt
import requests
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from device import RATE, FRAME, emit, end, speech

STEP = 30.0  # the longest one wait inside a scenario, seconds


def ctr(key, header, data):
    c = Cipher(algorithms.AES(key), modes.CTR(header)).encryptor()
    return c.update(data) + c.finalize()


class Ota:
    """The firmware's OTA client (`Ota::CheckVersion`, `Ota::Activate`)."""

    def __init__(self, url, mac):
        self.url = url.rstrip("/")
        self.mac = mac
        self.client = str(uuid.uuid5(uuid.NAMESPACE_DNS, mac))
        self.headers = {
            "Activation-Version": "1",
            "Device-Id": mac,
            "Client-Id": self.client,
            "User-Agent": "bread-compact-wifi/2.0.5",
            "Accept-Language": "en-US",
            "Content-Type": "application/json",
        }

    def check(self):
        body = {
            "version": 2,
            "language": "en-US",
            "mac_address": self.mac,
            "uuid": self.client,
            "chip_model_name": "esp32s3",
            "application": {"name": "xiaozhi", "version": "2.0.5"},
            "board": {"type": "bread-compact-wifi", "name": "bread-compact-wifi", "mac": self.mac},
        }
        r = requests.post(self.url + "/", headers=self.headers, data=json.dumps(body), timeout=10)
        if r.status_code != 200:
            raise RuntimeError(f"OTA check: HTTP {r.status_code} {r.text}")
        return r.json()

    def activate(self):
        r = requests.post(self.url + "/activate", headers=self.headers, data="{}", timeout=10)
        if r.status_code not in (200, 202):
            raise RuntimeError(f"activation: HTTP {r.status_code} {r.text}")
        return r.status_code == 200


def onboard(args):
    ota = Ota(args.ota, args.mac.lower())
    info = ota.check()
    activation = info.get("activation")
    emit(
        "ota",
        activation_code=(activation or {}).get("code"),
        activation_message=(activation or {}).get("message"),
        websocket=bool(info.get("websocket")),
        mqtt=bool(info.get("mqtt")),
        firmware=info.get("firmware"),
        server_time=bool(info.get("server_time")),
    )
    if args.known:
        # Approved before (over the WebSocket, say) and switched to MQTT by the owner.
        if activation or not info.get("mqtt"):
            raise RuntimeError(f"an approved device's OTA answer has no mqtt block: {info}")
    elif not activation:
        raise RuntimeError(f"a new device got no activation code: {info}")
    if not args.known:
        deadline = time.monotonic() + STEP
        while True:
            approved = ota.activate()
            emit("activate", approved=approved)
            if approved:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the owner never approved the code")
            time.sleep(0.2)
        info = ota.check()
    block = info.get("mqtt") or {}
    shown = {k: v for k, v in block.items() if k != "password"}
    emit(
        "ota",
        activation_code=(info.get("activation") or {}).get("code"),
        websocket=bool(info.get("websocket")),
        mqtt=shown,
        password_len=len(block.get("password") or ""),
    )
    if not block.get("password"):
        raise RuntimeError(f"the OTA answer after approval has no MQTT login: {shown}")
    # The check a rebooting device makes: the endpoint again, no new password (it keeps its own).
    again = ota.check().get("mqtt") or {}
    emit("ota_again", endpoint=again.get("endpoint"), has_password="password" in again)
    return block


class Device:
    """One MQTT connection with its conversation: the JSON the server pushed, the UDP channel
    after a hello, the downlink audio received and decoded."""

    tls_ca = None  # set from --tls-ca: the CA file that signed the endpoint's certificate
    list_delay = 0.0  # set from --list-delay: a slow device's tools/list answer

    def __init__(self, block, name="device", client_id=None, password=None, keepalive=None, tool=None):
        self.block = block
        self.name = name
        self.tool = tool
        self.inbox = queue.Queue(maxsize=1000)
        self.connack = queue.Queue(maxsize=1)
        self.closed = threading.Event()
        self.looping = True
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id or block["client_id"],
            protocol=mqtt.MQTTv311,
            clean_session=True,
        )
        c.username_pw_set(block["username"], password if password is not None else block["password"])
        if Device.tls_ca:
            # As the firmware on port 8883: TLS, the server's certificate checked.
            c.tls_set(ca_certs=Device.tls_ca)
        c.on_connect = lambda _c, _u, _f, rc, _p: self.connack.put(str(rc))
        c.on_disconnect = lambda _c, _u, _f, rc, _p: self.closed.set()
        c.on_message = self._on_message
        self.client = c
        self.keepalive = keepalive or block["keepalive"]
        self.session_id = None
        self.udp = None
        self.frames = []  # (arrival time, sequence, pcm)
        self.up = 0
        self.thread = None

    def connect(self):
        """CONNECT and wait for the CONNACK; returns its reason ("Success" when accepted)."""
        host, port = self.block["endpoint"].rsplit(":", 1)
        self.client.connect(host, int(port), keepalive=self.keepalive)
        # paho's own loop reconnects by itself; this one stops at the first disconnection, so a
        # device closed by the server stays closed.
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        try:
            return self.connack.get(timeout=STEP)
        except queue.Empty:
            return "no CONNACK" if not self.closed.is_set() else "closed"

    def _loop(self):
        while self.looping:
            if self.client.loop(timeout=0.05) != mqtt.MQTT_ERR_SUCCESS:
                self.closed.set()
                return

    def _on_message(self, _c, _u, msg):
        try:
            data = json.loads(msg.payload)
        except ValueError:
            emit("bad_json", device=self.name, topic=msg.topic)
            return
        if data.get("type") == "mcp" and self.tool:
            self._mcp(data.get("payload") or {})
            return
        if data.get("type") != "hello":
            emit("message", data=data, device=self.name, topic=msg.topic)
        self.inbox.put(data)

    def publish(self, obj):
        self.client.publish(self.block["publish_topic"], json.dumps(obj), qos=0)

    def next(self, pred, what):
        deadline = time.monotonic() + STEP
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.closed.is_set() and self.inbox.empty():
                raise RuntimeError(f"{self.name} never got {what}")
            try:
                m = self.inbox.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue
            if pred(m):
                return m

    def hello(self, mcp=False):
        self.publish(
            {
                "type": "hello",
                "version": 3,
                "transport": "udp",
                "features": {"mcp": mcp},
                "audio_params": {"format": "opus", "sample_rate": RATE, "channels": 1, "frame_duration": 60},
            }
        )
        a = self.next(lambda m: m.get("type") == "hello", "the hello answer")
        u = a.get("udp") or {}
        self.key, self.nonce = bytes.fromhex(u["key"]), bytes.fromhex(u["nonce"])
        if a.get("transport") != "udp" or len(self.key) != 16 or len(self.nonce) != 16 or u.get("encryption") != "aes-128-ctr":
            raise RuntimeError(f"not a udp hello answer: {a}")
        self.session_id = a["session_id"]
        self.server = (u["server"], int(u["port"]))
        params = a.get("audio_params") or {}
        self.out_rate = int(params.get("sample_rate", 24000))
        self.decoder = opuslib.Decoder(self.out_rate, 1)
        self.encoder = opuslib.Encoder(RATE, 1, opuslib.APPLICATION_VOIP)
        self.up = 0
        self.down_last = 0
        self.frames = []
        if self.udp is None:
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind(("127.0.0.1", 0))
            threading.Thread(target=self._udp_loop, daemon=True).start()
        emit(
            "hello",
            device=self.name,
            nonce_head=self.nonce[:2].hex(),
            ssrc=self.nonce[4:8].hex(),
            server=list(self.server),
            sample_rate=self.out_rate,
        )
        return a

    def datagram(self, seq, opus, timestamp=0):
        header = bytearray(self.nonce)
        header[2:4] = len(opus).to_bytes(2, "big")
        header[8:12] = timestamp.to_bytes(4, "big")
        header[12:16] = seq.to_bytes(4, "big")
        return bytes(header) + ctr(self.key, bytes(header), opus)

    def send_pcm(self, pcm):
        self.up += 1
        opus = self.encoder.encode(pcm.tobytes(), FRAME)
        self.last_up = self.datagram(self.up, opus, self.up * 60)
        self.udp.sendto(self.last_up, self.server)

    def _udp_loop(self):
        # As the firmware: decrypt with the header as IV; an old sequence is dropped.
        while True:
            try:
                data, _ = self.udp.recvfrom(4096)
            except OSError:
                return
            if len(data) < 16 or data[0] != 1:
                emit("bad_datagram", device=self.name, len=len(data))
                continue
            size = int.from_bytes(data[2:4], "big")
            seq = int.from_bytes(data[12:16], "big")
            if len(data) != 16 + size or data[4:8] != self.nonce[4:8]:
                emit("bad_datagram", device=self.name, len=len(data))
                continue
            if seq <= self.down_last:
                emit("old_datagram", device=self.name, seq=seq, last=self.down_last)
                continue
            self.down_last = seq
            pcm = self.decoder.decode(ctr(self.key, data[:16], data[16:]), self.out_rate * 60 // 1000)
            self.frames.append((time.monotonic(), seq, len(data) - 16, np.frombuffer(pcm, dtype=np.int16)))

    def _mcp(self, p):
        method, rid = p.get("method"), p.get("id")
        emit("mcp", method=method, id=rid, params=p.get("params"), device=self.name)
        if rid is None:
            return
        if method == "initialize":
            result = {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bread-compact-wifi", "version": "2.0.5"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {
                        "name": self.tool[0],
                        "description": "The battery's charge level in percent.",
                        "inputSchema": {"type": "object", "properties": {}},
                    }
                ]
            }
        elif method == "tools/call" and (p.get("params") or {}).get("name") == self.tool[0]:
            emit("tool_call", name=self.tool[0], arguments=(p.get("params") or {}).get("arguments"))
            result = {"content": [{"type": "text", "text": json.dumps({"level": self.tool[1]})}], "isError": False}
        else:
            self.publish({"session_id": self.session_id, "type": "mcp", "payload": {"jsonrpc": "2.0", "id": rid, "error": {"message": f"Unknown method: {method}"}}})
            return
        answer = {"session_id": self.session_id, "type": "mcp", "payload": {"jsonrpc": "2.0", "id": rid, "result": result}}
        if method == "tools/list" and Device.list_delay > 0:
            # A device busy elsewhere: its listing comes after the first utterance has gone out
            # (on a timer: paho's thread keeps reading meanwhile).
            threading.Timer(Device.list_delay, self.publish, (answer,)).start()
            return
        self.publish(answer)

    def say(self, text):
        # The firmware sends the wake word's audio before its `listen detect`; that first uplink
        # datagram is also what tells the server where to send the reply's audio.
        for _ in range(3):
            self.send_pcm(np.zeros(FRAME, dtype=np.int16))
        self.publish({"session_id": self.session_id, "type": "listen", "state": "detect", "text": text})

    def tts_stop(self):
        return self.next(lambda m: m.get("type") == "tts" and m.get("state") == "stop", "tts stop")

    def goodbye(self):
        self.publish({"session_id": self.session_id, "type": "goodbye"})
        emit("goodbye", device=self.name)

    def close(self):
        self.looping = False
        if self.thread:
            self.thread.join(timeout=2)
        try:
            self.client.disconnect()
        except Exception:  # noqa: BLE001 - already closed by the server
            pass
        if self.udp:
            self.udp.close()

    def audio(self):
        """What was decoded from the downlink, in the WebSocket simulator's `audio` line."""
        frames = list(self.frames)
        pcm = np.concatenate([f[3] for f in frames]).astype(np.float64) if frames else np.zeros(0)
        rms = float(np.sqrt(np.mean(pcm * pcm))) if len(pcm) else 0.0
        peak_hz = 0.0
        if len(pcm) >= 1024:
            spectrum = np.abs(np.fft.rfft(pcm * np.hanning(len(pcm))))
            spectrum[0] = 0
            peak_hz = float(np.argmax(spectrum) * self.out_rate / len(pcm))
        seqs = [f[1] for f in frames]
        return {
            "device": self.name,
            "frames": len(frames),
            "opus_bytes": sum(f[2] for f in frames),
            "samples": int(len(pcm)),
            "sample_rate": self.out_rate,
            "ms": int(len(pcm) * 1000 / self.out_rate),
            "rms": round(rms, 1),
            "peak_hz": round(peak_hz, 1),
            "span_ms": round((frames[-1][0] - frames[0][0]) * 1000) if frames else 0,
            "first_seq": seqs[0] if seqs else 0,
            "increasing": all(b > a for a, b in zip(seqs, seqs[1:])),
        }


def paced(dev, frames, until=None):
    start = time.monotonic()
    for i, frame in enumerate(frames):
        if until is not None and until():
            return i
        dev.send_pcm(frame)
        delay = start + (i + 1) * 0.06 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return len(frames)


def stdin_line():
    got = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), got.set()), daemon=True).start()
    if not got.wait(STEP):
        raise RuntimeError("no line on stdin")


def talk(args, block):
    tool = (args.tool, args.tool_result) if args.tool else None
    dev = Device(block, tool=tool)
    rc = dev.connect()
    emit("connected", reason=rc)
    if rc != "Success":
        raise RuntimeError(f"CONNECT refused: {rc}")
    try:
        dev.hello(mcp=bool(tool))
        if args.scenario in ("text", "mcp"):
            dev.say(args.text)
            dev.tts_stop()
            if args.then:
                emit("waiting")
                stdin_line()
                dev.say(args.then)
                dev.tts_stop()
            # Frames paced after `tts stop` would be a fault: give them a moment to show.
            time.sleep(0.3)
        elif args.scenario == "speech":
            stt = threading.Event()
            dev.publish({"session_id": dev.session_id, "type": "listen", "state": "start", "mode": "auto"})
            pcm = speech(args.say)
            pcm = np.concatenate([pcm, np.zeros((-len(pcm)) % FRAME, dtype=np.int16)])
            frames = pcm.reshape(-1, FRAME)
            emit("speech", frames=len(frames), ms=len(frames) * 60, rms=round(float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2))), 1))
            paced(dev, frames)
            seen = []

            def heard():
                while not dev.inbox.empty():
                    m = dev.inbox.get()
                    seen.append(m)
                    if m.get("type") == "stt":
                        stt.set()
                return stt.is_set()

            sent = paced(dev, np.zeros((int(5 / 0.06), FRAME), dtype=np.int16), until=heard)
            emit("silence", frames=sent, ms=sent * 60)
            if not heard():
                raise RuntimeError("no stt within 5 s of silence")
            if not any(m.get("type") == "tts" and m.get("state") == "stop" for m in seen):
                dev.tts_stop()
            time.sleep(0.3)
        elif args.scenario == "abort":
            dev.say(args.text)
            deadline = time.monotonic() + STEP
            while len(dev.frames) < args.abort_after:
                if time.monotonic() > deadline:
                    raise RuntimeError("too few downlink frames to abort")
                time.sleep(0.005)
            # Said before it is sent: the answer to it comes on paho's thread, whose lines must
            # not be printed ahead of this one.
            at = time.monotonic()
            before = len(dev.frames)
            emit("abort_sent", frames_before=before)
            dev.publish({"session_id": dev.session_id, "type": "abort", "reason": ""})
            time.sleep(args.listen_after)
            late = [round((f[0] - at) * 1000) for f in dev.frames[before:]]
            stopped = False
            while not dev.inbox.empty():
                m = dev.inbox.get()
                stopped = stopped or (m.get("type") == "tts" and m.get("state") == "stop")
            emit("after_abort", frames=len(late), ms_after_abort=late, tts_stop=stopped)
        emit("audio", **dev.audio())
        dev.goodbye()
        # The server ends the conversation and keeps the connection (the firmware stays connected).
        time.sleep(0.2)
        emit("after_goodbye", connected=not dev.closed.is_set())
    finally:
        dev.close()


def turn(dev, text):
    dev.say(text)
    dev.tts_stop()
    time.sleep(0.2)
    a = dev.audio()
    dev.frames = []
    return a


def abuse(args, block):
    # Wrong password and an unknown client id: refused at CONNECT, nothing else happens.
    for what, kwargs in (
        ("wrong_password", {"password": "0" * 64}),
        ("unknown_client", {"client_id": block["client_id"].replace("@@@", "@@@ff_", 1)}),
        ("wrong_username", {}),
    ):
        b = dict(block)
        if what == "wrong_username":
            b["username"] = "aa:bb:cc:00:00:00"
        d = Device(b, name=what, **kwargs)
        rc = d.connect()
        d.closed.wait(STEP)
        emit("refused", what=what, reason=rc, closed=d.closed.is_set())
        d.close()

    dev = Device(block, name="first")
    emit("connected", reason=dev.connect(), device="first")
    dev.hello()
    old_ssrc_nonce, old_key = dev.nonce, dev.key
    dev.goodbye()
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attacker.bind(("127.0.0.1", 0))
    # Datagrams for no conversation: the last one's ssrc after its goodbye, a made-up ssrc, junk.
    dev.up = 100
    for i in range(100):
        dev.udp.sendto(dev.datagram(dev.up + i, b"\x01\x02\x03"), dev.server)
        attacker.sendto(bytes([1, 0, 0, 3, 0xDE, 0xAD, 0xBE, 0xEF]) + bytes(8) + b"abc", dev.server)
        attacker.sendto(b"junk", dev.server)
    emit("early_datagrams", sent=300)

    dev.hello()
    if dev.nonce == old_ssrc_nonce or dev.key == old_key:
        raise RuntimeError("a new hello reused the last conversation's key or nonce")
    dev.send_pcm(np.zeros(FRAME, dtype=np.int16))
    first = dev.last_up
    # The ssrc is in the clear; the key is not: garbage under the right ssrc from another
    # address, a wrong ssrc, and the device's own first datagram replayed (from both addresses).
    for i in range(100):
        h = bytearray(dev.nonce)
        h[2:4] = (16).to_bytes(2, "big")
        h[12:16] = (dev.up + 1 + i).to_bytes(4, "big")
        attacker.sendto(bytes(h) + bytes([0xAB] * 16), dev.server)
        wrong = bytearray(h)
        wrong[4:8] = bytes(a ^ 0xFF for a in wrong[4:8])
        dev.udp.sendto(bytes(wrong) + bytes([0xAB] * 16), dev.server)
        attacker.sendto(first, dev.server)
        dev.udp.sendto(first, dev.server)
    emit("forged_datagrams", sent=400)
    a = turn(dev, args.text)
    attacker.setblocking(False)
    try:
        attacker.recvfrom(4096)
        forger_heard = True
    except BlockingIOError:
        forger_heard = False
    emit("audio", **a)
    emit("forger", heard=forger_heard)
    attacker.close()

    # A second connection with the same client id: the newer wins, the older is closed.
    second = Device(block, name="second")
    emit("connected", reason=second.connect(), device="second")
    emit("older_closed", closed=dev.closed.wait(STEP))
    dev.close()
    second.hello()
    emit("audio", **turn(second, args.text))
    second.goodbye()

    # A device that vanishes: connected with a 1 s keep-alive, then silent (no pings, no
    # DISCONNECT); the server ends it after 1.5 s, and is seen to by the socket's end.
    vanish = Device(block, name="vanish", keepalive=1)
    emit("connected", reason=vanish.connect(), device="vanish")
    second.closed.wait(STEP)
    vanish.hello()
    vanish.looping = False
    vanish.thread.join(timeout=2)
    sock = vanish.client.socket()
    at = time.monotonic()
    readable, _, _ = select.select([sock], [], [], STEP)
    gone = bool(readable) and sock.recv(1) == b""
    emit("vanished", closed_by_server=gone, after_ms=round((time.monotonic() - at) * 1000))
    vanish.close()
    second.close()


def scenario(args):
    if args.scenario == "check":
        info = Ota(args.ota, args.mac.lower()).check()
        ws, mq = info.get("websocket") or {}, info.get("mqtt") or {}
        emit("check", websocket=bool(ws), token="token" in ws, mqtt=bool(mq), password="password" in mq, activation=bool(info.get("activation")))
        return
    block = onboard(args)
    if args.scenario == "onboard":
        return
    if args.scenario == "abuse":
        abuse(args, block)
    else:
        talk(args, block)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["check", "onboard", "text", "speech", "mcp", "abort", "abuse"])
    p.add_argument("--ota", required=True, help="the OTA URL, http://HOST:PORT/xiaozhi/ota/")
    p.add_argument("--mac", required=True)
    p.add_argument("--text", default="hello")
    p.add_argument("--then", default="", help="a second utterance, after a line on stdin")
    p.add_argument("--say", default="What is the weather like today?")
    p.add_argument("--tool", default="")
    p.add_argument("--tool-result", default="72%")
    p.add_argument("--abort-after", type=int, default=8, help="downlink frames before abort")
    p.add_argument("--listen-after", type=float, default=1.5, help="seconds to listen after abort")
    p.add_argument("--tls-ca", default="", help="connect with TLS, trusting this CA file")
    p.add_argument("--known", action="store_true", help="approved already: the first OTA answer has the login")
    p.add_argument("--list-delay", type=float, default=0.0, help="seconds before the tools/list answer (a slow device)")
    p.add_argument("--limit", type=float, default=60, help="the whole run's time limit in seconds")
    args = p.parse_args()
    Device.tls_ca = args.tls_ca or None
    Device.list_delay = args.list_delay
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    done = threading.Event()
    failed = []

    def run():
        try:
            scenario(args)
        except Exception as e:  # noqa: BLE001 - the test reads the reason
            failed.append(f"{type(e).__name__}: {e}")
        done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(args.limit):
        emit("error", message=f"the scenario did not finish within {args.limit} s")
        end(1)
    if failed:
        emit("error", message=failed[0])
        end(1)
    emit("done")
    end(0)


if __name__ == "__main__":
    main()
