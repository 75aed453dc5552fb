#!/usr/bin/env python3
"""Where a decode step's time goes, stage by stage, from `spindle trace export --csv` rows.

For each step, the stages in the order their last task ends; a stage's share of the critical
path is the time from the previous stage's last end to its own. Stages of the same kind (the
name without its layer tag, e.g. `router` for `L3.router`) are summarised over layers and
steps: the median share, the median span (first start to last end), and the tasks' mean busy
and waiting time. Standard library only, so it runs wherever the trace was taken.

In a trace over several devices (`--devices`), one device's tasks: --device (default 0), since
each device runs its own copy of the step, on its own clock on GPUs.

    python3 scripts/trace_stages.py tasks.csv [--skip-steps N] [--device D]
"""
import argparse
import csv
import re
import statistics
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="the CSV of `spindle trace export --csv`")
    ap.add_argument("--skip-steps", type=int, default=1, help="leading steps left out (warm-up; default 1)")
    ap.add_argument("--device", type=int, default=0, help="the device whose tasks count (default 0)")
    args = ap.parse_args()
    devices = set()

    stages = defaultdict(lambda: {"start": None, "end": 0, "busy": [], "wait": []})
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            devices.add(int(row.get("device", 0)))
            if int(row.get("device", 0)) != args.device:
                continue
            step = int(row["step"])
            s = stages[(step, row["stage"])]
            start, end = int(row["start_ns"]), int(row["end_ns"])
            s["start"] = start if s["start"] is None else min(s["start"], start)
            s["end"] = max(s["end"], end)
            s["busy"].append(end - start)
            s["wait"].append(int(row["wait_ns"]))

    if args.device not in devices:
        raise SystemExit(f"trace_stages: no task of device {args.device} (the trace has devices {sorted(devices)})")
    steps = sorted({step for step, _ in stages})[args.skip_steps:]
    if not steps:
        raise SystemExit(f"trace_stages: no step left after skipping {args.skip_steps}")
    kinds = defaultdict(lambda: {"share": [], "span": [], "busy": [], "wait": [], "tasks": 0})
    step_ns = []
    for step in steps:
        ordered = sorted(((name, s) for (st, name), s in stages.items() if st == step), key=lambda x: x[1]["end"])
        prev_end = ordered[0][1]["start"]
        step_ns.append(ordered[-1][1]["end"] - prev_end)
        for name, s in ordered:
            k = kinds[re.sub(r"^L\d+\.", "", name)]
            k["share"].append(s["end"] - prev_end)
            k["span"].append(s["end"] - s["start"])
            k["busy"] += s["busy"]
            k["wait"] += s["wait"]
            k["tasks"] += len(s["busy"])
            prev_end = s["end"]

    total = statistics.median(step_ns)
    if len(devices) > 1:
        print(f"device {args.device} of {len(devices)}")
    print(f"steps {len(steps)}, median step {total / 1e3:.1f} us (first task's start to last task's end)")
    print(f"{'stage':<24}{'per step':>9}{'share us':>10}{'sum us':>9}{'% step':>8}{'span us':>9}{'busy us':>9}"
          f"{'wait us':>9}{'tasks':>7}")
    per_step = len(steps)
    for name, k in sorted(kinds.items(), key=lambda x: -sum(x[1]["share"])):
        n = len(k["share"]) // per_step
        summed = sum(k["share"]) / per_step
        print(f"{name:<24}{n:>9}{statistics.median(k['share']) / 1e3:>10.2f}{summed / 1e3:>9.1f}"
              f"{100 * summed / total:>8.1f}{statistics.median(k['span']) / 1e3:>9.2f}"
              f"{statistics.mean(k['busy']) / 1e3:>9.2f}{statistics.mean(k['wait']) / 1e3:>9.2f}"
              f"{k['tasks'] // per_step // max(n, 1):>7}")


if __name__ == "__main__":
    main()
