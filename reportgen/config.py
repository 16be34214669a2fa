"""The build configuration: one YAML file, validated against a schema.

Defaults live in `defaults.yaml` beside this module (data, not code); the user's
file is merged over them and validated, so unknown keys and wrong types are
refused with a message that names the file and the field.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from reportgen.datafiles import check_regular_file
from reportgen.errors import ConfigError, DataError, ModelError

PACKAGE_DIR = Path(__file__).parent
DEFAULT_CONFIG_NAME = "reportgen.yaml"
# The shipped demo set `ablation.data: builtin` stands for (query/title pairs graded for relevance).
BUILTIN_DATA = PACKAGE_DIR / "data" / "relevance_demo.tsv"


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Upper bounds on every count: far above what a real study needs (the defaults are 1,000 resamples and
# permutations, 20 random orders, 3 seeds), low enough that a typo (an extra three zeros) ends with one
# line instead of a build that runs for days or fills the memory.
MAX_RESAMPLES = 1_000_000
MAX_ROWS = 10_000_000
MAX_SEEDS = 100
MAX_RANDOM_ORDERS = 10_000
MAX_BATCH_TOKENS = 1 << 20
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        """A NUL character ends a C string: no path, name or text can hold one. A lone surrogate (YAML's
        "\\ud83d\\ude42" is two of them, not one emoji) is no character at all: no page can be written with it."""
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("the text holds a NUL character (\\x00)")
        if isinstance(value, str) and (lone := LONE_SURROGATE.search(value)):
            raise ValueError(f"the text holds a lone surrogate (\\u{ord(lone.group()):04x}), which is not a character; "
                             "write the character itself or its 8-digit escape (e.g. \\U0001F642)")
        return value


# A location (model, data file, directory) written as a URL that runs or embeds content
# in a browser is never a file or a model, and is refused before it can reach a page.
_SCRIPT_URL = re.compile(r"\s*(?:javascript|data|vbscript)\s*:", re.IGNORECASE)
# site_url is printed by MkDocs, unescaped, into every page's canonical link and the sitemap.
_URL_FORBIDDEN = re.compile(r"""[\s"'<>`\\{}|^\[\]\x00-\x1f\x7f]""")


def no_script_url(value: Any) -> Any:
    """Refuse javascript:, data: and vbscript: URLs in a field that names a location."""
    if isinstance(value, (str, Path)) and _SCRIPT_URL.match(str(value)):
        raise ValueError("a javascript:, data: or vbscript: URL is not a path, file or model name")
    return value


def check_site_url(value: str | None) -> str | None:
    """site_url is the public address of the site: an absolute http(s) URL, without a query or
    fragment, and without any character that could end an HTML attribute or element."""
    if value is None:
        return None
    bad = _URL_FORBIDDEN.search(value)
    if bad:
        raise ValueError(f"the URL contains {bad.group()!r}; quotes, angle brackets, braces, backslashes "
                         "and whitespace are not allowed (percent-encode them)")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError("expected the site's public address as an absolute http:// or https:// URL, "
                         "e.g. https://user.github.io/project/")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise ValueError("the site's address cannot have a ?query or #fragment")
    return value


_RAY_CLIENT = re.compile(r"ray://(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):(\d{1,5})")


def check_ray_address(value: str | None) -> str | None:
    """Where the ablation's Ray workers are: refused here, before any work, unless it is one of the
    forms `reportgen.ablation.ray_runner` connects to (a Ray Client address needs a host and a port)."""
    if value is None or value in ("local", "auto"):
        return value
    matched = _RAY_CLIENT.fullmatch(value)
    if not matched or not 1 <= int(matched.group(1)) <= 65535:
        raise ValueError(f'expected null, "local", "auto" or "ray://host:port" (port 1 to 65535), got {value!r}')
    return value


class ExampleSpec(Strict):
    """One text to visualise: a single sentence, or a pair when `pair` is set."""

    text: str = Field(min_length=1, description="The sentence (or sentence A of a pair).")
    pair: str | None = Field(None, min_length=1, description="Sentence B of a pair.")
    target: str | None = Field(None, min_length=1, description="What an encoder-decoder's (BART, T5, Marian) "
                                                               "decoder reads, `text` being its source.")
    name: str | None = Field(None, description="A short label shown in the site.")

    @field_validator("text", "pair", "target")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("the text is blank (only whitespace); give some words or remove the example")
        return value


