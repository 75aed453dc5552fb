#!/usr/bin/env python3
"""A decode layer's stages as a timeline, from `spindle trace export --csv` rows.

For each stage of a layer (in the order their last task ends), each time measured from the end
of the stage before it (the previous layer's last stage for the first): its first task's start,
its median task's start and end, its last task's end; its tasks' median busy time and their
median wait (claim to start). Medians over the steps after --skip-steps and over the layers
away from the ends (the first and last min(4, L/4)). Where `trace_stages.py` says how long each
stage holds the step, this says how soon its tasks start after their dependency ends (the hop)
and how their ends spread (the tail). Standard library only.

In a trace over several devices (`--devices`), one device's tasks: --device (default 0), since
each device runs its own copy of the step, on its own clock on GPUs.

    python3 scripts/trace_timeline.py tasks.csv [--skip-steps N] [--device D]
"""
import argparse
import csv
import re
import statistics
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="the CSV of `spindle trace export --csv`")
    ap.add_argument("--skip-steps", type=int, default=2, help="leading steps left out (warm-up; default 2)")
    ap.add_argument("--device", type=int, default=0, help="the device whose tasks count (default 0)")
    args = ap.parse_args()
    devices = set()

    runs = defaultdict(list)  # (step, layer, stage kind) -> [(start, end, wait)]
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            devices.add(int(row.get("device", 0)))
            if int(row.get("device", 0)) != args.device:
                continue
            m = re.match(r"L(\d+)\.(.*)", row["stage"])
            if int(row["step"]) < args.skip_steps or not m:
                continue
            runs[(int(row["step"]), int(m.group(1)), m.group(2))].append(
                (int(row["start_ns"]), int(row["end_ns"]), int(row["wait_ns"])))
    if args.device not in devices:
        raise SystemExit(f"trace_timeline: no task of device {args.device} (the trace has devices {sorted(devices)})")
    if not runs:
        raise SystemExit(f"trace_timeline: no layer stage left after skipping {args.skip_steps} steps")
    layers = sorted({layer for _, layer, _ in runs})
    margin = max(1, min(4, len(layers) // 4))
    by_layer = defaultdict(list)
    for (step, layer, kind), tasks in runs.items():
        by_layer[(step, layer)].append((max(e for _, e, _ in tasks), kind, tasks))

    stats = defaultdict(lambda: defaultdict(list))
    order = defaultdict(list)
    for (step, layer), stages in by_layer.items():
        previous = by_layer.get((step, layer - 1))
        if layer < layers[0] + margin or layer > layers[-1] - margin or not previous:
            continue
        prev_end = max(end for end, _, _ in previous)
        for index, (last_end, kind, tasks) in enumerate(sorted(stages)):
            starts = sorted(s for s, _, _ in tasks)
            ends = sorted(e for _, e, _ in tasks)
            s = stats[kind]
            order[kind].append(index)
            s["tasks"].append(len(tasks))
            s["first start"].append((starts[0] - prev_end) / 1e3)
            s["median start"].append((statistics.median(starts) - prev_end) / 1e3)
            s["median end"].append((statistics.median(ends) - prev_end) / 1e3)
            s["last end"].append((ends[-1] - prev_end) / 1e3)
            s["busy"].append(statistics.median(e - b for b, e, _ in tasks) / 1e3)
            s["wait"].append(statistics.median(w for _, _, w in tasks) / 1e3)
            prev_end = last_end
    if not stats:
        raise SystemExit("trace_timeline: too few layers for a timeline")

    if len(devices) > 1:
        print(f"device {args.device} of {len(devices)}")
    columns = ["tasks", "first start", "median start", "busy", "median end", "last end", "wait"]
    print(f"{'stage':22s}" + "".join(f"{c:>13s}" for c in columns) + "   (us, from the stage before's last end)")
    total = 0.0
    for kind in sorted(stats, key=lambda k: statistics.median(order[k])):
        s = stats[kind]
        total += statistics.median(s["last end"])
        print(f"{kind:22s}" + "".join(f"{statistics.median(s[c]):13.2f}" for c in columns))
    print(f"a layer: {total:.2f} us (the stages' last ends, summed)")


if __name__ == "__main__":
    main()
