"""Cold `--reproducible` builds, byte for byte, before and after a change that should change no output.

Why: a refactor (issue 45 moved what differs per kind of model into reportgen/kinds/) must leave every site
as it was. Each config below is built cold (an empty cache, no output) with the reportgen of `--baseline`
(a commit, extracted with `git archive`; the repository is not changed) and with the working tree, the
same Python and packages (`PYTHONPATH` picks the code), and the two sites are compared file by file.

The configs cover the three kinds of model and the options that take a per-kind path:
- `default`: no config at all, the embedded all-MiniLM-L6-v2 with its similarity ablation;
- `encoder`: a tiny BERT with a corpus, word-level statistics, the live page and a compared second model;
- `decoder-gpt2`, `decoder-llama`: tiny decoders with a corpus and a causal-LM ablation;
- `encoder-decoder-bart`, `encoder-decoder-t5`: tiny encoder-decoders with a sequence-to-sequence ablation.
The tiny models are built once (tests/*_checkpoints.py, seeded) and read by both builds.

A baseline's sites are kept in `--work` under its commit id and reused by the next run.
Usage: python benchmarks/identical_builds.py --baseline REV [--work DIR] [--only NAME ...] [--baseline-only]
Exit status 1 when any site differs (each differing file is named).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

EXAMPLES = [{"name": "a repeat", "text": "the cat sat on the mat. the cat sat on the mat."},
            {"text": "a dog was in the garden."}]
PAIRS = [{"name": "a cat", "text": "the cat sat on the mat.", "target": "le chat est assis sur le tapis."},
         {"text": "a dog was in the garden.", "target": "un chien était dans le jardin."}]
TEXTS = ["the cat sat on the mat.", "a dog was in the garden.", "the store was closed on monday.",
         "i bought fresh strawberries at the store."]
SMALL = {"seeds": [0], "fractions": [0.0, 0.5], "bootstrap_samples": 100, "permutations": 100}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="commit or tag whose sites are the reference")
    parser.add_argument("--work", type=Path, default=Path("/tmp/identical-builds"),
                        help="where models, projects and the baseline's sites are kept (default: %(default)s)")
    parser.add_argument("--only", nargs="*", help="build only these configs")
    parser.add_argument("--baseline-only", action="store_true", help="build (and keep) the baseline's sites only")
    return parser.parse_args()


def extract(revision: str, root: Path) -> tuple[str, Path]:
    """(short commit id, the folder holding that commit's files)."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{revision}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()[:12]
    code = root / f"code-{commit}"
    if not code.exists():
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(code, filter="data")
    return commit, code


def models(root: Path) -> dict[str, Path]:
    """The tiny checkpoints, made once: the same files for both builds."""
    from tests.decoder_checkpoints import make_decoder
    from tests.helpers import make_char_bert, make_tiny_bert
    from tests.seq2seq_checkpoints import make_encoder_decoder

    # a character-level BERT for the encoder: the live page runs it in the browser (ids 0..n-1, no gaps)
    makers = {"bert": lambda path: make_char_bert(path, TEXTS), "bert-2": lambda path: make_tiny_bert(path, seed=1),
              "gpt2": lambda path: make_decoder("gpt2", path, causal_lm=True),
              "llama": lambda path: make_decoder("llama", path, causal_lm=True),
              "bart": lambda path: make_encoder_decoder("bart", path),
              "t5": lambda path: make_encoder_decoder("t5", path)}
    out = {}
    for name, make in makers.items():
        out[name] = root / "models" / name
        if not (out[name] / "config.json").exists():
            make(out[name])
    return out


def configs(paths: dict[str, Path], data: Path) -> dict[str, dict | None]:
    """name -> the config written as the project's reportgen.yaml (None: no config file at all)."""
    corpus = {"corpus": [{"path": str(data / "texts.txt")}]}
    experiments = {"baseline": True, "single_heads": True, "random_fraction": False, "layer_halves": True,
                   "whole_layers": True, "importance": False}
    out: dict[str, dict | None] = {"default": None, "encoder": {
        "model": str(paths["bert"]), "device": "cpu", "max_length": 64,
        "examples": [{"text": "the cat sat on the mat."},
                     {"text": "i went to the store.", "pair": "at the store, i bought fresh strawberries."}],
        "patterns": {**corpus, "word_level": True}, "views": {"live": True},
        "compare": {"model": str(paths["bert-2"]), "name": "second"},
        "ablation": {**SMALL, "limit": 30}}}
    for family in ("gpt2", "llama"):
        out[f"decoder-{family}"] = {
            "model": str(paths[family]), "device": "cpu", "max_length": 128, "examples": EXAMPLES,
            "patterns": corpus, "ablation": {**SMALL, "task": "causal_lm", "data": str(data / "texts.txt"),
                                             "experiments": experiments}}
    for family in ("bart", "t5"):
        out[f"encoder-decoder-{family}"] = {
            "model": str(paths[family]), "device": "cpu", "max_length": 64, "examples": PAIRS,
            "ablation": {**SMALL, "task": "seq2seq", "data": str(data / "pairs.jsonl"), "max_length": 64,
                         "experiments": experiments}}
    return out


def build(code: Path, project: Path, config: dict | None) -> Path:
    """A cold `reportgen build --reproducible` of `config` with the reportgen in `code`; its site."""
    project.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (project / "reportgen.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run([sys.executable, "-m", "reportgen", "build", "--reproducible"], cwd=project, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{project}: build with {code} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return project / "site"


def digests(site: Path) -> dict[str, str]:
    return {str(path.relative_to(site)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(site.rglob("*")) if path.is_file()}


def compare(before: Path, after: Path) -> list[str]:
    """The files that are not the same bytes in both sites (missing on either side included)."""
    old, new = digests(before), digests(after)
    return sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))


def main() -> int:
    args = arguments()
    root = args.work.resolve()
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    data.mkdir(exist_ok=True)
    (data / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    from tests.seq2seq_checkpoints import write_pairs

    write_pairs(data / "pairs.jsonl")
    commit, baseline = extract(args.baseline, root)
    wanted = configs(models(root), data)
    failed = 0
    for name, config in wanted.items():
        if args.only and name not in args.only:
            continue
        reference = root / "sites" / commit / name
        if not (reference / "site" / "report.json").exists():
            start = time.perf_counter()
            build(baseline, reference, config)
            print(f"{name}: baseline {commit} built in {time.perf_counter() - start:.0f} s", flush=True)
        if args.baseline_only:
            continue
        current = root / "sites" / "working-tree" / name
        if current.exists():
            subprocess.run(["rm", "-rf", str(current)], check=True)
        start = time.perf_counter()
        build(REPO, current, config)
        files = len(digests(current / "site"))
        differ = compare(reference / "site", current / "site")
        failed += bool(differ)
        print(f"{name}: working tree built in {time.perf_counter() - start:.0f} s; {files} files, "
              f"{'identical' if not differ else f'{len(differ)} differ: ' + ', '.join(differ[:12])}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
