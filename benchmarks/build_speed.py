"""Cold and warm build times of the default site, per stage, beside the previous release in one run.

Why side by side: this machine is shared and its load changes by the minute, so a figure from
another day says little. The previous release (`--baseline`, a commit or tag, extracted with
`git archive` into a temp folder; the repository is not changed) and the working tree are built
in turns with the same Python and packages (`PYTHONPATH` picks the code), each in a fresh project
folder, and each round alternates which goes first:
- cold: an empty cache and no output;
- warm: the same build again, everything cached;
- retitled: the title changed (written into the project's reportgen.yaml), everything else cached.
Each time is the median over `--runs` rounds of the whole `reportgen build` process; "first site" is when
the cold build's first site was swapped in (since issue 32 a build writes a site before its ablation),
and every value of the two cold builds' report.json is compared (within 1e-6). The stages are
the manifest's `seconds` (model, patterns, ablation, ...); the site stage is timed around
`reportgen.site.writer.write_site` by the small driver below (the manifest is written inside the site,
before that stage ends), unless the manifest has it; "rest" is start-up and what lies between.

Usage: python benchmarks/build_speed.py [--baseline REV] [--runs 3] [--config FILE]
(`--config`: a config to build instead of the defaults; its paths must be absolute, since it is
copied into each temp project.)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BASELINE = "e239c898dde68402e44c46478c96f5abed4330d9"  # the last commit before issue 16's work
KINDS = ("cold", "warm", "retitled")
# Runs `reportgen build` as the command line does, timing the site stage from outside the code under test.
DRIVER = """
import json, os, sys, time
try:
    import reportgen.site.writer as site
    from reportgen.commands.cli import main
except ImportError:  # a baseline from before the stages became folders
    import reportgen.site as site
    from reportgen.cli import main
inner = site.write_site
writes = []  # (start, end) of each site write: a build since issue 32 writes a site before its ablation
def timed(*args, **kwargs):
    start = time.perf_counter()
    try:
        return inner(*args, **kwargs)
    finally:
        writes.append((start, time.perf_counter(), time.time()))
        with open(os.environ["BUILD_SPEED_SITE"], "w") as handle:
            json.dump({"site": sum(end - begin for begin, end, _ in writes), "writes": len(writes),
                       "first_site_at": writes[0][2], "module": site.__file__}, handle)
site.write_site = timed
sys.argv = ["reportgen", *sys.argv[1:]]
main()
"""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE,
                        help=f"commit or tag to compare with (default: {BASELINE[:12]})")
    parser.add_argument("--runs", type=int, default=3, help="rounds; each time is the median (default: 3)")
    parser.add_argument("--config", type=Path, help="config to build (default: the defaults, the embedded model)")
    return parser.parse_args()


def extract(revision: str, target: Path) -> str:
    """The baseline's files in `target` (git archive: nothing in the repository changes); its short id."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{revision}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return commit[:12]


def write_project(project: Path, config: dict, title: str | None = None) -> None:
    project.mkdir(parents=True, exist_ok=True)
    settings = {**config, **({"title": title} if title else {})}
    if settings:
        (project / "reportgen.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")


def timed_build(code: Path, project: Path) -> dict[str, float]:
    """One `reportgen build` of `project` with the reportgen in `code`: total and per-stage seconds."""
    site_times = project / "site-stage.json"
    env = {**os.environ, "PYTHONPATH": str(code), "BUILD_SPEED_SITE": str(site_times)}
    start, wall = time.perf_counter(), time.time()
    done = subprocess.run([sys.executable, "-c", DRIVER, "build"], cwd=project, env=env,
                          capture_output=True, text=True, check=False)
    total = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"build with {code} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    measured = json.loads(site_times.read_text())
    if not Path(measured["module"]).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"the build ran {measured['module']}, not the code in {code}")
    seconds = json.loads((project / "site" / "manifest.json").read_text())["seconds"] or {}
    stages = {**seconds, "site": seconds.get("site", measured["site"])}
    # "first site": from the command's start until its first site was swapped in (the whole build for a
    # version that writes one site); "writes": how many sites it wrote. Neither is a stage of the total.
    return {"total": total, **stages, "rest": total - sum(stages.values()),
            "first site": measured["first_site_at"] - wall, "writes": measured["writes"]}


