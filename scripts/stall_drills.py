#!/usr/bin/env python3
"""Drills of what stalls or hostile clients do to a camdnnd binary, with the
figures docs/operations.md ("Stalls and hostile clients, measured") quotes.
Each drill starts the given binary on the shipped simulated-RB5 config (sim
engines, no model files), in a temporary folder with its own socket and
metrics port, attacks or breaks it, and prints one JSON line of what it saw.
Run a drill against two builds to compare them:

    python3 scripts/stall_drills.py --bin target/release/camdnnd hung-run
    python3 scripts/stall_drills.py --bin /tmp/camdnnd-before hung-run

Drills: hung-run (person model runs hang for 60 s, two of them holding
both in-flight slots: time to an answer for a person frame with a 300 ms
deadline, a frame for the detector and a client that never uses the hung
model; what health says), door (N idle or half-open
connections: seconds until a new client's first answer), http (N idle TCP
connections on the metrics port: does /health/live answer), takeover (as
root: a daemon running as nobody and a live root socket it cannot connect
to), hup-startup (SIGHUP while models load), reload-rss (RSS over N SIGHUP
reloads under load), bad-socket (seconds until a bad socket path is
reported, with a 5 s model load), log-flood (identical ERROR lines while a
model is out of service everywhere), reconnect (feed across a kill -9 and a
restart). Standard library only; uses clients/python/camdnn_client.py.
"""

import argparse
import json
import os
import pathlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python"))
import camdnn_client  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_text(sock, metrics, profile=None):
    """The shipped sim config with our socket, metrics port and absolute paths."""
    text = (REPO / "config" / "camdnnd-sim.toml").read_text()
    out = []
    for line in text.splitlines():
        if line.startswith("socket = "):
            out.append('socket = "%s"\n\n[metrics]\nlisten = "%s"' % (sock, metrics))
        elif line.startswith("profile = "):
            out.append('profile = "%s"' % (profile or REPO / "config" / "profiles" / "rb5.toml"))
        elif line.startswith("policy = ") and profile:
            continue  # the learned policy refuses a profile this far from its own
        elif line.startswith("policy = "):
            d = REPO / "config" / "policies"
            out.append('policy = { onnx = "%s", sidecar = "%s" }'
                       % (d / "rb5.onnx", d / "rb5.policy.json"))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def with_model_line(text, model, line):
    at = 'name = "%s"\n' % model
    assert at in text, model
    return text.replace(at, at + line + "\n", 1)


