"""Write docs/benchmarks.md from the benchmarks' own output: each bench named on the command line
is run here, and its command, the date, the machine and everything it printed go into the file
verbatim. No figure in the docs is typed by hand.

    python bench/report.py                      # the default set (REPORTED)
    python bench/report.py bench_attention.py   # only these (the others' sections are kept)
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks.md"
REPORTED = ("bench_parity.py", "bench_attention.py")  # quick enough to rerun whenever the docs are written
HEADER = (
    "# Benchmarks\n\n"
    "Written by `python bench/report.py` from the benchmarks' own output; each section says the command, "
    "when and where it ran. Every other bench in `bench/` prints its figures when run (see its docstring).\n"
)


def machine() -> str:
    """The machine in one line: OS, processor, cores, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )


def section(script: str) -> str:
    """Run bench/<script> and return its section of the report."""
    command = [sys.executable, str(ROOT / "bench" / script)]
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    output = (
        done.stdout + ("" if done.returncode == 0 else f"\n(exit {done.returncode})\n{done.stderr[-2000:]}")
    ).rstrip()
    return f"## {script}\n\n`python bench/{script}`, {started}, {machine()}\n\n```\n{output}\n```\n"


def main(scripts: list[str]) -> None:
    kept: dict[str, str] = {}
    if OUT.exists():  # the sections of benches not rerun now stay as they were
        for part in re.split(r"(?m)^(?=## )", OUT.read_text()):
            if part.startswith("## "):
                kept[part.split("\n", 1)[0][3:].strip()] = part.rstrip() + "\n"
    for script in scripts:
        print(f"running {script}...", flush=True)
        kept[script] = section(script)
    OUT.write_text(HEADER + "\n" + "\n".join(kept[s] for s in sorted(kept, key=lambda s: (s not in REPORTED, s))))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(REPORTED))
