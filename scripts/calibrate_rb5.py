#!/usr/bin/env python3
"""Checks the RB5 board profile against the numbers of the CAMDNN paper.

Heidari et al., "CAMDNN", IEEE Trans. Computers 2022: Table 4 (CPU-only and
GPU-only mean delay at 21 objects), Sec. 5.3 (the 13/11/2 walk-through and
the 20.6 ms car-model load) and Sec. 5.2 (MobileNet V1 preferred batches on
the CPU). Reads the profile with tomllib (standard library only), prints each
target, the value the profile gives and the error, and exits with status 1
when a hard check fails. Soft checks and the paper's outcomes (Static-DIST,
CAMDNN) are printed for information only; see config/profiles/README.md.

Usage: python3 scripts/calibrate_rb5.py [config/profiles/rb5.toml]
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import tomllib

INF = math.inf

# Paper Sec. 5.3 / 6.2: person -> Inception V1, car -> SqueezeNet,
# bicycle -> MobileNet V1; the tuple (r2, r3, r4) follows that order.
MODELS = ("inception_v1", "squeezenet", "mobilenet_v1")
PROCS = ("cpu", "gpu", "dsp")
DETECTOR = "detector"
TOTAL = 21  # Table 4: "the total number of objects was set to 21"
R_MAX = 14  # Sec. 6.2: "from 0 to 14 objects for each object type"
HARD_TOL = 0.03  # Table 4 means must be hit within 3 %


class Profile:
    """The parts of the TOML the checks need, indexed by (model, processor)."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
        self.name = doc.get("name", "")
        self.max_batch = doc["max_batch"]
        self.cap = {p["name"]: p["max_resident"] for p in doc["processor"]}
        self.exec = {}
        self.load = {}
        for model, per_proc in doc["profile"].items():
            for proc, pair in per_proc.items():
                self.exec[(model, proc)] = list(pair["exec_ms"])
                self.load[(model, proc)] = pair["load_ms"]
        self._t = {}
        self.t_det = self.exec[(DETECTOR, "cpu")][0]

    def te(self, model: str, proc: str, k: int) -> float:
        """t_e(i, j, k); INF when the pair or the batch size is unsupported."""
        row = self.exec.get((model, proc))
        if row is None or k < 1 or k > len(row):
            return INF
        return row[k - 1]

    def batch_cost(self, model: str, proc: str, r: int) -> float:
        """T_i(r) on proc: the cheapest split of r requests into batches."""
        key = (model, proc)
        if key not in self._t:
            row = self.exec.get(key)
            if row is None:
                self._t[key] = [0.0] + [INF] * R_MAX * 2
            else:
                best = [0.0] + [INF] * (R_MAX * 2)
                for n in range(1, len(best)):
                    best[n] = min(best[n - k] + row[k - 1]
                                  for k in range(1, min(n, len(row)) + 1))
                self._t[key] = best
        return self._t[key][r]

    def split(self, model: str, proc: str, r: int) -> list[int]:
        """The batch sizes of one cheapest split of r requests, largest first."""
        out = []
        while r > 0:
            cost = self.batch_cost(model, proc, r)
            k = next(k for k in range(len(self.exec[(model, proc)]), 0, -1)
                     if k <= r and math.isclose(
                         self.batch_cost(model, proc, r - k)
                         + self.te(model, proc, k), cost))
            out.append(k)
            r -= k
        return out

    def preferred(self, model: str, proc: str) -> list[int]:
        """Batch sizes by t_e/k, best first; ties prefer the larger batch
        (the same order as policy/src/system.rs preferred_batch_table)."""
        row = self.exec[(model, proc)]
        ks = list(range(1, len(row) + 1))
        return sorted(ks, key=lambda k: (row[k - 1] / k, -k))