Format = Literal["auto", "txt", "csv", "tsv", "jsonl"]


class CorpusFile(Strict):
    """One corpus file of the config (`patterns.corpus` list item)."""

    path: Path = Field(description="The file; relative paths are taken relative to the config file.")
    format: Format = Field("auto", description="txt | csv | tsv | jsonl; auto = from the file suffix.")
    column: str | None = Field(None, description="Text column (csv/tsv header name, jsonl key).")
    pair_column: str | None = Field(None, description="Optional column holding sentence B of a pair.")
    limit: int | None = Field(None, ge=1, le=MAX_ROWS,
                              description="Read at most this many sentences from the file.")

    _path = field_validator("path", mode="before")(no_script_url)


class Thresholds(Strict):
    """When a pattern labels a head (values compared with the head's mean over examples)."""

    positional: float = Field(ge=0, le=1, description="Clark: next/previous-token mass above this.")
    positional_argmax: float = Field(ge=0, le=1, description="Voita: argmax share at +1/-1 at least this.")
    delimiter: float = Field(ge=0, le=1, description="Clark: mass on [CLS]+[SEP]+'.'',' above this.")
    broad_share: float = Field(ge=0, le=1, description="exp(entropy) / n at least this "
                                                       "(entropy within -ln(x) of ln n).")
    same_token: float = Field(ge=0, le=1, description="Mass on the token itself and its word's other occurrences.")
    other_segment: float = Field(ge=0, le=1, description="Mass on the same word in the other sentence.")
    within_word: float = Field(ge=0, le=1, description="Mass on the other pieces of the same word.")
    boundary_selectivity: float = Field(ge=0, le=1, description="Within word also needs this much more "
                                        "weight on a neighbour in the same word than across a word boundary.")
    # Decoders (issue 31):
    previous_token: float = Field(ge=0, le=1, description="Decoders: mass on the previous token above this.")
    induction: float = Field(ge=0, le=1, description="Decoders: induction score (Olsson et al. 2022) above this.")
    duplicate_token: float = Field(ge=0, le=1, description="Decoders: mass on the earlier occurrences of the "
                                                           "query's token above this.")
    sink: float = Field(ge=0, le=1, description="Decoders: mass on the first token above this (Xiao et al. 2023).")


class PatternSettings(Strict):
    """The `patterns:` section: what the pattern atlas measures and how heads are labelled."""

    thresholds: Thresholds
    word_level: bool = Field(description="Compute the statistics between words rather than pieces.")
    segmentation: Literal["none", "spaces", "jieba"] = Field(
        description="Word boundaries: the tokenizer's (none), the input's spaces, or jieba (Chinese).")
    corpus: list[CorpusFile] = Field(description="Extra sentences: files of text, csv, tsv or jsonl.")
    top_k: int = Field(ge=1, le=10_000, description="Heads listed per pattern in `top_heads`.")
    similarity: bool = Field(description="Compute the head-similarity map (Jensen-Shannon, MDS).")


class ExperimentSwitches(Strict):
    """Which head-ablation experiments run."""

    baseline: bool = Field(description="The unmasked model's metric with its 95% bootstrap interval.")
    single_heads: bool = Field(description="Each head masked alone, with a corrected permutation test.")
    random_fraction: bool = Field(description="Random sets of each fraction of heads masked, tested for "
                                              "non-inferiority against `margin`.")
    layer_halves: bool = Field(description="The lower against the upper half of the layers, at each fraction.")
    whole_layers: bool = Field(description="Each layer's heads masked together.")
    importance: bool = Field(description="Michel et al. 2019's head importance and pruning curves, ranked among "
                                         "random orders.")
    # off unless asked, also where a caller lists only the other switches: it multiplies the masks
    head_pairs: bool = Field(False, description="Mask two heads together (see `ablation.head_pairs`).")


