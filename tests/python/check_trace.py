"""Check a `stoke train|bench --trace` file: it parses as Chrome trace JSON;
on every thread the complete (X) spans nest; every flow has its start and
its finish, in time order; async reads begin before they end; every stage
named on the command line appears; each step's phases lie inside a step on
the same thread; with --steps N, exactly N steps were recorded. Prints a
summary of where the time went (for the closing notes of issue 15).

usage: check_trace.py FILE [--names a,b,c] [--steps N] [--summary]
"""
import argparse
import collections
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--names", default="")
ap.add_argument("--steps", type=int)
ap.add_argument("--summary", action="store_true")
args = ap.parse_args()
problems = []
with open(args.file) as f:
    doc = json.load(f)
events = doc["traceEvents"]
EPS = 0.002  # µs: timestamps are written with 3 decimals

# spans nest per thread
by_tid = collections.defaultdict(list)
for e in events:
    if e["ph"] == "X":
        by_tid[e["tid"]].append(e)
for tid, spans in by_tid.items():
    spans.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in spans:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS:
            stack.pop()
        if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
            problems.append(f"thread {tid}: {e['name']} at {e['ts']} overlaps {stack[-1]['name']} "
                            f"at {stack[-1]['ts']} without nesting")
            break
        stack.append(e)

# flows: both ends, start first
flows = collections.defaultdict(dict)
for e in events:
    if e["ph"] in "stf":
        flows[e["id"]][e["ph"]] = e["ts"]
for fid, ends in flows.items():
    if "s" not in ends or "f" not in ends:
        problems.append(f"flow {fid} has only {sorted(ends)}")
    elif ends["s"] > ends["f"] + EPS:
        problems.append(f"flow {fid} finishes before it starts")

# async intervals: begin before end
open_async = {}
for e in sorted((e for e in events if e["ph"] in "be"), key=lambda e: e["ts"]):
    key = (e["name"], e["id"])
    if e["ph"] == "b":
        open_async[key] = e["ts"]
    elif key in open_async:
        del open_async[key]
    else:
        problems.append(f"async {key} ends without a begin")

# names
present = {e.get("name") for e in events}
for n in filter(None, args.names.split(",")):
    if n not in present:
        problems.append(f"no event named {n!r}")

# phases inside steps
steps = [e for e in events if e["ph"] == "X" and e["name"] == "step"]
for e in events:
    if e["ph"] == "X" and e["name"] in ("forward", "backward", "optimizer"):
        if not any(s["tid"] == e["tid"] and s["ts"] - EPS <= e["ts"] and
                   e["ts"] + e["dur"] <= s["ts"] + s["dur"] + EPS for s in steps):
            problems.append(f"{e['name']} at {e['ts']} is not inside a step")
            break
if args.steps is not None and len(steps) != args.steps:
    problems.append(f"{len(steps)} steps recorded, wanted {args.steps}")

for p in problems[:20]:
    print("check_trace:", p)
print(f"check_trace: {len(events)} events, {len(by_tid)} threads with spans, {len(flows)} flows, "
      f"{len(steps)} steps: " + ("ok" if not problems else f"{len(problems)} problem(s)"))

if args.summary and steps:
    # where a step's time goes, and how busy the loader's workers were
    t0 = min(s["ts"] for s in steps)
    t1 = max(s["ts"] + s["dur"] for s in steps)
    total = sum(s["dur"] for s in steps)
    per = collections.Counter()
    for e in events:
        if e["ph"] == "X" and e["name"] in ("forward", "backward", "optimizer", "wait for batch",
                                              "gradient all-reduce wait"):
            if t0 <= e["ts"] <= t1:
                per[e["name"]] += e["dur"]
    print(f"summary: {len(steps)} steps, mean step {total / len(steps) / 1e3:.2f} ms")
    for k in ("forward", "backward", "optimizer", "gradient all-reduce wait"):
        if per[k]:
            print(f"summary:   {k}: {100 * per[k] / total:.1f}% of the steps' time")
    wall = t1 - t0
    print(f"summary:   consumer waited for batches {per['wait for batch'] / 1e3:.1f} ms "
          f"({100 * per['wait for batch'] / wall:.1f}% of the {wall / 1e3:.0f} ms between the first "
          f"step's start and the last one's end)")
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e.get("tid")}
    for tid in sorted(by_tid):
        n = names.get(tid, "")
        if "worker" not in n:
            continue
        busy = sum(e["dur"] for e in by_tid[tid] if e["name"] == "chunk" and t0 <= e["ts"] <= t1)
        dec = sum(e["dur"] for e in by_tid[tid] if e["name"] == "decode" and t0 <= e["ts"] <= t1)
        aug = sum(e["dur"] for e in by_tid[tid] if e["name"] == "augment" and t0 <= e["ts"] <= t1)
        print(f"summary:   {n}: busy {100 * busy / wall:.1f}% (augment incl. decode "
              f"{100 * aug / wall:.1f}%, decode {100 * dec / wall:.1f}%)")
sys.exit(1 if problems else 0)