def schema_errors(path: str) -> list[str]:
    """The checks of policy/src/spec.rs and system.rs that a TOML file can
    fail (unknown keys, names, references, batch lists, positive timings),
    so a profile edited here is known to load in the daemon."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    errs = []

    def keys(where, table, allowed):
        errs.extend(f"{where}: unknown key {k!r}" for k in table if k not in allowed)

    keys("top level", doc, {"name", "max_batch", "processor", "model", "profile"})
    nb = doc.get("max_batch", 0)
    if not (isinstance(nb, int) and 1 <= nb <= 255):
        errs.append(f"max_batch = {nb!r}: must be between 1 and 255")
    procs = {}
    for p in doc.get("processor", []):
        keys(f"processor {p.get('name')!r}", p,
             {"name", "kind", "max_resident", "memory_budget_mb"})
        if p.get("kind") not in ("cpu", "gpu", "dsp", "other"):
            errs.append(f"processor {p.get('name')!r}: bad kind {p.get('kind')!r}")
        if not (isinstance(p.get("max_resident"), int) and p["max_resident"] >= 1):
            errs.append(f"processor {p.get('name')!r}: max_resident must be >= 1")
        procs[p.get("name")] = p
    models, routes = {}, {}
    for m in doc.get("model", []):
        keys(f"model {m.get('name')!r}", m, {"name", "parent", "classes"})
        models[m.get("name")] = m
        for c in m.get("classes", []):
            if c in routes:
                errs.append(f"class {c!r} routed to {routes[c]!r} and {m['name']!r}")
            routes[c] = m["name"]
    for m in models.values():
        if "parent" in m and m["parent"] not in models:
            errs.append(f"model {m['name']!r}: unknown parent {m['parent']!r}")
    if not any("parent" not in m for m in models.values()):
        errs.append("no detector (a model without a parent)")
    for model, per_proc in doc.get("profile", {}).items():
        if model not in models:
            errs.append(f"profile.{model}: unknown model")
        for proc, pair in per_proc.items():
            where = f"profile.{model}.{proc}"
            if proc not in procs:
                errs.append(f"{where}: unknown processor")
            keys(where, pair, {"exec_ms", "load_ms", "size_mb"})
            ex = pair.get("exec_ms", [])
            if not 1 <= len(ex) <= nb:
                errs.append(f"{where}.exec_ms: {len(ex)} entries, needs 1..={nb}")
            errs.extend(f"{where}.exec_ms[{k}] = {t!r}: must be positive"
                        for k, t in enumerate(ex)
                        if not (isinstance(t, (int, float)) and 0 < t < INF))
            lt = pair.get("load_ms")
            if not (isinstance(lt, (int, float)) and 0 <= lt < INF):
                errs.append(f"{where}.load_ms = {lt!r}: must be finite and >= 0")
            if "size_mb" in pair and not (0 < pair["size_mb"] < INF):
                errs.append(f"{where}.size_mb must be positive")
            if "size_mb" not in pair and "memory_budget_mb" in procs.get(proc, {}):
                errs.append(f"{where}.size_mb required by the memory budget")
    for name in models:
        if not doc.get("profile", {}).get(name):
            errs.append(f"model {name!r} is supported nowhere")
    return errs


def scenes(total: int = TOTAL):
    """All (r2, r3, r4) with r2 + r3 + r4 = total and each r in 0..=14."""
    for r2 in range(R_MAX + 1):
        for r3 in range(R_MAX + 1):
            r4 = total - r2 - r3
            if 0 <= r4 <= R_MAX:
                yield (r2, r3, r4)


def single_unit(p: Profile, proc: str, r) -> float:
    """CPU-only / GPU-only: the detector on the CPU, every classifier request
    on `proc`, each model's requests batched as cheaply as possible."""
    return p.t_det + sum(p.batch_cost(m, proc, n) for m, n in zip(MODELS, r))


def static_dist(p: Profile, r) -> float:
    """Paper Sec. 2 / 6.4: people and bicycles one by one on the DSP, cars
    one by one on the GPU (content- and batching-unaware)."""
    dsp = r[0] * p.te(MODELS[0], "dsp", 1) + r[2] * p.te(MODELS[2], "dsp", 1)
    gpu = r[1] * p.te(MODELS[1], "gpu", 1)
    return p.t_det + max(dsp, gpu)


class Oracle:
    """Exact optimum of one frame with free residency (no load cost, all
    processors idle): the ILP of docs/design.md section 4 for a two-level
    graph, solved by enumeration. The detector holds one CPU slot."""

    def __init__(self, p: Profile) -> None:
        self.p = p
        rng = range(R_MAX + 1)
        self.vecs = list(itertools.product(rng, rng, rng))
        self.work = {proc: {v: self._work(proc, v) for v in self.vecs}
                     for proc in PROCS}
        self._gd = {}

    def _work(self, proc: str, v) -> float:
        slots = self.p.cap[proc] - (1 if proc == "cpu" else 0)
        used = [m for m, n in zip(MODELS, v) if n > 0]
        if len(used) > slots:
            return INF
        return sum(self.p.batch_cost(m, proc, n) for m, n in zip(MODELS, v))

    def gpu_dsp(self, s):
        """min over splits of s between GPU and DSP of the later finish."""
        if s not in self._gd:
            best, arg = INF, None
            for b in itertools.product(*(range(n + 1) for n in s)):
                rest = tuple(n - x for n, x in zip(s, b))
                w = max(self.work["gpu"][b], self.work["dsp"][rest])
                if w < best:
                    best, arg = w, b
            self._gd[s] = (best, arg)
        return self._gd[s]

    def solve(self, r):
        """(makespan, cpu share, gpu share, dsp share) for scene r."""
        best = (INF, None, None, None)
        for a in itertools.product(*(range(n + 1) for n in r)):
            wc = self.work["cpu"][a]
            if wc >= best[0]:
                continue
            rest = tuple(n - x for n, x in zip(r, a))
            wgd, b = self.gpu_dsp(rest)
            w = max(wc, wgd)
            if w < best[0]:
                dsp = tuple(n - x for n, x in zip(rest, b))
                best = (w, a, b, dsp)
        return (self.p.t_det + best[0],) + best[1:]


