#!/usr/bin/env python3
"""A stand-in for Telegram's Bot API on 127.0.0.1, for measuring the idle daemon.

    python3 scripts/telegram-standin.py PORT

It answers getMe with a bot and holds getUpdates for 2 s before an empty answer, as a long
poll does. Used by scripts/idle-rss.sh and scripts/startup-order.sh. Loopback only.
"""
import http.server, json, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self): self.go()
    def do_GET(self): self.go()
    def go(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if "getUpdates" in self.path: time.sleep(2)
        res = {"id": 1, "is_bot": True, "first_name": "b", "username": "b"} if "getMe" in self.path else []
        body = json.dumps({"ok": True, "result": res}).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers()
        try: self.wfile.write(body)
        except OSError: pass
    def log_message(self, *a): pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