class Daemon:
    """The binary in a temporary folder; killed on exit."""

    def __init__(self, binary, text=None, socket_name="camdnnd.sock", user=None, dir=None):
        self.dir = dir or tempfile.mkdtemp(prefix="camdnn-drill-")
        self.sock = os.path.join(self.dir, socket_name)
        self.metrics = "127.0.0.1:%d" % free_port()
        self.config = os.path.join(self.dir, "camdnnd.toml")
        text = text(self.sock, self.metrics) if callable(text) else \
            config_text(self.sock, self.metrics)
        with open(self.config, "w") as f:
            f.write(text)
        self.log_path = os.path.join(self.dir, "log")
        self.binary, self.user = binary, user
        self.start()

    def start(self):
        log = open(self.log_path, "a")
        kw = {}
        if self.user is not None:
            kw["user"], kw["group"] = self.user, self.user
        self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config],
                                     stdout=subprocess.DEVNULL, stderr=log,
                                     env=dict(os.environ, CAMDNN_LOG="info"), **kw)

    def get(self, path, timeout=5):
        try:
            with urllib.request.urlopen("http://%s%s" % (self.metrics, path), timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return None, str(e)

    def metric(self, name):
        _, body = self.get("/metrics")
        total = 0.0
        for line in body.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_ready(self, limit=120):
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if self.proc.poll() is not None:
                raise RuntimeError("camdnnd exited early:\n" + self.log())
            if self.get("/health/ready")[0] == 200 and os.path.exists(self.sock):
                return time.monotonic() - t0
            time.sleep(0.05)
        raise RuntimeError("not ready:\n" + self.log())

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            kib = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        return kib / 1024

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def frame_args(seq, classes, stream=1, deadline_us=None):
    kw = {}
    if classes is not None:
        kw["detections"] = [{"bbox": (20.0 * n, 0, 20.0 * n + 16, 16), "class": c, "score": 0.9}
                            for n, c in enumerate(classes)]
    if deadline_us is not None:
        kw["deadline_us"] = deadline_us
    return dict(stream_id=stream, seq=seq, capture_ts_us=0, width=64, height=48,
                pixel_format="rgb24", payload=bytes(64 * 48 * 3), **kw)


def timed_answer(sock, classes, cap, deadline_us=None, stream=1):
    """(seconds to the first answer or None past `cap`, the answer's type/reason)."""
    try:
        with camdnn_client.Client(sock, "drill", timeout=cap) as c:
            t0 = time.monotonic()
            c.send_frame(**frame_args(0, classes, stream, deadline_us))
            a = c.recv()
            return round(time.monotonic() - t0, 3), a.get("reason", a["type"])
    except socket.timeout:
        return None, "no answer within %g s" % cap
    except (OSError, EOFError, camdnn_client.ProtocolError) as e:
        return None, "%s: %s" % (type(e).__name__, e)


def hung_run(args):
    # Every run of the person model after the start-up warm-up hangs for 60 s.
    faults = "sim_faults = { stall_ms = 60000, stall_on_runs = [%s] }" % ", ".join(
        str(n) for n in range(2, 100))
    d = Daemon(args.bin, lambda s, m: with_model_line(config_text(s, m), "inception_v1", faults))
    try:
        d.wait_ready()
        out = {}
        # Two person frames hang, one per in-flight slot (max_in_flight = 2).
        stuck = [threading.Thread(target=lambda s=s: out.__setitem__(
            "hung_person_%d" % s, timed_answer(d.sock, ["person"], 20, stream=s)))
            for s in (10, 11)]
        for t in stuck:
            t.start()
        time.sleep(0.5)
        results = {}
        threads = [
            threading.Thread(target=lambda: results.__setitem__(
                "person_300ms_deadline", timed_answer(d.sock, ["person"], 15, 300_000, 2))),
            threading.Thread(target=lambda: results.__setitem__(
                "no_detections", timed_answer(d.sock, None, 15, stream=3))),
        ]
        cars = {"sent": 0, "answered": 0}

        def car_client():
            try:
                with camdnn_client.Client(d.sock, "cars", timeout=15) as c:
                    for seq in range(50):  # 5 fps for 10 s
                        c.send_frame(**frame_args(seq, ["car"], 4))
                        cars["sent"] += 1
                        time.sleep(0.2)
                        while c.in_flight(4) > 0:
                            try:
                                c.sock.settimeout(0.01)
                                a = c.recv()
                                cars["answered"] += 1
                                kind = a.get("reason", a["type"])
                                cars[kind] = cars.get(kind, 0) + 1
                            except socket.timeout:
                                break
                            finally:
                                c.sock.settimeout(15)
            except OSError as e:
                cars["error"] = str(e)
        threads.append(threading.Thread(target=car_client))
        for t in threads:
            t.start()
        time.sleep(2.5)
        health = d.get("/health/ready")
        out["during_stall"] = {"ready_status": health[0], "ready_body": health[1].strip()[:300],
                               "camdnn_ready": d.metric("camdnn_ready"),
                               "camdnn_scheduler_alive": d.metric("camdnn_scheduler_alive")}
        for t in threads + stuck:
            t.join()
        out.update(results)
        out["car_client_5fps_10s"] = cars
        print(json.dumps({"drill": "hung-run", **out}))
    finally:
        d.stop()


def hostile(sock, n, half):
    """n connections: welcomed and silent, or (half) six bytes of a Hello."""
    conns = []
    hello = camdnn_client.encode_hello("hostile")
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(sock)
            s.sendall(hello[:6] if half else hello)
        except OSError:
            s.close()
            continue
        conns.append(s)
    return conns


def door(args):
    d = Daemon(args.bin)
    try:
        d.wait_ready()
        rows = []
        for n, half in [(63, False), (64, False), (64, True), (1024, False), (2000, False)]:
            held = hostile(d.sock, n, half)
            time.sleep(0.5)
            took, what = timed_answer(d.sock, ["car"], args.cap)
            if took is None:
                # Retry until served or the cap passes: when does a new client get in?
                t0 = time.monotonic()
                while took is None and time.monotonic() - t0 < args.cap:
                    time.sleep(0.5)
                    took, what = timed_answer(d.sock, ["car"], 5)
                took = None if took is None else round(time.monotonic() - t0, 2)
            rows.append({"hostile": n, "half_open": half, "held": len(held),
                         "first_answer_s": took, "answer": what})
            for s in held:
                s.close()
            time.sleep(1)
        print(json.dumps({"drill": "door", "rows": rows}))
    finally:
        d.stop()


def http(args):
    d = Daemon(args.bin)
    try:
        d.wait_ready()
        rows = []
        for n in (16, 100):
            held = []
            host, port = d.metrics.split(":")
            for _ in range(n):
                held.append(socket.create_connection((host, int(port))))
            time.sleep(0.3)
            rows.append({"idle": n, "live": d.get("/health/live", 3), "metrics": d.get("/metrics", 3)[0]})
            for s in held:
                s.close()
            time.sleep(2.5)
        for r in rows:
            r["live"] = [r["live"][0], r["live"][1][:60]]
        print(json.dumps({"drill": "http", "rows": rows}))
    finally:
        d.stop()


def takeover(args):
    if os.geteuid() != 0:
        sys.exit("takeover: run as root (the daemon runs as nobody)")
    base = tempfile.mkdtemp(prefix="camdnn-drill-")
    os.chmod(base, 0o755)
    shared = os.path.join(base, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    path = os.path.join(shared, "camdnnd.sock")
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(path)
    live.listen()
    os.chmod(path, 0o600)
    inode = os.stat(path).st_ino
    d = Daemon(args.bin, socket_name="shared/camdnnd.sock", user=65534, dir=base)
    try:
        time.sleep(0.5)
        try:
            d.wait_ready(30)
            started = True
        except RuntimeError:
            started = False
        still_ours = os.path.exists(path) and os.stat(path).st_ino == inode
        log = d.log()
        line = next((l for l in log.splitlines() if "ERROR" in l or "listening" in l), "")
        print(json.dumps({"drill": "takeover", "daemon_started": started,
                          "root_socket_file_kept": still_ours, "log": line[-200:]}))
    finally:
        d.stop()


def hup_startup(args):
    faults = "sim_faults = { load_stall_ms = 3000, stall_on_loads = [1] }"
    slow_profile = None
    if args.slow_profile:
        slow_profile = args.slow_profile
    d = Daemon(args.bin, lambda s, m: (config_text(s, m, slow_profile) if slow_profile
                                      else with_model_line(config_text(s, m), "detector", faults)))
    try:
        t0 = time.monotonic()
        while d.get("/health/ready")[0] != 503 and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        d.proc.send_signal(signal.SIGHUP)
        t_hup = time.monotonic()
        reloaded = None
        while d.proc.poll() is None and time.monotonic() - t_hup < 30:
            if d.metric('camdnn_config_reloads_total{result="ok"}') >= 1:
                reloaded = round(time.monotonic() - t_hup, 2)
                break
            time.sleep(0.1)
        time.sleep(0.5)
        code = d.proc.poll()
        out = {"drill": "hup-startup", "exited": code is not None, "exit_code": code}
        if code is None:
            out["ready"] = d.get("/health/ready")[0]
            out["reloaded_after_s"] = reloaded
        out["log"] = [l[-120:] for l in d.log().splitlines() if "SIGHUP" in l or "reload" in l][:3]
        print(json.dumps(out))
    finally:
        d.stop()


def reload_rss(args):
    d = Daemon(args.bin)
    try:
        d.wait_ready()
        stop = threading.Event()

        def load(stream):
            with camdnn_client.Client(d.sock, "load", timeout=30) as c:
                seq = 0
                while not stop.is_set():
                    c.send_frame(**frame_args(seq, ["person"], stream))
                    c.recv()
                    seq += 1
                    time.sleep(0.02)
        clients = [threading.Thread(target=load, args=(s,)) for s in (1, 2)]
        for t in clients:
            t.start()
        samples = []
        for n in range(1, args.reloads + 1):
            d.proc.send_signal(signal.SIGHUP)
            t0 = time.monotonic()
            while d.metric('camdnn_config_reloads_total{result="ok"}') < n:
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("reload %d did not finish:\n%s" % (n, d.log()[-2000:]))
                time.sleep(0.05)
            time.sleep(0.3)
            samples.append(round(d.rss_mib(), 1))
        stop.set()
        for t in clients:
            t.join()
        print(json.dumps({"drill": "reload-rss", "reloads": args.reloads,
                          "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
                          "first": samples[0], "last": samples[-1], "max": max(samples),
                          "every_10th": samples[9::10]}))
    finally:
        d.stop()


def bad_socket(args):
    base = tempfile.mkdtemp(prefix="camdnn-drill-")
    with open(os.path.join(base, "a-file"), "w") as f:
        f.write("not a folder")
    # Every start-up load takes 5 s: a copy of the profile with load_ms = 5000.
    profile = os.path.join(base, "slow.toml")
    text = (REPO / "config" / "profiles" / "rb5.toml").read_text()
    with open(profile, "w") as f:
        f.write(re.sub(r"^load_ms = [0-9.]+", "load_ms = 5000.0", text, flags=re.M))
    t0 = time.monotonic()
    d = Daemon(args.bin, lambda s, m: config_text(s, m, profile), socket_name="a-file/camdnnd.sock",
               dir=base)
    try:
        d.proc.wait(timeout=120)
        took = round(time.monotonic() - t0, 2)
        err = [l[-160:] for l in d.log().splitlines() if "ERROR" in l][:1]
        print(json.dumps({"drill": "bad-socket", "exit_code": d.proc.returncode,
                          "seconds_to_exit": took, "error": err}))
    finally:
        d.stop()


def log_flood(args):
    # squeezenet fails every load after the start-up one and panics on its first frame run:
    # out of service wherever it runs, while a car client sends at 20 fps for 12 s.
    faults = "sim_faults = { panic_on_runs = [2], fail_loads = [%s] }" % ", ".join(
        str(n) for n in range(2, 200))
    d = Daemon(args.bin, lambda s, m: with_model_line(config_text(s, m), "squeezenet", faults))
    try:
        d.wait_ready()
        start = len(d.log().splitlines())
        with camdnn_client.Client(d.sock, "cars", timeout=30) as c:
            t0 = time.monotonic()
            seq = 0
            while time.monotonic() - t0 < 12:
                c.send_frame(**frame_args(seq, ["car"]))
                c.recv()
                seq += 1
                time.sleep(0.05)
        time.sleep(11)
        lines = d.log().splitlines()[start:]
        errors = [l for l in lines if " ERROR " in l or l.startswith("ERROR")]
        body = [re.sub(r"^\S+Z ", "", l) for l in errors]
        most = statistics.mode(body) if body else ""
        print(json.dumps({"drill": "log-flood", "frames": seq, "error_lines": len(errors),
                          "most_repeated": most[:160], "its_lines": body.count(most),
                          "repeat_summaries": sum("[repeated" in l for l in lines)}))
    finally:
        d.stop()


def reconnect(args):
    d = Daemon(args.bin)
    try:
        d.wait_ready()
        cmd = [args.bin, "feed", "--socket", d.sock, "--synthetic", "100", "--fps", "20", "--quiet"]
        if args.reconnect_flag:
            cmd.append("--reconnect")
        feed = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while d.metric("camdnn_frames_received_total") < 20:
            time.sleep(0.05)
        d.proc.kill()
        d.proc.wait()
        d.start()
        d.wait_ready()
        _, err = feed.communicate(timeout=120)
        print(json.dumps({"drill": "reconnect", "feed_exit": feed.returncode,
                          "feed_said": next((l for l in err.splitlines()
                                             if l.startswith(("Error", "{"))), "")[:300]}))
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "camdnnd"))
    ap.add_argument("--cap", type=float, default=20.0, help="door: longest wait for a new client, s")
    ap.add_argument("--reloads", type=int, default=100)
    ap.add_argument("--slow-profile", help="hup-startup: a profile with slow loads instead of "
                                           "sim_faults (for builds without load stalls)")
    ap.add_argument("--reconnect-flag", action="store_true", help="reconnect: pass --reconnect")
    ap.add_argument("drill", choices=["hung-run", "door", "http", "takeover", "hup-startup",
                                      "reload-rss", "bad-socket", "log-flood", "reconnect"])
    args = ap.parse_args()
    {"hung-run": hung_run, "door": door, "http": http, "takeover": takeover,
     "hup-startup": hup_startup, "reload-rss": reload_rss, "bad-socket": bad_socket,
     "log-flood": log_flood, "reconnect": reconnect}[args.drill](args)


if __name__ == "__main__":
    main()
