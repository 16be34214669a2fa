"""Every code block of the docs and the README is run or checked, so the docs cannot drift from the code
(tests/docs/code_blocks.py finds them):

- each block says what it is (bash, yaml with a title, python, text);
- each reportgen.yaml block loads through reportgen's own loader;
- each `pip install` is the README's install or an extra pyproject.toml declares;
- each `reportgen` command runs, in document order with the page's other commands and Python blocks, in a folder
  holding the files the docs name (./models/my-bert, my-gpt2 and my-bart: tiny random checkpoints; texts.txt,
  task.tsv, pairs.jsonl, my-config.yaml), and ends with exit 0; a command with a placeholder (HEAD_IP) or a recipe's
  trained model only uses options its command has;
- each other command names a script, test file or config that exists, with options the script defines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from docs.generate.cli_page import commands as cli_commands
from reportgen.config import load_config
from tests.docs.code_blocks import PLACEHOLDER, ROOT, Block, blocks, commands, markdown_files, program
from tests.helpers import SINGLE_HEADS_ABLATION, WarmCli, tiny_config

ALL = blocks()
README_COMMANDS = [block.body.strip() for block in blocks([ROOT / "README.md"])[:2]]


def _id(block: Block) -> str:
    return block.where


def _of(kind: str) -> list[Block]:
    return [block for block in ALL if block.kind == kind]


def test_every_block_says_what_it_is():
    assert len(ALL) > 20
    unnamed = [block.where for block in ALL if block.kind not in ("bash", "yaml", "python", "text")]
    untitled = [block.where for block in _of("yaml") if not block.title]
    assert not unnamed and not untitled, (unnamed, untitled)


@pytest.mark.parametrize("block", [b for b in _of("yaml") if b.title and b.title.endswith("reportgen.yaml")], ids=_id)
def test_config_blocks_load_through_the_loader(block, tmp_path):
    (tmp_path / "reportgen.yaml").write_text(block.body, encoding="utf-8")
    config = load_config(tmp_path / "reportgen.yaml")
    assert config.model  # loaded and validated: a wrong key or value raises ConfigError


def test_the_readme_and_the_docs_give_the_same_two_commands():
    first, second = README_COMMANDS
    assert first.startswith("pip install torch==2.13.0 && pip install . && reportgen build")
    assert "pytest" in second
    index = [block.body.strip() for block in blocks([ROOT / "docs/pages/index.md"]) if block.kind == "bash"]
    assert index[:2] == README_COMMANDS
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert second.split("&& ")[-1] in ci, "CI runs the README's second command"


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def _all_commands() -> list[tuple[Block, list[str]]]:
    return [(block, program(words)) for block in _of("bash") for words in commands(block)]


def test_install_commands_are_the_readmes_or_a_declared_extra():
    readme = {" ".join(words) for text in README_COMMANDS for words in commands(Block(ROOT, 0, "bash", None, text))}
    for block, words in _all_commands():
        if words[0] != "pip":
            continue
        extras = [re.fullmatch(r"reportgen\[(\w+)\]", word) for word in words[2:]]
        assert " ".join(words) in readme or (words[1] == "install" and all(extras) and
                                             {m.group(1) for m in extras} <= _extras()), block.where


def test_other_commands_name_what_exists():
    """python scripts, pytest files, mkdocs configs and ray options: what they name is there."""
    known = {"reportgen", "pip", "python", "ray", "mkdocs", "git"}
    for block, words in _all_commands():
        assert words[0] in known, f"{block.where}: no check for {words[0]!r}"
        if words[0] == "python" and words[1] == "-m" and words[2] == "pytest":
            for path in [word.split("::")[0] for word in words[3:] if word.startswith(("tests/", "benchmarks/"))]:
                assert (ROOT / path).exists(), f"{block.where}: {path}"
        elif words[0] == "python":
            script = ROOT / words[1]
            assert script.is_file(), f"{block.where}: {words[1]}"
            source = script.read_text(encoding="utf-8")
            for option in [word.split("=")[0] for word in words[2:] if word.startswith("--")]:
                assert f'"{option}"' in source, f"{block.where}: {words[1]} defines no {option}"
        elif words[0] == "mkdocs":
            assert (ROOT / words[words.index("-f") + 1]).is_file(), block.where
        elif words[0] == "ray":
            help_text = _ray_help(words[1])
            for option in [word.split("=")[0] for word in words[2:] if word.startswith("--")]:
                assert option in help_text, f"{block.where}: ray {words[1]} has no {option}"


def _ray_help(command: str) -> str:
    from click.testing import CliRunner
    from ray.scripts.scripts import cli

    return CliRunner().invoke(cli, [command, "--help"]).output


def _options(words: list[str]) -> set[str]:
    return {word.split("=")[0] for word in words if word.startswith("-")} - {"-"}


def test_commands_that_cannot_run_here_use_options_their_command_has():
    """A placeholder address, or a recipe whose model its own test trains (tests/recipes/)."""
    known = {name.split(" ", 1)[1]: command for name, command in cli_commands()}
    checked = 0
    for block, words in _all_commands():
        if words[0] != "reportgen" or not _not_here(words):
            continue
        name = " ".join(words[1:3]) if " ".join(words[1:3]) in known else words[1]
        options = {opt for param in known[name].params for opt in param.opts + getattr(param, "secondary_opts", [])}
        assert _options(words) <= options | {"--help"}, f"{block.where}: {sorted(_options(words) - options)}"
        for path in [word for word in words if word.startswith("recipes/")]:
            assert (ROOT / path.split("/model")[0]).exists(), f"{block.where}: {path}"
            if path.endswith(".yaml"):
                assert load_config(ROOT / path).model
        checked += 1
    assert checked, "the docs name a recipe's or a cluster's commands"


def _not_here(words: list[str]) -> bool:
    return any(PLACEHOLDER.search(word) or word.startswith("recipes/") for word in words)


# -- the commands and Python blocks that run here, page by page -------------------------------------------------
def _runnable(path: Path) -> list[tuple[Block, list[str] | None]]:
    """A page's reportgen commands and Python blocks in document order ((block, words), (block, None) for Python):
    not the README's install chains (CI runs them), nor what cannot run here (_not_here)."""
    readme = set(README_COMMANDS)
    found = []
    for block in blocks([path]):
        if block.kind == "python":
            found.append((block, None))
        elif block.kind == "bash" and block.body.strip() not in readme:
            found += [(block, words) for words in map(program, commands(block))
                      if words[0] == "reportgen" and not _not_here(words)]
    return found


