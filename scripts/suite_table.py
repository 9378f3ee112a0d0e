#!/usr/bin/env python3
"""Prints the scheduler suite's summary table (docs/suite.md) from the
outputs of `camdnnd suite ... --cases` (as `scripts/outputs.sh suite` writes
them into target/outputs/), one row per file and, for the file that holds
rb5, a row for `camdnn` with its learned policy on rb5's cases.

Standard library only. Usage: scripts/suite_table.py FILE...
"""

import re
import statistics
import sys

FLOOR = "0.98"


def case_lines(text):
    """Each case line as (board, shape, {scheduler: on-time share})."""
    out = []
    for line in text.splitlines():
        m = re.match(
            r"^(\S+)\s+(\S+)\s+heavy\s+\d+\s+median bound \S+(?: on-time ceiling \S+)?: (.*)$", line
        )
        if not m:
            continue
        shares = {}
        for name, share in re.findall(r"(\S+?)\*? (\d\.\d+)/\S+", m.group(3)):
            shares[name] = float(share)
        out.append((m.group(1), m.group(2), shares))
    return out


def tally(text, reference):
    """The reference's tally section: its camdnn-local row, the "against every
    baseline at once" line and its hindsight at every baseline's share."""
    head = re.search(
        rf"^{re.escape(reference)} against each scheduler over the (\d+) cases", text, re.M
    )
    if not head:
        return None
    section = text[head.start():]
    row = re.search(
        r"^camdnn-local\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)x\s+(\S+)?\s+(\d+)\s+(\S+)x\s+(\S+)x",
        section,
        re.M,
    )
    every = re.search(
        rf"against every baseline at once: {re.escape(reference)} loses to some baseline on "
        r"(\d+) of \d+ cases, is under \S+ of some baseline on (\d+)(?: \(worst (\S+), (\S+) against)?",
        section,
    )
    hind = re.search(
        rf"as often on time as every baseline of {re.escape(reference)} would be (\S+)x", text
    )
    return {
        "cases": int(head.group(1)),
        "wtl": f"{row.group(1)}/{row.group(2)}/{row.group(3)}",
        "worst": f"{row.group(4)}x",
        "under": row.group(6),
        "median": f"{row.group(7)}x",
        "ceiling": f"{row.group(8)}x",
        "lost": every.group(1),
        "lost_under": every.group(2),
        "lost_worst": f" (worst {every.group(3)}, {every.group(4)})" if every.group(3) else "",
        "hindsight": f"{hind.group(1)}x" if hind else "-",
    }


def mean_share(cases, scheduler, boards=None):
    shares = [
        s[scheduler]
        for board, _, s in cases
        if scheduler in s and (boards is None or board in boards)
    ]
    return statistics.fmean(shares) if shares else float("nan")


def row(label, cases, t, reference, boards=None):
    ref = mean_share(cases, reference, boards)
    local = mean_share(cases, "camdnn-local", boards)
    return (
        f"| {label} ({t['cases']}) | {ref:.4f} ({local:.4f}) | {t['wtl']} | "
        f"{t['under']} (worst {t['worst']}) | {t['median']} | {t['hindsight']} | "
        f"{t['ceiling']} | {t['lost']} / {t['lost_under']}{t['lost_worst']} |"
    )


def label_of(cases):
    seeds = sorted(int(b[4:]) for b, _, _ in cases if b.startswith("gen-"))
    if not seeds:
        return "rb5"
    return f"gen-{seeds[0]}..gen-{seeds[-1]}" + (" and rb5" if any(b == "rb5" for b, _, _ in cases) else "")


def main(paths):
    if not paths:
        sys.exit(__doc__)
    print(
        "| boards (cases) | mean on time (camdnn-local's) | W/T/L against camdnn-local | "
        f"under {FLOOR}x of camdnn-local | median speedup (target 1.10x) | "
        "hindsight at every baseline's share | ceiling: any schedule | "
        f"lost to some baseline / under {FLOOR}x of one |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rb5 = None
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        cases = case_lines(text)
        if not cases:
            sys.exit(f"{path}: no case lines (run camdnnd suite with --cases)")
        t = tally(text, "camdnn-greedy")
        if t is None:
            sys.exit(f"{path}: no camdnn-greedy tally")
        print(row(f"`camdnn-greedy`, {label_of(cases)}", cases, t, "camdnn-greedy"))
        if rb5 is None and any(b == "rb5" for b, _, _ in cases):
            rb5 = (cases, tally(text, "camdnn"))
    if rb5 and rb5[1]:
        print(row("`camdnn` with its learned policy, rb5", rb5[0], rb5[1], "camdnn", {"rb5"}))


if __name__ == "__main__":
    main(sys.argv[1:])
