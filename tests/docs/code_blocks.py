"""The fenced code blocks of the docs (docs/pages/**/*.md) and the README, and what each command in them is.

Every block says what it is by its language: `bash` (commands, one a line), `yaml` with a title (a config when the
title is reportgen.yaml or another *.yaml a command names, else the file the title names), `python`, `text` (output,
listings). tests/docs/test_code_blocks.py checks each kind by running it or, where a command cannot run here (a
recipe's four-minute training, a cluster's addresses), by checking what it names exists.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "pages"
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
KINDS = ("bash", "yaml", "python", "text")
# A word in capitals that stands for the reader's own value (ray start --address=HEAD_IP:6379).
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    kind: str
    title: str | None
    body: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def markdown_files() -> list[Path]:
    return sorted(PAGES.rglob("*.md")) + [ROOT / "README.md"]


def blocks(paths: list[Path] | None = None) -> list[Block]:
    found = []
    for path in paths or markdown_files():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            title = TITLE.search(match.group(2))
            found.append(Block(path, text.count("\n", 0, match.start()) + 1, match.group(1),
                               title.group(1) if title else None, match.group(3)))
    return found


def commands(block: Block) -> list[list[str]]:
    """Each command of a bash block as its words (comments dropped, `a && b` as two commands)."""
    found = []
    for line in block.body.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            found.append(words[:cut])
            words = words[cut + 1:]
    return found


def program(words: list[str]) -> list[str]:
    """The command without leading VAR=value settings (OMP_NUM_THREADS=2 python ...)."""
    index = 0
    while index < len(words) and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[index]):
        index += 1
    return words[index:]