class ImportanceSettings(Strict):
    normalize: Literal["layer_l2", "none"] = Field(
        description="Per-layer L2 normalisation of importance (Michel et al.'s code) or none.")
    recompute: bool = Field(description="Recompute importance after each pruning step.")
    random_orders: int = Field(ge=1, le=MAX_RANDOM_ORDERS,
                               description="Random pruning orders the importance order is ranked among "
                                           "(its p-value cannot go below 1 / (orders + 1)).")


class HeadPairSettings(Strict):
    """Which pairs of heads the head_pairs experiment masks together: every pair among the `top_k` heads
    whose single masking changes the metric most, or every pair of the model (L*H*(L*H-1)/2 masks)."""

    top_k: int = Field(ge=2, le=10_000,
                       description="Heads with the largest |change| when masked alone; every pair among "
                                   "them is masked (k*(k-1)/2 masks; capped at the model's heads).")
    all: bool = Field(description="Every pair of heads instead of the top k (72 heads: 2,556 masks).")


class AblationSettings(Strict):
    """The `ablation:` section: the task, its data and the head-ablation experiments."""

    enabled: bool = Field(description="Run the head-ablation experiments (off: the site has no ablation page).")
    task: Literal["similarity", "classification", "mlm", "causal_lm", "seq2seq"] = Field(
        description="similarity | classification | mlm (masked-token accuracy) | causal_lm (next-token "
                    "cross-entropy of a decoder, lower is better; also its perplexity) | seq2seq (target-token "
                    "cross-entropy of an encoder-decoder given the source, teacher-forced, over `source`/`target` "
                    "pairs; lower is better; also its perplexity).")
    data: str = Field(min_length=1, description='"builtin" (the demo relevance set) or a CSV/TSV/JSONL file, or '
                                                'a TXT file of one text per line (only for tasks mlm and causal_lm, '
                                                'which read nothing but texts).')
    format: Format = Field(description="txt | csv | tsv | jsonl; auto = from the file suffix (.txt, .csv, .tsv, "
                                       ".jsonl, ...).")
    header: bool = Field(description="The CSV/TSV file's first row names its columns.")
    columns: dict[str, str | int] | None = Field(
        description="Role -> column name or 0-based index; null = the task's default names.")
    limit: int | None = Field(ge=1, le=MAX_ROWS, description="Use only the first N examples.")
    max_length: int = Field(ge=8, le=8192, description="Tokens per task input; longer ones are truncated.")
    method: Literal["zero", "uniform", "mean", "resample"] = Field(
        description="zero (head removed, Michel et al. 2019) | uniform (1/n attention, Kovaleva et al. 2019) | "
                    "mean (the head's mean output over the task's inputs at each position) | resample (the "
                    "head's output on another input of the task): mean and resample keep the model on its "
                    "distribution (Wang et al. 2022; Chan et al. 2022).")
    experiments: ExperimentSwitches
    seeds: list[Seed] = Field(min_length=1, max_length=MAX_SEEDS,
                              description="Random seeds: each draws its own random head sets and orders.")
    fractions: list[float] = Field(
        min_length=1, max_length=100, description="Fractions of all heads to mask (random, halves, pruning steps).")
    bootstrap_samples: int = Field(ge=100, le=MAX_RESAMPLES, description="Resamples of each bootstrap interval.")
    permutations: int = Field(ge=100, le=MAX_RESAMPLES,
                              description="At least; raised so the smallest p-value can pass the correction.")
    correction: Literal["holm", "bonferroni"] = Field(description="How p-values are corrected for the number of "
                                                                   "tests: holm | bonferroni.")
    alpha: float = Field(gt=0, lt=1, description="Significance level of every test, after correction.")
    margin: float = Field(gt=0, lt=1, description="Non-inferiority margin, relative to the unmasked model's metric: "
                                                  "a change above -margin counts as no loss.")
    importance: ImportanceSettings
    head_pairs: HeadPairSettings
    mlm_probability: float = Field(gt=0, lt=1, description="Task mlm: the share of tokens masked.")
    mlm_seed: Seed = Field(description="Task mlm: the seed that picks the masked tokens (the same for every mask).")
    batch_tokens: int = Field(ge=64, le=MAX_BATCH_TOKENS, description="Padded tokens per forward pass (at least "
                                                                     "max_length: one whole text per pass).")
    ray: str | None = Field(description='Evaluate the masks on Ray actors: null (here, no Ray), "local" (a Ray '
                                        'instance on this machine), "auto" (the running cluster) or '
                                        '"ray://host:port"; `reportgen build --ray` overrides it.')
    # the default also where a caller lists only the other settings: float32 is what every build before it used
    precision: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Number format of the masked forward passes (every mask, the unmasked one included, "
                               "so each change is measured within one format): float32 | bfloat16 (faster only "
                               "where the hardware has bfloat16 units, as recent GPUs; slower on a CPU without "
                               "them; benchmarks/ablation_precision.py measures both its speed and its agreement "
                               "with float32) | float16 (CUDA only). Outputs, statistics and head importance "
                               "(gradients) stay float32 or wider.")

    _data = field_validator("data", mode="before")(no_script_url)
    _ray = field_validator("ray")(check_ray_address)

    @field_validator("columns")
    @classmethod
    def _indexes_from_zero(cls, value: dict[str, str | int] | None) -> dict[str, str | int] | None:
        for role, column in (value or {}).items():
            if isinstance(column, int) and column < 0:
                raise ValueError(f"column indexes count from 0; {role}: {column} is not one")
        return value

    @field_validator("fractions")
    @classmethod
    def _in_unit_interval(cls, value: list[float]) -> list[float]:
        bad = [f for f in value if not 0 <= f < 1]
        if bad:
            raise ValueError(f"fractions must be in [0, 1), got {bad[0]}")
        return value

    @field_validator("batch_tokens")
    @classmethod
    def _holds_a_text(cls, value: int, info: ValidationInfo) -> int:
        """A forward pass holds whole texts: fewer tokens than the longest text takes leave a batch empty."""
        longest = info.data.get("max_length")
        if longest is not None and value < longest:
            raise ValueError(f"{value} tokens per pass cannot hold one text of ablation.max_length ({longest}) "
                             "tokens; raise batch_tokens or lower max_length")
        return value


