#!/usr/bin/env python3
"""The aarch64 camdnnd run under qemu-aarch64 (user mode), checked end to end.

`sim` (scripts/smoke_aarch64.sh, run by scripts/test.sh): the emulated binary serves the
shipped simulated-RB5 config; this host's camdnnd feeder (a scene trace, synthetic frames)
and the Python client (clients/python) get every frame answered; /metrics counts them and
/health answers; SIGTERM with frames in flight answers every one and exits 0.

`real` (scripts/compare_aarch64.sh): the street graph (CenterNet, MoveNet, faceres) on one
processor of the tract engine, then on one of ONNX Runtime (the aarch64 wheel's library
for the emulated binary), each served by the x86-64 and the aarch64 camdnnd on the same
photos; every answer must agree: the same objects and classes, and every box, score and
output tensor within TOLERANCE of the output's scale.

Standard library only. Every failure names what differed and prints the daemon's log.
"""

import argparse
import contextlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
from camdnn_client import Client  # noqa: E402

# aarch64 sysroot of Debian's libc6-arm64-cross and libstdc++6-arm64-cross.
SYSROOT = "/usr/aarch64-linux-gnu"
# Longest wait for a daemon to be ready: loading and optimising the real models
# under emulation takes tens of seconds.
READY_TIMEOUT_S = 600
# Largest |x86-64 - aarch64| / max(1, |x86-64 output|) between the two builds'
# answers (float32 kernels differ between the architectures: SIMD widths, FMA).
TOLERANCE = 1e-3
# Photos the real-model comparison feeds (scripts/fetch_test_images.sh).
PHOTOS = ("person.ppm", "dog.ppm")


