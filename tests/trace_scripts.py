#!/usr/bin/env python3
"""scripts/trace_stages.py and trace_timeline.py on a trace over two devices: each counts the
tasks of the device --device names (a stage's tasks those of one device, not both), names it
in its header, and refuses a device the trace does not have.

    python3 tests/trace_scripts.py SPINDLE SCRIPTS_DIR
"""
import os
import subprocess
import sys
import tempfile


def run(args, ok=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if (r.returncode == 0) != ok:
        raise SystemExit(f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def main():
    spindle, scripts = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "t.csv")
        run([spindle, "trace", "export", "--model", "synthetic:tiny", "-e", "sequential", "--devices", "2",
             "-n", "6", "-o", os.path.join(tmp, "t.json"), "--csv", csv, "--copy-gib", "0.01"])
        for device in ("0", "1"):
            stages = run([sys.executable, os.path.join(scripts, "trace_stages.py"), csv, "--device", device])
            if f"device {device} of 2" not in stages:
                raise SystemExit(f"trace_stages.py --device {device} does not name the device:\n{stages}")
            # The sampler: one task a step on each device, so one when a device's tasks alone count.
            sample = [line.split() for line in stages.splitlines() if line.startswith("sample ")]
            if len(sample) != 1 or sample[0][-1] != "1":
                raise SystemExit(f"trace_stages.py --device {device}: the sample stage is not one task:\n{stages}")
        refused = run([sys.executable, os.path.join(scripts, "trace_stages.py"), csv, "--device", "2"], ok=False)
        if "no task of device 2 (the trace has devices [0, 1])" not in refused:
            raise SystemExit(f"trace_stages.py --device 2 is not refused naming the devices:\n{refused}")
        refused = run([sys.executable, os.path.join(scripts, "trace_timeline.py"), csv, "--device", "2"], ok=False)
        if "no task of device 2 (the trace has devices [0, 1])" not in refused:
            raise SystemExit(f"trace_timeline.py --device 2 is not refused naming the devices:\n{refused}")
    print("trace scripts: each device's tasks alone")


if __name__ == "__main__":
    main()