RUN_PAGES = [path for path in markdown_files() if _runnable(path)]


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model) -> Path:
    """The docs' model names as tiny random checkpoints: a BERT (the shared tiny one), a GPT-2 and a BART."""
    from tests.decoder_checkpoints import make_decoder
    from tests.seq2seq_checkpoints import make_encoder_decoder

    root = tmp_path_factory.mktemp("docs-models")
    (root / "my-bert").symlink_to(tiny_model, target_is_directory=True)
    make_decoder("gpt2", root / "my-gpt2", causal_lm=True)
    make_encoder_decoder("bart", root / "my-bart")
    return root


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    cli = WarmCli(dict(os.environ), tmp_path_factory.mktemp("docs-warm-cli"))
    yield cli
    cli.close()


def _sandbox(folder: Path, models: Path) -> Path:
    """A reader's project folder as the docs assume it: the models and the data files they name."""
    (folder / "models").symlink_to(models, target_is_directory=True)
    (folder / "my-config.yaml").write_text(tiny_config("./models/my-bert", ablation=SINGLE_HEADS_ABLATION),
                                           encoding="utf-8")
    texts = ["the cat sat on the mat.", "i went to the store.", "we walked to the park after dinner."]
    (folder / "texts.txt").write_text("\n".join(texts * 4) + "\n", encoding="utf-8")
    (folder / "task.tsv").write_text("text\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(texts * 4)),
                                     encoding="utf-8")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_commands_and_python_blocks_run(page, models, warm, tmp_path):
    folder = _sandbox(tmp_path, models)
    env = {**os.environ, "BROWSER": "true"}  # --open hands the file to `true`, not a browser
    for block, words in _runnable(page):
        if words is None:
            done = subprocess.run([sys.executable, "-c", block.body], cwd=folder, env=env, capture_output=True,
                                  text=True, timeout=300)
        else:
            done = warm.run(words[1:], folder, env, timeout=300)
        assert done.returncode == 0, f"{block.where}: {words or 'python'} exit {done.returncode}: {done.stderr[-2000:]}"
