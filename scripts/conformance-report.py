#!/usr/bin/env python3
"""Per-SIG counts of a conformance run, as the tables of CONFORMANCE.md.

usage: scripts/conformance-report.py RUN_DIR [RUN_DIR...]

RUN_DIR is a run of ../shared/conformance/run.sh (its parallel/ and serial/
junit.xml). Only specs named [Conformance] count. A spec seen in several
reports counts once, by its most telling state (a run beats a skip), and a
later RUN_DIR's result for a spec replaces an earlier one's: pass the full
run first, then any focused re-runs, and say so where the tables are used.
Prints markdown: one row per SIG, then every spec that did not pass, with
its first failure line, grouped by SIG.
"""
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

RANK = {"passed": 3, "failed": 3, "interrupted": 2, "skipped": 1, "notrun": 0}


def state_of(tc):
    status = (tc.get("status") or "").lower()
    skip = tc.find("skipped")
    if status in ("failed", "panicked", "timedout", "aborted"):
        return "failed"
    if status == "interrupted":
        return "interrupted"
    if status == "passed":
        return "passed"
    if status in ("skipped", "pending"):
        msg = (skip.get("message") if skip is not None else "") or ""
        return "notrun" if msg.strip() in ("", "skipped") else "skipped"
    if tc.find("failure") is not None or tc.find("error") is not None:
        return "failed"
    return "skipped" if skip is not None else "passed"


def first_line(tc):
    for tag in ("failure", "error", "skipped"):
        el = tc.find(tag)
        if el is None:
            continue
        for text in (el.get("message"), el.text):
            for line in (text or "").splitlines():
                line = re.sub(r"^\[(FAILED|SKIPPED)\]\s*", "", line.strip())
                if line:
                    return line[:240]
    return ""


def spec_name(tc):
    # ginkgo's JUnit name ends with the labels list "[sig-x, Conformance]".
    name = re.sub(r"^\[It\]\s*", "", tc.get("name") or "")
    return re.sub(r"\s*\[[^\[\]]*(, [^\[\]]*)+\]$", "", name).strip()


def main(runs):
    results = {}
    for run in runs:
        seen = {}
        for p in ("parallel", "serial"):
            try:
                root = ET.parse(f"{run}/{p}/junit.xml").getroot()
            except (OSError, ET.ParseError):
                continue
            for tc in root.iter("testcase"):
                name = spec_name(tc)
                if "[Conformance]" not in name:
                    continue
                st = state_of(tc)
                if name not in seen or RANK[st] > RANK[seen[name][0]]:
                    seen[name] = (st, first_line(tc))
        for name, res in seen.items():
            if res[0] != "notrun" or name not in results:
                results[name] = res
    sigs = defaultdict(lambda: defaultdict(int))
    for name, (st, _) in results.items():
        m = re.match(r"\[(sig-[a-z-]+)\]", name)
        sigs[m.group(1) if m else "(none)"][st] += 1
    cols = ["passed", "failed", "skipped", "interrupted", "notrun"]
    print("| SIG | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    total = defaultdict(int)
    for sig in sorted(sigs):
        print(f"| {sig} | " + " | ".join(str(sigs[sig][c]) for c in cols) + " |")
        for c in cols:
            total[c] += sigs[sig][c]
    print("| **all** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    print()
    for name in sorted(results):
        st, line = results[name]
        if st != "passed":
            shown = line and line != "skipped"
            print(f"- {st}: {name}" + (f"\n  - `{line}`" if shown else ""))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