def numbers_differ(old, new, where: str = "report") -> list[tuple[str, float | str]]:
    """Where two report.json trees disagree: a number by more than 1e-6 (relative to its size when large), or
    any other value (a verdict: true/false, null) at all; text (a finding's wording) is not compared.
    Only what both hold is compared: keys a newer version
    added, the time of the build, the seconds, versions and the progress of a partial site are not."""
    skipped = {"built", "seconds", "versions", "experiments", "progress", "model_files"}
    if isinstance(old, dict) and isinstance(new, dict):
        return [item for key in old.keys() & new.keys() - skipped
                for item in numbers_differ(old[key], new[key], f"{where}.{key}")]
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [(where, f"length {len(old)} vs {len(new)}")]
        return [item for at, pair in enumerate(zip(old, new, strict=True))
                for item in numbers_differ(*pair, f"{where}[{at}]")]
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers) and not isinstance(old, bool):
        gap = abs(old - new)
        return [] if gap <= 1e-6 * max(1.0, abs(old)) else [(where, gap)]
    if isinstance(old, str) and isinstance(new, str):  # wording the pages changed since, not a number or verdict
        return []
    return [] if old == new else [(where, f"{old!r} vs {new!r}")]


def one_round(codes: dict[str, Path], work: Path, config: dict, first: int) -> dict[str, dict[str, dict]]:
    """Cold, warm and retitled builds of each version, in turns (`first` picks which starts)."""
    order = list(codes)[first:] + list(codes)[:first]
    times: dict[str, dict[str, dict]] = {kind: {} for kind in KINDS}
    for name in order:
        write_project(work / name, config)
    for kind in KINDS:
        for name in order:
            if kind == "retitled":
                write_project(work / name, config, title=f"Retitled at {time.time():.0f}")
            times[kind][name] = timed_build(codes[name], work / name)
            print(f"  {kind:8} {name}: {times[kind][name]['total']:.1f} s", file=sys.stderr, flush=True)
            if kind == "cold":
                times["reports"] = {**times.get("reports", {}), name: json.loads(
                    (work / name / "site" / "report.json").read_text(encoding="utf-8"))}
    return times


def report(rounds: list[dict], names: list[str]) -> str:
    """The table: per kind of build, the total and each stage, median over the rounds, and new/old."""
    rows = [f"{'':10}{'':10}" + "".join(f"{name:>12}" for name in names) + f"{'new/old':>10}"]
    for kind in KINDS:
        stages = list(dict.fromkeys(key for run in rounds for name in names for key in run[kind][name]))
        stages = (["total"] + [s for s in stages if s not in ("total", "rest", "first site", "writes")] + ["rest"]
                  + ["first site"])
        for index, stage in enumerate(stages):
            medians = [statistics.median(run[kind][name].get(stage, 0.0) for run in rounds) for name in names]
            ratio = f"{medians[-1] / medians[0]:10.2f}" if medians[0] >= 0.5 else f"{'-':>10}"  # not of noise
            rows.append(f"{kind if index == 0 else '':10}{stage:10}" + "".join(f"{m:10.1f} s" for m in medians)
                        + ratio)
        rows.append("")
    return "\n".join(rows)


def main() -> None:
    args = arguments()
    config = yaml.safe_load(args.config.read_text(encoding="utf-8")) if args.config else {}
    with tempfile.TemporaryDirectory(prefix="build-speed-") as temp:
        work = Path(temp)
        old = extract(args.baseline, work / "baseline")
        codes = {f"old {old[:7]}": work / "baseline", "new (tree)": REPO}
        rounds = []
        for index in range(args.runs):
            print(f"round {index + 1} of {args.runs}", file=sys.stderr, flush=True)
            rounds.append(one_round(codes, work / f"round-{index}", config, index % 2))
    what = f"config {args.config}" if args.config else "the default site (embedded model)"
    print(f"Build times of {what}: median of {args.runs} round(s), seconds (wall clock of `reportgen build`)")
    print(report(rounds, list(codes)))
    for kind in KINDS:
        totals = {name: [round(run[kind][name]["total"], 1) for run in rounds] for name in codes}
        print(f"{kind} totals per round: " + "; ".join(f"{name} {values}" for name, values in totals.items()))
    new = list(codes)[-1]
    shares = [run["cold"][new]["first site"] / run["cold"][new]["total"] for run in rounds]
    print(f"cold, new: first site after {statistics.median(shares):.0%} of the build's time (median; per round "
          f"{[f'{share:.0%}' for share in shares]}), {rounds[0]['cold'][new]['writes']} sites written")
    for index, run in enumerate(rounds):
        differ = numbers_differ(run["reports"][list(codes)[0]], run["reports"][new])
        print(f"round {index + 1}: report.json values new vs old: "
              + ("all within 1e-6, the same verdicts" if not differ else f"{len(differ)} differ, e.g. {differ[:5]}"))


if __name__ == "__main__":
    main()