class PatchingSettings(Strict):
    """The `patching:` section: activation patching on prompt pairs (reportgen.patching)."""

    enabled: bool = Field(description="Run activation patching (off by default; the site then has a patching page).")
    data: str = Field(min_length=1, description='"builtin" (repeated random tokens, the induction behaviour: any '
                                                'decoder) or a JSONL file of {clean, corrupted, answer, wrong} rows '
                                                '(an encoder-decoder\'s rows may add `target`, what its decoder reads '
                                                'before the answer).')
    limit: int | None = Field(ge=1, le=MAX_ROWS, description="Use only the first N pairs of the file.")
    pairs: int = Field(ge=2, le=10_000, description="Built-in pairs.")
    tokens: int = Field(ge=2, le=512, description="Random tokens a copy in the built-in pairs (prompts of "
                                                  "2 x tokens: [BOS] + r + r without its last token).")
    positions: bool = Field(description="Also patch each head at each position (prompts of one length, at most "
                                        "64 tokens), within max_masks.")
    max_masks: int = Field(ge=1, le=100_000_000,
                           description="Patched runs (pairs x directions x heads, x positions) exact patching may "
                                       "take; above it, only attribution patching's top heads are patched exactly.")
    min_difference: float = Field(ge=0, le=1000,
                                  description="Logits the clean minus corrupted difference's 95% interval must clear "
                                              "for the pairs to show a behaviour (0.5: odds of 1.65 to 1); below "
                                              "it no head is significant or named.")
    top: int = Field(ge=1, le=10_000, description="Heads compared at the top of both rankings (agreement).")
    bootstrap_samples: int = Field(ge=100, le=MAX_RESAMPLES, description="Resamples of each bootstrap interval.")
    permutations: int = Field(ge=100, le=MAX_RESAMPLES, description="Sign flips of each head's permutation test.")
    alpha: float = Field(gt=0, lt=1, description="Significance level of every test, after Holm's correction.")
    seed: Seed = Field(description="Seed of the built-in pairs, the bootstrap and the permutations.")

    _data = field_validator("data", mode="before")(no_script_url)


