#!/usr/bin/env python3
"""CPU per daemon turn, binaries interleaved:

    scripts/turn-cpu.py FAKE_LLM_BIN ROUNDS BATCH BIN_A BIN_B ...

FAKE_LLM_BIN is `cargo build -p chela-testkit --bin chela-fake-llm`'s. Each binary runs `chela run`
in a fresh workspace (gateway on 127.0.0.1, the fake LLM's demo model); after 5 warm-up turns each
round sends BATCH `POST /v1/chat/completions` turns to each daemon in turn and reads the daemon's
CPU time as the sum of /proc/PID/task/*/schedstat (ns, every thread). Prints ms per turn (median,
min, max over rounds) and each binary's ratio to BIN_A, taken round by round. Loopback only."""
import json, os, socket, subprocess, sys, tempfile, time, urllib.request, statistics

fake, rounds, batch, bins = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
llm = subprocess.Popen([fake, "--exit-on-stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
base = llm.stdout.readline().split()[-1]
work = tempfile.mkdtemp()
daemons = []
for i, b in enumerate(bins):
    home = os.path.join(work, f"h{i}"); os.makedirs(home)
    open(os.path.join(home, "chela.toml"), "w").write(
        f'[llm]\nprovider = "openai"\nbase_url = "{base}/v1"\napi_key = "x"\nmodel = "m"\n')
    gp = port()
    env = dict(os.environ, HOME=home, CHELA_HOME=home, CHELA_GATEWAY__LISTEN=f"127.0.0.1:{gp}",
               CHELA_GATEWAY__TOKEN="tok-0123456789abcdef")
    p = subprocess.Popen([b, "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemons.append((b, p, gp))
def cpu_ns(pid):
    t = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try: t += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except OSError: pass
    return t
def turn(gp, n):
    req = urllib.request.Request(f"http://127.0.0.1:{gp}/v1/chat/completions",
        data=json.dumps({"model": "chela", "messages": [{"role": "user", "content": f"hello there {n}"}]}).encode(),
        headers={"Authorization": "Bearer tok-0123456789abcdef", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read(); assert r.status == 200, body
for b, p, gp in daemons:
    for _ in range(100):
        try: urllib.request.urlopen(f"http://127.0.0.1:{gp}/health", timeout=2); break
        except Exception: time.sleep(0.1)
    for n in range(5): turn(gp, n)
per = {b: [] for b in bins}
for r in range(rounds):
    for b, p, gp in daemons:
        c0 = cpu_ns(p.pid)
        for n in range(batch): turn(gp, n)
        per[b].append((cpu_ns(p.pid) - c0) / batch / 1e6)
for b, p, gp in daemons:
    v = per[b]
    print(f"{b}: cpu ms/turn median {statistics.median(v):.3f} min {min(v):.3f} max {max(v):.3f} (rounds {len(v)}, batch {batch}) rss {open(f'/proc/{p.pid}/status').read().split('VmRSS:')[1].split()[0]} KiB")
    p.kill()
a = per[bins[0]]
for b in bins[1:]:
    ratios = [x / y for x, y in zip(per[b], a)]
    print(f"ratio {b} / {bins[0]}: median {statistics.median(ratios):.3f} min {min(ratios):.3f} max {max(ratios):.3f}")
llm.stdin.close(); llm.wait()
