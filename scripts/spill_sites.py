#!/usr/bin/env python3
"""Where a persistent kernel build spills registers, tile by tile.

Compiles one build's translation unit (megakernel/persistent_kernel_BUILD.cu) for sm_90 with
line info, prints ptxas's stack and spill summary for the 1-block-an-SM kernel, then counts
the local-memory loads and stores (LDL, STL) in its SASS by the tile they are inlined into
(the frame called from megakernel/run_device_task.cuh, named by that file's line), or by the
innermost source line outside any tile (the dispatch, or a function not inlined). Local memory
matters more here than in most kernels: every acquire load of the dispatch empties it from L1.

nvdisasm is not part of every CUDA install; the PyPI wheel nvidia-cuda-nvdisasm has one:
  pip download --no-deps nvidia-cuda-nvdisasm && python3 -m zipfile -e nvidia_cuda_nvdisasm-*.whl nvd/

  scripts/spill_sites.py two_hop --nvdisasm nvd/nvidia/cu13/bin/nvdisasm [--frames 3]

With --check it prints ptxas's summary alone and fails when that kernel has a stack frame or
spills; with --check STACK/STORES/LOADS, when any of them passes that many bytes. CTest runs it
on the plain and MoE builds, which have neither, and on the two-hop build at its present
bytes, so that a change that makes a build spill (more) fails CI (a spill in a build costs
every task it runs: docs/isa.md).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANNOTATION = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')


def compile_build(build, nvcc, cubin):
    """ptxas's summary line of the build's 1-block kernel, printed and returned."""
    source = os.path.join(ROOT, "megakernel", f"persistent_kernel_{build}.cu")
    if not os.path.exists(source):
        sys.exit(f"spill_sites: no build '{build}' ({source} does not exist)")
    cmd = [nvcc, "-DSPINDLE_HAVE_CUDA", f"-I{ROOT}", "-O3", "-DNDEBUG", "-arch=sm_90", "-Xcompiler=-ffp-contract=off",
           "--fmad=false", "-std=c++20", "-lineinfo", "-Xptxas", "-v", "-cubin", "-o", cubin, source]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"spill_sites: nvcc failed:\n{done.stderr}")
    lines = done.stderr.splitlines()
    for i, line in enumerate(lines):  # the summary follows the kernel's "Function properties" line
        if "Function properties for" in line and "persistent_kernelILi1" in line and i + 1 < len(lines):
            print("ptxas:", lines[i + 1].strip())
            return lines[i + 1].strip()
    sys.exit("spill_sites: ptxas printed no summary for the 1-block persistent kernel")


def spill_sites(sass_lines, frames=0):
    """(tile or dispatch site, LDL or STL) -> count, from nvdisasm -gi output; with frames > 0,
    each site also names the innermost `frames` source lines of its inline chain."""
    counts = collections.Counter()
    chain, in_annotation = [], False
    for line in sass_lines:
        m = ANNOTATION.search(line)
        if m:
            if not in_annotation:
                chain = []
            chain.append((os.path.basename(m.group(1)), m.group(2), os.path.basename(m.group(3) or ""), m.group(4)))
            in_annotation = True
            continue
        in_annotation = False
        op = re.search(r"\b(LDL|STL)\b", line)
        if not op:
            continue
        tile = next((f for f in chain if f[2] == "run_device_task.cuh"), None)
        site = (f"tile at run_device_task.cuh:{tile[3]} ({tile[0]}:{tile[1]})" if tile
                else f"outside the tiles {chain[0][0]}:{chain[0][1]}" if chain else "unknown")
        if frames and chain:
            site += " at " + " < ".join(f"{f[0]}:{f[1]}" for f in chain[:frames])
        counts[(site, op.group(1))] += 1
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", help="plain, moe or two_hop (megakernel/persistent_kernel_BUILD.cu)")
    parser.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    parser.add_argument("--nvdisasm", default="nvdisasm")
    parser.add_argument("--check", nargs="?", const="0/0/0", metavar="STACK/STORES/LOADS",
                        help="fail when the kernel's stack frame, spill stores or spill loads pass these bytes "
                             "(none given: any)")
    parser.add_argument("--frames", type=int, default=0, metavar="N",
                        help="also name each site's innermost N source lines (where in a tile its reloads are)")
    args = parser.parse_args()
    budget = (args.check or "0/0/0").split("/")
    if len(budget) != 3 or not all(b.isdigit() for b in budget):
        sys.exit(f"spill_sites: --check takes STACK/STORES/LOADS in bytes (e.g. 0/0/0), not '{args.check}'")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "kernel.cubin")
        summary = compile_build(args.build, args.nvcc, cubin)
        if args.check:
            sizes = [int(n) for n in re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", summary)]
            if len(sizes) != 3:
                sys.exit(f"spill_sites: cannot read ptxas's summary: {summary}")
            if any(size > int(b) for size, b in zip(sizes, budget)):
                sys.exit(f"spill_sites: the {args.build} build's persistent kernel spills more than {args.check} bytes "
                         f"(stack/stores/loads): {summary}; `scripts/spill_sites.py {args.build} --nvdisasm PATH` says where")
            return
        try:
            sass = subprocess.run([args.nvdisasm, "-gi", "-c", cubin], capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"spill_sites: nvdisasm failed ({e}); see --help for where to get it")
    counts = spill_sites(sass.stdout.splitlines(), args.frames)
    sites = sorted({s for s, _ in counts}, key=lambda s: -(counts[(s, "LDL")] + counts[(s, "STL")]))
    print(f"{'LDL':>5} {'STL':>5}  site")
    for s in sites:
        print(f"{counts[(s, 'LDL')]:5d} {counts[(s, 'STL')]:5d}  {s}")
    if not sites:
        print("no local loads or stores")


if __name__ == "__main__":
    main()