class ViewSettings(Strict):
    """The `views:` section: what the site's attention views offer besides the examples' own."""

    live: bool = Field(description="A \"Your sentence\" page: readers type a text and the model runs in their "
                                   "browser (BERT-family encoders with a WordPiece tokenizer; adds the model's "
                                   "weights to the site).")
    live_weights: Literal["compact", "float16"] = Field(
        description="How the live page's weights are stored: compact (about 9 bits a weight: MiniLM's adds 24.6 MB "
                    "and its attention is within 0.02 of the model's on texts of up to 512 tokens) or float16 "
                    "(within 0.002, about 1.8 times the size).")
    query_key_mb: float = Field(
        ge=0, le=10_000,
        description="The most an example's query/key page may add to the site, in MB: its q and k vectors (12 bits "
                    "a component, 1.5 bytes x 2 x layers x heads x head size a token) and the score terms of a model "
                    "that has them. A longer example gets no query/key page, and its page says why. 0: none.")


class CompareSettings(Strict):
    """A second model to compare with the first, e.g. the pretrained model next to its fine-tuned copy."""

    model: str = Field(min_length=1, description='"default", a Hub id or a local directory.')
    name: str | None = Field(None, description="How the site names it (default: the model's name).")

    _model = field_validator("model", mode="before")(no_script_url)


class Config(Strict):
    title: str = Field(description="Site title.")
    site_url: str | None = Field(description="Public address of the site (GitHub Pages): an http(s) URL, or null.")
    model: str = Field(min_length=1, description='"default", a Hugging Face Hub id or a local directory.')
    device: Literal["auto", "cpu", "cuda"] = Field(description="auto (CUDA where there is a GPU) | cpu | cuda.")
    trust_remote_code: bool = Field(description="Allow a model directory's own Python code (auto_map); off: refused.")
    allow_pickle: bool = Field(
        description="Allow pickle weights (pytorch_model.bin) when there is no safetensors; off: refused.")
    output: Path = Field(description="Directory the site is written to.")
    cache_dir: Path = Field(description="Directory for cached model outputs.")
    max_length: int = Field(ge=8, le=8192, description="Tokens per example; longer ones are truncated.")
    patterns: PatternSettings
    ablation: AblationSettings
    patching: PatchingSettings
    views: ViewSettings
    compare: CompareSettings | None = Field(description="A second model: patterns and ablations side by side.")
    claims: Literal["seed004"] | None = Field(
        description="A published study whose claims the findings page checks on this model, each with its test "
                    "and verdict: seed004 (head masking on a query-title cross-encoder), or null.")
    examples: list[ExampleSpec] = Field(
        description='Examples to visualise: a list of {text, pair, target, name} (target: what an encoder-decoder\'s '
                    'decoder reads); the word "builtin" (alone or as an item) stands for the built-in examples.')

    _locations = field_validator("model", "output", "cache_dir", mode="before")(no_script_url)
    _site_url = field_validator("site_url")(check_site_url)

    @field_validator("examples", mode="before")
    @classmethod
    def _expand_builtin(cls, value):
        if value == "builtin":
            value = ["builtin"]
        if isinstance(value, list):
            return [item for v in value for item in (_builtin_items() if v == "builtin" else [v])]
        return value

    # Where the config came from, for messages and for resolving relative paths.
    source: str = Field(default="(defaults)", exclude=True)
    base_dir: Path = Field(default=Path("."), exclude=True)

    @property
    def config_file(self) -> Path | None:
        """The file the config was read from; None for the defaults or a dict given to `reportgen.build`."""
        return None if self.source in NOT_FILES else Path(self.source)

    def as_written(self) -> dict:
        """The config as used, with paths relative to the config file again (for the manifest),
        so that the same project built in another directory records the same config."""
        relative = self.shown_path
        data = self.model_dump(mode="json")
        data["output"], data["cache_dir"] = relative(self.output), relative(self.cache_dir)
        data["model"] = relative(self.model)
        if self.compare is not None:
            data["compare"]["model"] = relative(self.compare.model)
        for item in data["patterns"]["corpus"]:
            item["path"] = relative(item["path"])
        data["ablation"]["data"] = relative(self.ablation.data)
        data["patching"]["data"] = relative(self.patching.data)
        # Where the masks ran changes no number (a Ray build's report equals a local one's), and a
        # cluster address names private hosts: the published manifest leaves it out.
        data["ablation"].pop("ray", None)
        return data

    def shown_path(self, path: str | Path) -> str:
        """A path as a published page may show it: relative to the config file, or "builtin";
        an absolute local path would publish the author's directories (issue 10, privacy)."""
        if str(path) in ("builtin", str(BUILTIN_DATA)):
            return "builtin"
        if not os.path.isabs(str(path)):
            return str(path)  # "default", a Hub id, or already relative
        return Path(os.path.relpath(path, self.base_dir)).as_posix()