def mean_std(xs):
    xs = list(xs)
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


class Report:
    """Prints rows and remembers whether a hard check failed."""

    def __init__(self) -> None:
        self.failed = []

    def row(self, kind, what, target, value, tol=None, unit="ms"):
        if isinstance(target, float) and isinstance(value, (int, float)):
            err = (value - target) / target if target else 0.0
            ok = tol is None or abs(err) <= tol
            status = "" if tol is None else ("PASS" if ok else "FAIL")
            print(f"  [{kind}] {what:<58} target {target:8.2f} {unit}  "
                  f"profile {value:8.2f} {unit}  error {err:+7.2%}  {status}")
        else:
            ok = target == value
            status = "" if tol is None else ("PASS" if ok else "FAIL")
            print(f"  [{kind}] {what:<58} target {target!s:>9}  "
                  f"profile {value!s:>9}  {status}")
        if kind == "hard" and tol is not None and not ok:
            self.failed.append(what)


def walkthrough(p: Profile, rep: Report) -> None:
    """Paper Sec. 5.3, scene r = (13, 11, 2)."""
    inc, sq, mb = MODELS
    d = p.t_det
    # Step 2: CPU detector only; GPU cars 5+5+1; DSP people 3+5+5 and
    # bicycles as one batch of 2.
    w_dsp = p.te(inc, "dsp", 3) + 2 * p.te(inc, "dsp", 5) + p.te(mb, "dsp", 2)
    w_gpu = 2 * p.te(sq, "gpu", 5) + p.te(sq, "gpu", 1)
    f1 = d + max(w_dsp, w_gpu)
    rep.row("soft", "5.3 step 2: delay, GPU cars 5+5+1 / DSP 3+5+5 + 2", 97.0, f1)
    rep.row("soft", "5.3 step 2: rem_gpu = GPU work - DSP work", 25.0, w_gpu - w_dsp)
    # The greedy batches of Algorithm 1 (first preferred size <= waiting).
    for model, proc, n, want in ((sq, "gpu", 11, [5, 5, 1]),
                                 (inc, "dsp", 13, [5, 5, 3]),
                                 (mb, "dsp", 2, [2])):
        got, left, pref = [], n, p.preferred(model, proc)
        while left:
            k = next(k for k in pref if k <= left)
            got.append(k)
            left -= k
        rep.row("soft", f"5.3 greedy batches of {n} {model} on {proc}",
                "+".join(map(str, want)), "+".join(map(str, got)))
    # Step 3, decision: Algorithm 1 line 9 for the next car with the GPU
    # still busy for 25 ms and the car model absent from the CPU.
    k_cpu = next(k for k in p.preferred(sq, "cpu") if k <= 11)
    k_gpu = next(k for k in p.preferred(sq, "gpu") if k <= 11)
    cpu_score = p.te(sq, "cpu", k_cpu) / k_cpu + p.load[(sq, "cpu")]
    gpu_score = 25.0 + p.te(sq, "gpu", k_gpu) / k_gpu
    print(f"  [soft] 5.3 step 3: Algorithm 1 host score for a car: "
          f"cpu {cpu_score:.2f} (k={k_cpu}, load incl.) vs gpu {gpu_score:.2f} "
          f"(k={k_gpu}, rem 25) -> {'cpu' if cpu_score < gpu_score else 'gpu'}"
          f" (paper: cpu)")
    # Step 3, outcome: car model loaded on the CPU (20.6 ms paid this frame),
    # cars shared between CPU and GPU, DSP unchanged.
    best = min((max(p.load[(sq, "cpu")] + p.batch_cost(sq, "cpu", n),
                    p.batch_cost(sq, "gpu", 11 - n), w_dsp), n)
               for n in range(12))
    rep.row("soft", f"5.3 step 3: delay with cars shared ({best[1]} on CPU)",
            76.0, d + best[0])
    # The optimum (Fig. 6): cars CPU 3 x 1 + GPU 2 x 4, DSP as before.
    fig6 = d + max(3 * p.te(sq, "cpu", 1), 2 * p.te(sq, "gpu", 4), w_dsp)
    rep.row("soft", "5.3 / Fig. 6 mapping (cars CPU 3x1, GPU 2x4)", 70.0, fig6)
    opt = Oracle(p).solve((13, 11, 2))
    rep.row("soft", "5.3 exact optimum (the ILP, car model resident on CPU)",
            70.0, opt[0])
    for proc, share in zip(PROCS, opt[1:]):
        parts = [f"{m} {'+'.join(map(str, p.split(m, proc, n)))}"
                 for m, n in zip(MODELS, share) if n]
        print(f"         optimum on {proc}: {', '.join(parts) or 'detector only'}")
    sd = static_dist(p, (13, 11, 2))
    print(f"  [soft] Sec. 2: Static-DIST on (13,11,2) = {sd:.1f} ms, "
          f"{sd / opt[0]:.2f}x the optimum (paper: more than 2x)")


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "config", "profiles", "rb5.toml")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    try:
        errs = schema_errors(path)
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"cannot read {path}: {e}")
        return 2
    if errs:
        print("the profile would not load in camdnn-policy:")
        print("\n".join("  " + e for e in errs))
        return 1
    p = Profile(path)
    rep = Report()
    print(f"profile {p.name!r} from {os.path.normpath(path)}: fields and values "
          f"valid for policy/src/spec.rs + system.rs; t_det(cpu) = {p.t_det} ms")
    all_scenes = list(scenes())
    print(f"\nTable 4 (total = {TOTAL}, {len(all_scenes)} scenes, each r in 0..={R_MAX})")
    cpu = mean_std(single_unit(p, "cpu", r) for r in all_scenes)
    gpu = mean_std(single_unit(p, "gpu", r) for r in all_scenes)
    rep.row("hard", "CPU-only mean frame delay", 393.0, cpu[0], HARD_TOL)
    rep.row("hard", "GPU-only mean frame delay", 330.0, gpu[0], HARD_TOL)

    print("\nExact values")
    rep.row("hard", "squeezenet.cpu load_ms (Sec. 5.3)", 20.6,
            p.load[("squeezenet", "cpu")], 1e-9)
    rep.row("hard", "mobilenet_v1.cpu preferred batches (Sec. 5.2)",
            "[4,3,2,1,5]", str(p.preferred("mobilenet_v1", "cpu")).replace(" ", ""),
            0)
    rep.row("soft", "inception_v1.cpu best batch (Sec. 2: three)", 3,
            p.preferred("inception_v1", "cpu")[0], 0)
    for key in ((DETECTOR, "gpu"), (DETECTOR, "dsp"), ("squeezenet", "dsp")):
        rep.row("hard", f"{key[0]}.{key[1]} absent (unsupported)", "absent",
                "absent" if key not in p.exec else "present", 0)
    for (model, proc), row in sorted(p.exec.items()):
        want = 1 if model == DETECTOR else p.max_batch
        rep.row("hard", f"{model}.{proc} has {want} exec_ms entries", want,
                len(row), 0, unit="")

    print("\nSec. 5.3 walk-through, r = (13, 11, 2)")
    walkthrough(p, rep)

    print("\nTable 4 per column (information: outcomes and STDs are not fitted)")
    oracle = Oracle(p)
    paper = {  # (mean, std) per column r_i = 7, paper Table 4
        "CPU-only": ((393.00, 52.62), (393.00, 93.56), (393.00, 49.19)),
        "GPU-only": ((330.00, 42.43), (330.00, 85.57), (330.00, 49.19)),
        "Static-DIST": ((111.67, 45.84), (99.00, 3.36), (113.33, 40.48)),
        "CAMDNN": ((60.05, 15.73), (51.01, 3.94), (61.59, 12.92)),
    }
    policies = {
        "CPU-only": lambda r: single_unit(p, "cpu", r),
        "GPU-only": lambda r: single_unit(p, "gpu", r),
        "Static-DIST": lambda r: static_dist(p, r),
        "CAMDNN": lambda r: oracle.solve(r)[0],
    }
    print(f"  {'':12}" + "".join(f"  {f'r{i + 2}=7: paper':>18}  {'profile':>18}"
                                  for i in range(3)))
    for name, fn in policies.items():
        cells = []
        for col in range(3):
            ms = mean_std(fn(r) for r in all_scenes if r[col] == 7)
            pm, ps = paper[name][col]
            cells.append(f"{pm:8.1f} +/-{ps:6.1f}  {ms[0]:8.1f} +/-{ms[1]:6.1f}")
        print(f"  {name:<12}" + "".join(f"  {c}" for c in cells))
    print("  (mean +/- population STD over the scenes of each column)")
    print("  (CAMDNN row here = exact per-frame optimum with free residency and"
          " no load cost: a lower bound, not the paper's runtime policy)")

    print()
    if rep.failed:
        print("FAILED hard checks: " + "; ".join(rep.failed))
        return 1
    print("all hard checks pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