class SmokeError(Exception):
    """A check failed; the message says which and why."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def elf_machine(path):
    """The ELF e_machine of `path` (183: aarch64, 62: x86-64)."""
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise SmokeError(f"{path} is not an ELF file")
    return int.from_bytes(head[18:20], "little")


def arm_cpuinfo(path):
    """Writes an aarch64 /proc/cpuinfo for this host's cores (Neoverse N1, the -cpu we
    emulate) to `path`."""
    lines = []
    for i in range(os.cpu_count() or 1):
        lines += [f"processor\t: {i}", "BogoMIPS\t: 50.00",
                  "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
                  "asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs",
                  "CPU implementer\t: 0x41", "CPU architecture: 8", "CPU variant\t: 0x4",
                  "CPU part\t: 0xd0c", "CPU revision\t: 1", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def command_for(binary, workdir, arm_proc_cpuinfo=False):
    """How to run `binary` on this host: aarch64 ones under qemu-aarch64, emulating a
    Neoverse N1 (Armv8.2 with dot product and fp16, as the RB5's Cortex-A77-class cores).
    `arm_proc_cpuinfo`: in a private mount namespace whose /proc/cpuinfo describes that
    CPU; qemu 7.2 shows the host's x86 one, on which ONNX Runtime's cpuinfo library
    crashes (SIGSEGV) while loading. Needs root."""
    machine = elf_machine(binary)
    if machine == 62:
        return [binary]
    if machine != 183:
        raise SmokeError(f"{binary}: unexpected ELF machine {machine}")
    if not os.path.isdir(SYSROOT):
        raise SmokeError(f"{SYSROOT} is missing; run scripts/setup_cross.sh")
    qemu = ["qemu-aarch64", "-cpu", "neoverse-n1", "-L", SYSROOT, binary]
    if not arm_proc_cpuinfo:
        return qemu
    if os.geteuid() != 0:
        raise SmokeError("ONNX Runtime under qemu-aarch64 needs an aarch64 /proc/cpuinfo, "
                         "bind-mounted in a private mount namespace: run as root")
    cpuinfo = os.path.join(workdir, "cpuinfo")
    arm_cpuinfo(cpuinfo)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /proc/cpuinfo && exec "$@"', cpuinfo, *qemu]


def rewrite(text, replacements):
    """`text` with each line starting with a key of `replacements` replaced by its value;
    fails when a key matches no line, so a changed shipped config is noticed."""
    out, seen = [], set()
    for line in text.splitlines():
        key = next((k for k in replacements if line.startswith(k)), None)
        if key is None:
            out.append(line)
        else:
            seen.add(key)
            if replacements[key] is not None:
                out.append(replacements[key])
    missing = set(replacements) - seen
    if missing:
        raise SmokeError(f"the shipped config has no line starting with {sorted(missing)}")
    return "\n".join(out) + "\n"


def server_lines(socket_path, metrics):
    return f'socket = "{socket_path}"\ndrain_timeout_ms = 20000\n\n[metrics]\nlisten = "{metrics}"\n'


def sim_config(socket_path, metrics):
    """config/camdnnd-sim.toml with our socket, metrics address and absolute paths."""
    with open(os.path.join(REPO, "config", "camdnnd-sim.toml")) as f:
        text = f.read()
    cfg = os.path.join(REPO, "config")
    return rewrite(text, {
        "socket = ": server_lines(socket_path, metrics),
        "profile = ": f'profile = "{cfg}/profiles/rb5.toml"',
        "policy = ": f'policy = {{ onnx = "{cfg}/policies/rb5.onnx", '
                     f'sidecar = "{cfg}/policies/rb5.policy.json" }}',
    })


def without_processor(text, header, name):
    """TOML `text` without the `header` blocks (`[[pipeline.processor]]`, `[[processor]]`)
    named `name` and without the `[profile.MODEL.name]` tables."""
    sections = re.split(r"(?m)^(?=\[)", text)
    kept = [s for s in sections
            if not (s.startswith(header) and re.search(rf'(?m)^name = "{re.escape(name)}"', s))
            and not re.match(rf"\[profile\.[^.\]]+\.{re.escape(name)}\]", s)]
    if len(kept) == len(sections):
        raise SmokeError(f"no {header} named {name!r} to remove")
    return "".join(kept)


def one_processor_config(engine, socket_path, metrics):
    """config/camdnnd.toml (the street graph) on its `engine` processor alone, with its
    profile (config/profiles/host-street.toml) cut to that processor and without the
    learned policy (trained for both)."""
    with open(os.path.join(REPO, "config", "camdnnd.toml")) as f:
        text = f.read()
    others = re.findall(r'(?ms)^\[\[pipeline\.processor\]\]\s*\nname = "([^"]+)"'
                        r'(?:(?!^\[).)*?^engine = "(\w+)"', text)
    dropped = [name for name, e in others if e != engine]
    if len(others) != 2 or len(dropped) != 1:
        raise SmokeError(f"config/camdnnd.toml: expected a {engine} processor and one other, "
                         f"found {others}")
    with open(os.path.join(REPO, "config", "profiles", "host-street.toml")) as f:
        profile = without_processor(f.read(), "[[processor]]", dropped[0])
    profile_path = os.path.join(os.path.dirname(socket_path), "profile.toml")
    with open(profile_path, "w") as f:
        f.write(profile)
    models = os.path.join(REPO, "models")
    text = without_processor(text, "[[pipeline.processor]]", dropped[0])
    text = text.replace('path = "../models/', f'path = "{models}/')
    return rewrite(text, {
        "socket = ": server_lines(socket_path, metrics),
        "profile = ": f'profile = "{profile_path}"',
        "policy = ": None,
    })


class Daemon:
    """`camdnnd serve` (native or emulated) on a config in a fresh temporary folder."""

    def __init__(self, binary, make_config, env=None, arm_proc_cpuinfo=False):
        self.dir = tempfile.TemporaryDirectory(prefix="camdnn-smoke-")
        self.socket = os.path.join(self.dir.name, "camdnnd.sock")
        self.metrics = f"127.0.0.1:{free_port()}"
        self.config = os.path.join(self.dir.name, "camdnnd.toml")
        with open(self.config, "w") as f:
            f.write(make_config(self.socket, self.metrics))
        self.log_path = os.path.join(self.dir.name, "log")
        self.binary = binary
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command_for(binary, self.dir.name, arm_proc_cpuinfo)
                + ["serve", "--config", self.config],
                stdout=subprocess.DEVNULL, stderr=log,
                env={**os.environ, "CAMDNN_LOG": "info", **(env or {})})
        self.started = time.monotonic()
        try:
            while not (self.get("/health/ready")[0] == 200 and os.path.exists(self.socket)):
                if self.proc.poll() is not None:
                    raise SmokeError(f"camdnnd exited early ({self.proc.returncode}); "
                                     f"its log:\n{self.log()}")
                if time.monotonic() - self.started > READY_TIMEOUT_S:
                    raise SmokeError(f"camdnnd not ready after {READY_TIMEOUT_S} s")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        self.ready_s = time.monotonic() - self.started

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def get(self, path):
        """(status, body) of GET `path` on the metrics listener; (None, "") if refused."""
        try:
            with urllib.request.urlopen(f"http://{self.metrics}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, ""

    def metric(self, series):
        """The value of one exact series (name with labels) in /metrics."""
        status, body = self.get("/metrics")
        if status != 200:
            raise SmokeError(f"/metrics answered {status}")
        for line in body.splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
        raise SmokeError(f"/metrics has no series {series}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()


@contextlib.contextmanager
def serving(binary, make_config, env=None, arm_proc_cpuinfo=False):
    d = Daemon(binary, make_config, env, arm_proc_cpuinfo)
    try:
        yield d
    except BaseException:
        sys.stderr.write(f"--- log of {binary} ---\n{d.log()}\n---\n")
        raise
    finally:
        d.stop()


def feed(host_binary, d, args):
    """This host's `camdnnd feed` against `d`: its JSON answer lines."""
    out = subprocess.run([host_binary, "feed", "--socket", d.socket, "--fps", "0", *args],
                         capture_output=True, text=True, timeout=READY_TIMEOUT_S)
    if out.returncode != 0:
        raise SmokeError(f"camdnnd feed {' '.join(args)} failed: {out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def check(cond, what):
    if not cond:
        raise SmokeError(what)


def run_sim(binary, host_binary):
    """The emulated daemon on the sim config: feeder, Python client, metrics, health, drain."""
    t0 = time.monotonic()
    with serving(binary, sim_config) as d:
        check(d.get("/health/live")[0] == 200, "/health/live is not 200")
        check(d.metric("camdnn_ready") == 1.0, "camdnn_ready is not 1")
        sent, results = 0, 0
        trace = os.path.join(d.dir.name, "scenes.txt")
        with open(trace, "w") as f:
            f.write("6 1 1 0\n6 0 0 1\n")
        lines = feed(host_binary, d, ["--trace", trace, "--width", "64", "--height", "48"])
        check(len(lines) == 12, f"feed --trace: {len(lines)} answers for 12 frames")
        results += sum(a["type"] == "result" for a in lines)
        sent += 12
        lines = feed(host_binary, d, ["--synthetic", "5", "--stream", "1",
                                      "--width", "64", "--height", "48"])
        check(len(lines) == 5, f"feed --synthetic: {len(lines)} answers for 5 frames")
        results += sum(a["type"] == "result" for a in lines)
        sent += 5
        with Client(d.socket, "smoke-python", timeout=120) as c:
            for seq in range(10):
                c.send_frame(stream_id=2, seq=seq, capture_ts_us=0, width=32, height=32,
                             pixel_format="rgb24", payload=bytes(32 * 32 * 3),
                             detections=[{"bbox": (0, 0, 8, 8), "class": "bicycle", "score": 0.8}])
            answers = c.bye()
        check(len(answers) == 10, f"Python client: {len(answers)} answers for 10 frames")
        check(all(a["type"] in ("result", "dropped") for a in answers),
              f"Python client: unexpected answers {answers}")
        results += sum(a["type"] == "result" for a in answers)
        sent += 10
        check(results >= 3, f"only {results} of {sent} frames had results")
        check(d.metric("camdnn_frames_received_total") == sent,
              f"camdnn_frames_received_total is not {sent}")
        done = sum(d.metric(f'camdnn_frames_total{{outcome="{o}"}}')
                   for o in ("completed", "dropped", "rejected"))
        check(done == sent, f"camdnn_frames_total sums to {done}, not {sent}")
        drained = drain_with_frames_in_flight(d)
        sent += drained
        summary = {
            "binary": binary, "ready_s": round(d.ready_s, 1),
            "frames": sent, "results": results, "drained_in_flight": drained,
            "exit": d.proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
        }
    print("smoke sim:", json.dumps(summary))


def drain_with_frames_in_flight(d):
    """SIGTERM while frames are in flight: each is answered, the daemon exits 0 and
    removes its socket. Returns the frames sent."""
    with Client(d.socket, "smoke-drain", timeout=120) as c:
        window = c.welcome["window"]
        for stream in range(10, 14):
            for seq in range(window):
                c.send_frame(stream_id=stream, seq=seq, capture_ts_us=0, width=32, height=32,
                             pixel_format="rgb24", payload=bytes(32 * 32 * 3),
                             detections=[{"bbox": (0, 0, 8, 8), "class": "person",
                                          "score": 0.9}])
        d.proc.send_signal(signal.SIGTERM)
        answered = 0
        while True:
            try:
                a = c.recv()
            except EOFError:
                break
            check(a["type"] in ("result", "dropped"), f"drain: unexpected answer {a}")
            answered += 1
    check(answered == 4 * window, f"drain: {answered} answers for {4 * window} frames in flight")
    try:
        code = d.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise SmokeError("camdnnd did not exit within 60 s of SIGTERM")
    check(code == 0, f"camdnnd exited {code} after SIGTERM")
    check(not os.path.exists(d.socket), "the socket file is still there after the drain")
    return 4 * window


def answers_on(binary, host_binary, engine, photos, env):
    """The street graph's answers to `photos` from `binary` on its `engine` processor."""
    t0 = time.monotonic()
    with serving(binary, lambda s, m: one_processor_config(engine, s, m), env,
                 arm_proc_cpuinfo=engine == "ort") as d:
        ready = time.monotonic() - t0
        lines = feed(host_binary, d, ["--images", photos])
        check(len(lines) == len(PHOTOS), f"{len(lines)} answers for {len(PHOTOS)} photos")
        for a in lines:
            check(a["type"] == "result", f"{binary} on {engine}: {a}")
        served = time.monotonic() - t0 - ready
    return lines, ready, served


def numbers(answer):
    """Every compared number of one answer, with where it comes from and its scale group."""
    out = []
    for i, o in enumerate(answer["objects"]):
        for k, v in enumerate(o["bbox"]):
            out.append((f"object {i} bbox[{k}]", "bbox", v))
        out.append((f"object {i} score", "score", o["score"]))
        for out_ in o["outputs"]:
            for t in out_.get("tensors", []):
                for k, v in enumerate(t["data"]):
                    out.append((f"object {i} {out_['model']}.{t['name']}[{k}]",
                                f"{out_['model']}.{t['name']}", v))
            for k, (label, score) in enumerate(out_.get("topk", [])):
                out.append((f"object {i} {out_['model']} top{k} ({label})",
                            f"{out_['model']}.topk", score))
    return out


def structure(answer):
    return [(o["class"], [(x["model"], [t["name"] for t in x.get("tensors", [])],
                           [label for label, _ in x.get("topk", [])]) for x in o["outputs"]])
            for o in answer["objects"]]


def compare(reference, other, what):
    """Largest relative difference between two builds' answers; fails past TOLERANCE."""
    worst = 0.0
    for a, b in zip(reference, other):
        check(structure(a) == structure(b),
              f"{what}: frame {a['seq']}: objects differ: {structure(a)} vs {structure(b)}")
        na, nb = numbers(a), numbers(b)
        scale = {}
        for _, group, v in na:
            scale[group] = max(scale.get(group, 1.0), abs(v))
        for (where, group, x), (_, _, y) in zip(na, nb):
            if not (math.isfinite(x) and math.isfinite(y)):
                raise SmokeError(f"{what}: frame {a['seq']} {where}: {x} vs {y}")
            rel = abs(x - y) / scale[group]
            worst = max(worst, rel)
            check(rel <= TOLERANCE,
                  f"{what}: frame {a['seq']} {where}: x86-64 {x} vs aarch64 {y} "
                  f"(relative {rel:.2e} > {TOLERANCE})")
    return worst


def run_real(binary, host_binary, ort_aarch64):
    photos = tempfile.mkdtemp(prefix="camdnn-photos-")
    for name in PHOTOS:
        src = os.path.join(REPO, "testdata", name)
        if not os.path.exists(src):
            raise SmokeError(f"{src} is missing; run scripts/setup.sh (scripts/fetch_test_images.sh)")
        os.symlink(src, os.path.join(photos, name))
    for model in ("centernet.onnx", "movenet-lightning.onnx", "faceres.onnx"):
        if not os.path.exists(os.path.join(REPO, "models", model)):
            raise SmokeError(f"models/{model} is missing; run scripts/setup.sh (scripts/fetch_models.sh)")
    if not os.path.exists(ort_aarch64):
        raise SmokeError(f"{ort_aarch64} is missing; run scripts/setup_cross.sh")
    for engine in ("tract", "ort"):
        ref, ready_x86, served_x86 = answers_on(host_binary, host_binary, engine, photos, {})
        env = {"ORT_DYLIB_PATH": ort_aarch64} if engine == "ort" else {}
        got, ready_arm, served_arm = answers_on(binary, host_binary, engine, photos, env)
        worst = compare(ref, got, engine)
        summary = {
            "engine": engine, "photos": sorted(PHOTOS),
            "objects": [len(a["objects"]) for a in ref],
            "numbers_compared": sum(len(numbers(a)) for a in ref),
            "max_relative_difference": worst, "tolerance": TOLERANCE,
            "x86_64_ready_s": round(ready_x86, 1), "x86_64_answer_s": round(served_x86, 1),
            "aarch64_ready_s": round(ready_arm, 1), "aarch64_answer_s": round(served_arm, 1),
        }
        print("compare real:", json.dumps(summary))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["sim", "real"])
    ap.add_argument("--binary", required=True, help="the aarch64 camdnnd")
    ap.add_argument("--host-binary", required=True, help="this host's camdnnd (feeder, reference)")
    ap.add_argument("--ort-aarch64", help="libonnxruntime.so of the aarch64 wheel (real mode)")
    args = ap.parse_args()
    check(elf_machine(args.binary) == 183, f"{args.binary} is not an aarch64 binary")
    try:
        if args.mode == "sim":
            run_sim(args.binary, args.host_binary)
        else:
            run_real(args.binary, args.host_binary, os.path.abspath(args.ort_aarch64 or ""))
    except SmokeError as e:
        sys.exit(f"smoke_aarch64 {args.mode}: FAILED: {e}")


if __name__ == "__main__":
    main()