def builtin_data_problem(task: str) -> str | None:
    """Why the builtin demo set cannot be the data of `task`, None when it can: it holds graded
    pairs, a similarity task; any other task needs the user's own data file. Checked when the
    config is loaded and again by `task_loading.load_task`, which tests and benchmarks call directly."""
    if task == "similarity":
        return None
    return f"the builtin demo set is a similarity task; task '{task}' needs a data file"


def precision_problem(precision: str, device: str, resolved: str | None = None) -> str | None:
    """Why the masked passes cannot run in `precision` on `device` (as the config says it: "auto", "cpu",
    "cuda", or a torch device such as "cuda:0"), None when they can: float16 runs only on CUDA (torch has no
    float16 autocast worth having on a CPU). `resolved` is what "auto" became, which only torch can tell and
    this module imports no torch: without it "auto" passes here, and is checked again where the device is
    resolved (`reportgen.ablation.task_loading.load_task`). Loading the config refuses float16 on "cpu" before
    any work."""
    if precision != "float16":
        return None
    actual = resolved if device == "auto" else device
    if actual is None or str(actual).split(":")[0] == "cuda":
        return None
    why = "device 'auto' finds no CUDA device here" if device == "auto" else f"the device is '{device}'"
    return f"float16 runs only on a CUDA device and {why}; use bfloat16 (which a CPU runs too) or float32"


def defaults() -> dict[str, Any]:
    return yaml.safe_load((PACKAGE_DIR / "defaults.yaml").read_text(encoding="utf-8"))


def _builtin_items() -> list[dict]:
    return yaml.safe_load((PACKAGE_DIR / "examples.yaml").read_text(encoding="utf-8"))


def builtin_examples() -> list[ExampleSpec]:
    return [ExampleSpec(**item) for item in _builtin_items()]


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_section(model: type[BaseModel], name: str, overrides: dict[str, Any] | None = None,
                 source: str = "(defaults)"):
    """One section of the config (e.g. `patterns`) from the shipped defaults and `overrides`."""
    if overrides is not None and not isinstance(overrides, dict):
        raise ConfigError(f"{source}: field '{name}': expected a mapping")
    try:
        return model.model_validate(_merge(defaults()[name], overrides or {}))
    except ValidationError as err:
        raise ConfigError(_describe(err, source, prefix=name)) from None


def _describe(err: ValidationError, source: str, prefix: str | None = None) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in ([prefix] if prefix else []) + list(first["loc"])) or "(top level)"
    if first["type"] == "extra_forbidden":
        text = f"{source}: unknown key '{field}'"
    else:
        text = f"{source}: field '{field}': {first['msg']}"
    more = err.error_count() - 1
    return text + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


class DuplicateKey(ValueError):
    """A mapping that names one key twice: YAML keeps the last silently, the user meant both."""


class UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key written twice in one mapping (with both line numbers). YAML merge keys
    (`<<: *defaults`) work as YAML says: the mapping's own keys override the merged ones."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged keys may be overridden: only the mapping's own keys must be unique
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str) and key in seen:
                raise DuplicateKey(f"key '{key}' is written twice in one mapping, at lines {seen[key]} and {line}; "
                                   "YAML would keep only the second: merge them into one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# Config fields reportgen sets from where the file is; the schema leaves them out and a file may not set them.
INTERNAL_FIELDS = {"source", "base_dir"}
DICT_SOURCE = "config dict"  # how a config given as a dict (reportgen.build) is named in messages
NOT_FILES = ("(defaults)", DICT_SOURCE)  # sources that name no file


def load_config(path: str | Path | None = None) -> Config:
    """Read `path` (or ./reportgen.yaml when present, else the defaults) into a Config.

    Relative paths in the file are taken relative to the file's directory, as MkDocs does.
    """
    user: dict[str, Any] = {}
    base_dir = Path.cwd()
    source = "(defaults)"
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    if path is not None:
        path = Path(path)
        source = str(path)
        try:  # a directory, a symlink loop or a device named as the config, each said as it is
            check_regular_file(path, "config file")
        except DataError as err:
            raise ConfigError(str(err)) from None
        try:
            user = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # a SafeLoader
        except UnicodeDecodeError:
            raise ConfigError(f"{source}: not a UTF-8 text file") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "cannot be parsed"
            raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
        except DuplicateKey as exc:
            raise ConfigError(f"{source}: {exc}") from None
        if user is None:
            raise ConfigError(f"{source}: the file is empty; write at least one key, e.g. 'title: My report'")
        base_dir = path.resolve().parent
    return config_from_mapping(user, source, base_dir)


def config_from_mapping(user: Any, source: str, base_dir: Path) -> Config:
    """The Config of `user`, a mapping of config keys as a reportgen.yaml holds them, merged over the
    defaults and checked as a file is (`source` names it in messages); relative paths are taken
    relative to `base_dir`. `load_config` reads a file into one; the Python API passes a dict."""
    if not isinstance(user, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values at the top level")
    if internal := sorted(INTERNAL_FIELDS & set(user)):  # set from the file's place, never written in it
        raise ConfigError(f"{source}: unknown key '{internal[0]}' (paths are relative to the config file's "
                          "folder)")
    try:
        config = Config.model_validate({**_merge(defaults(), user), "source": source, "base_dir": base_dir})
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None
    problem = builtin_data_problem(config.ablation.task) if config.ablation.data == "builtin" else None
    if config.ablation.enabled and problem:
        raise ConfigError(f"{source}: field 'ablation.data': {problem} (or set ablation.enabled: false)")
    if config.ablation.enabled and (problem := precision_problem(config.ablation.precision, config.device)):
        raise ConfigError(f"{source}: field 'ablation.precision': {problem}")
    config.output = base_dir / config.output.expanduser()  # "~/site": the home directory, as for the model
    config.cache_dir = base_dir / config.cache_dir.expanduser()
    for corpus_file in config.patterns.corpus:
        corpus_file.path = base_dir / corpus_file.path.expanduser()
    if config.ablation.data != "builtin":
        config.ablation.data = str(base_dir / Path(config.ablation.data).expanduser())
    if config.patching.data != "builtin":
        config.patching.data = str(base_dir / Path(config.patching.data).expanduser())
    config.model = _model_path(config.model, base_dir, "model")
    if config.compare is not None:
        config.compare.model = _model_path(config.compare.model, base_dir, "compare.model")
    return config


def _model_path(model: str, base_dir: Path, field: str) -> str:
    """A model that names an existing path, or looks like one, is a local directory relative
    to the config file; anything else ("org/name") is a Hub id."""
    local = base_dir / Path(model).expanduser()
    if model != "default" and (model.startswith((".", "/", "~")) or local.is_symlink() or local.exists()):
        try:
            return str(local.resolve())
        except (RuntimeError, OSError):  # Python 3.11 reports a symlink loop as RuntimeError, newer ones as ELOOP
            raise ModelError(f"model path {local} is a symlink loop (config field '{field}')") from None
    return model


def json_schema() -> str:
    """JSON Schema of reportgen.yaml, with the shipped defaults, for editors."""
    schema = Config.model_json_schema()
    for internal in INTERNAL_FIELDS:
        schema["properties"].pop(internal, None)
    for key, value in defaults().items():
        if not isinstance(value, dict):
            schema["properties"][key]["default"] = value
    schema["title"] = "reportgen.yaml"
    schema["required"] = []
    return json.dumps(schema, indent=2, default=str)
