"""The report as a whole (`Report`), its model and examples, findings and manifest; reading report.json back."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError, model_validator

from reportgen.errors import DataError, ReportgenError

if TYPE_CHECKING:
    import pandas
from reportgen.report.ablation import Ablation
from reportgen.report.base import SCHEMA_VERSION, Grid, Number, Record
from reportgen.report.links import group_layer
from reportgen.report.patching import Patching
from reportgen.report.patterns import (
    CrossStatistics,
    DecoderStatistic,
    DecoderStatistics,
    HeadStatistic,
    PatternStatistics,
)

# Heads a report may state (layers x heads), checked before anything is sized by them: GPT-3 has 9,216.
MAX_HEADS = 1_000_000



# -- the model and the examples ------------------------------------------------------------------
class ModelSummary(Record):
    """The model as the site names it; its local path is left out (it says nothing to a reader)."""

    # as the config's `model` names it: a Hub id or the directory's name (a compared model's `compare.name`, if set)
    name: str
    model_type: str  # config.json's model_type ("bert", "gpt2", "bart"...); "unknown" where it has none
    layers: int  # attention layers; an encoder-decoder's flat layers: encoder + 2 x decoder (self- and cross-attention)
    heads: int  # attention heads per layer
    hidden: int  # hidden size (config.json's hidden_size, dim, n_embd, or d_model for an encoder-decoder)
    parameters: int  # the loaded model's parameters, counted
    fingerprint: str  # the first 16 hex digits of a sha256 over the model's files' hashes (the cache's key)


class ExampleHead(Record):
    """A head that shows a pattern on one example, and the token pair that shows it most.

    query/key: the (q, k) cell of the pattern with the largest weight A[q, k] for this head on
    this example (e.g. straw -> ##berries for within_word); both None for previous/next token,
    which are spread over every query. For delimiter only `key` is set: the [CLS], [SEP], '.'
    or ',' token with the largest mean weight over the queries (the pattern is spread over them).
    """

    layer: int  # 0-based, as on the example's head map
    head: int  # 0-based, within the layer
    value: float  # the pattern's statistic for this head on this example
    query: int | None  # token index on the example page
    key: int | None  # token index of the key on the example page; None with `query` for previous/next token
    query_token: str | None  # the query's token as the tokenizer writes it (e.g. straw); None with `query`
    # the key's token (e.g. ##berries; for delimiter the [CLS], [SEP], '.' or ',' key); None with `key`
    key_token: str | None
    weight: Number = None  # A[query, key]; for delimiter the mean weight on `key`


class ExamplePattern(Record):
    """One of the six seed patterns on one example: the heads that show it most there."""

    # the seed pattern (reportgen.patterns.per_example.SEED_PATTERNS)
    pattern: Literal["previous_token", "next_token", "same_token", "other_segment", "within_word", "delimiter"]
    threshold: float  # the label threshold of the pattern
    weak: bool  # no head is above the threshold on this example (or the pattern does not apply to it)
    # strongest first, at most 3; empty where the pattern does not apply to the example (no split word, a
    # single sentence) or, for within_word, where no head is boundary-selective on it (weak is then True)
    heads: list[ExampleHead]


class Example(Record):
    id: int  # 1, 2, ...: its page is example-{id}.html
    name: str | None  # the config's short label of the example; null when it has none
    text: str  # the sentence (sentence A of a pair; an encoder-decoder's source), as the config gives it
    pair: str | None  # sentence B of a pair; null for a single sentence
    n_tokens: int  # an encoder-decoder's: the source's
    truncated: bool  # the text was cut to the build's max_length tokens (a warning says so)
    page: str  # its page: example-{id}.html
    qk_page: str | None  # an example whose q and k vectors fit the config's views.query_key_mb has a query/key page
    entropy: Grid  # mean attention entropy per head on this example, in nats (Clark et al. 2019)
    # the six seed patterns, in the order of reportgen.patterns.per_example.SEED_PATTERNS
    patterns: list[ExamplePattern]
    # Each head's label on this example alone: patterns.label_heads on its own statistics (the site-wide
    # `statistics.labels` use their means over the inputs), "mixed" where no pattern passes; the example's head map.
    labels: list[list[str]]
    target: str | None = None  # an encoder-decoder's target, which its decoder reads (teacher-forced)
    n_target_tokens: int | None = None  # how many input tokens the decoder read: the start token, then the target
    # No query/key page for its size: what its vectors would have added to the site, and the config's limit, in MB
    qk_mb: float | None = None
    qk_limit_mb: float | None = None  # the config's views.query_key_mb that qk_mb exceeded; null with qk_mb


# -- comparison, findings, manifest -----------------------------------------------------------------
class Comparison(Record):
    """The second model (config `compare:`) through the same analyses."""

    model: ModelSummary  # the second model (named by compare.name when set)
    same_shape: bool  # the same layers x heads, so differences per head are shown
    statistics: PatternStatistics  # its encoder atlas over the same examples and corpus (comparing is for encoders)
    ablation: Ablation | None  # its head ablation on the same task; null when ablation is off
    model_files: dict[str, str]  # its model's files: file -> sha256, as Manifest.model_files


class Span(Record):
    """A piece of a finding's sentence: plain text, optionally emphasised or a link into the site."""

    text: str  # the words of this piece
    style: Literal["strong", "code"] | None = None  # "strong" (emphasised) or "code"; null: plain text
    link: str | None = None  # a page of the site with its anchor, e.g. "example-1.html#view=head&layer=2&head=0"


class Link(Record):
    label: str  # the link's words: "chart", "details", "table", "model view"...
    href: str  # a page of the site, with its anchor


class Finding(Record):
    """One statement about the model, with what it rests on.

    `sentence` is the statement as plain text; `spans` are the same words with their emphasis
    and links, as the findings page shows them. `numbers` are the values the sentence quotes.
    """

    id: str  # stable: the anchor finding-{id} on the findings page
    # what it is about: pattern statistics (any atlas), the head ablation or activation patching
    group: Literal["patterns", "ablation", "patching"]
    supported: bool  # False: the data do not support the statement, and the sentence says so
    sentence: str  # the statement as plain text: the spans' text joined
    spans: list[Span]  # the sentence piece by piece with its emphasis and links
    links: list[Link]  # the charts, tables or pages it rests on
    numbers: dict[str, Any]  # the values the sentence quotes, by name (each kind of finding has its own keys)
    test: str | None = None  # how the claim was tested, when a test answers it
    p_value: Number = None  # the corrected p-value of the claim's test, when it has one
    ci: list[Number] | None = None  # the 95% confidence interval the claim quotes, when it has one


class ClaimCheck(Record):
    """A published study's claim (config `claims:`, e.g. seed 004's) beside what this model shows.

    The table on the findings page prints these: the study's claim and figure, this model's figure
    (`number`, with its CI or p-value), the test that answers the claim here, and the verdict with
    its reason. `value`, `ci` and `p_value` are the figures `number` quotes, copied from the ablation
    and pattern records (reportgen/findings/claims.py), so the table and report.json agree.
    """

    id: str  # stable: the anchor claim-{id} on the findings page
    study: Literal["seed004"]  # whose claims these are (config `claims:`): seed 004's, in reportgen/findings/claims.py
    claim: str  # the study's claim, in words
    study_number: str  # the study's own figure for it
    number: str  # this model's figure with its CI or p-value; "\u2013" when not measured
    test: str  # the test that answers the claim on this model
    # this model's answer to the claim; "not measured" where its experiment is off or unfinished, the metric undefined
    # or the inputs lack what it needs (`why` says which)
    verdict: Literal["supported", "not supported here", "contradicted", "not measured"]
    why: str  # the reason for the verdict; for "not measured", what is missing or switched off
    note: str | None = None  # how the claim maps onto this model (metric, layers by relative depth, words)
    metric: str | None = None  # the primary metric the change is of (ablation claims)
    # the figure the verdict rests on: a relative change of the metric (lower-layers: the paired difference in the
    # metric's units) or a head's pattern score; null when not measured
    value: Number = None
    # [low, high]: the paired bootstrap 95% CI of `value` (the random-fraction claims); null for the others
    ci: list[Number] | None = None
    p_value: Number = None  # corrected, when the test has one
    # the figures behind the row, keyed per claim (fractions, change_ci, margin...); empty when not measured
    numbers: dict[str, Any]
    links: list[Link]  # the findings and charts behind it


class Headline(Record):
    """The few numbers at the top of the findings page."""

    heads: int  # heads of the main atlas (a decoder's own, an encoder-decoder's encoder's): its layers x heads
    labels: dict[str, int]  # label -> heads of that atlas with it (its label_counts)
    # the finding that states the unmasked model's metric (ablation-baseline); null without one
    baseline: Finding | None
    # heads whose masking alone changes the metric significantly; null without the single-heads finding (experiment off,
    # or the metric undefined)
    significant_heads: int | None


class ExperimentCost(Record):
    """What one ablation experiment cost this build."""

    masks: int  # masks it evaluated, each one pass over the task's data
    computed: int | None  # of those, evaluated by this build (the rest came from the cache); None in a --reproducible
    seconds: float | None  # None in a --reproducible build, which is the same whatever the cache held


class Manifest(Record):
    """What a reader needs to reproduce the run."""

    config: dict[str, Any]  # the config as used, paths relative to the config file
    model_files: dict[str, str]  # file -> sha256
    # data file -> sha256: the corpus files and the ablation's data ("builtin" for the shipped set)
    data_files: dict[str, str]
    versions: dict[str, str]  # python, torch, transformers and reportgen versions the build ran with
    device: str  # where the model ran: the config's `device`, "auto" resolved to "cuda" or "cpu"
    seeds: dict[str, list[int] | int | None]  # per random process; None where it did not run
    seconds: dict[str, float] | None  # per stage; None in a --reproducible build
    # per ablation experiment that ran: its masks and seconds, so a user sees what to switch off
    experiments: dict[str, ExperimentCost] | None = None


class ExperimentState(Record):
    """Where one ablation experiment of a build still running stands."""

    name: str  # the experiment ("baseline", "single_heads", ...)
    state: Literal["done", "running", "waiting"]  # done; running (the one under way); or waiting to start
    masks_done: int  # masks evaluated so far, computed or read from the cache
    masks: int | None  # its masks in all; None until it starts (the engine counts them then)


class BuildProgress(Record):
    """A site written before its build finished: the pattern pages are final, the ablation is not. The
    experiments not run yet are null in `ablation`; `seconds_left` is the time still needed at the
    measured seconds per mask evaluated so far (None before the first mask was timed)."""

    experiments: list[ExperimentState]  # each switched-on ablation experiment, in the order they run
    # seconds of ablation per mask evaluated so far (partial-site writes left out); None before any
    seconds_per_mask: float | None
    seconds_left: float | None  # seconds_per_mask x the masks still to evaluate; None with seconds_per_mask
    stages_left: list[str]  # what runs after the ablation ("comparison"), if anything
    # the build was stopped (Ctrl+C) before it finished: its last site says so, and `reportgen publish` refuses it
    interrupted: bool = False


class Report(Record):
    """What `reportgen build` measured: every number on the site, and nothing else."""

    # the layout of report.json (SCHEMA_VERSION); Report.load refuses any other
    schema_version: Literal[4] = SCHEMA_VERSION
    title: str  # the site's title (config `title`)
    site_url: str | None  # the site's public address (config `site_url`); null when not set
    built: str | None  # UTC time of the build; None in a --reproducible build
    versions: dict[str, str]  # python, torch, transformers and reportgen versions, as in the manifest
    model: ModelSummary  # the model the build read
    layers: int  # an encoder-decoder's: every attention layer, its groups' in `groups` order
    heads: int  # attention heads per layer
    # the config's examples in order, each with its page (a decoder leaves out the built-in pairs)
    examples: list[Example]
    # a decoder's heads see only the keys up to the query; an encoder-decoder has three groups of heads
    architecture: Literal["encoder", "decoder", "encoder-decoder"] = "encoder"
    # an encoder-decoder's group of each of the `layers`: "encoder" (self-attention over the source), "decoder"
    # (causal self-attention over the decoder's inputs), "cross" (the decoder's inputs over the source); null otherwise
    groups: list[Literal["encoder", "decoder", "cross"]] | None = None
    statistics: PatternStatistics | None  # the encoder atlas (an encoder-decoder's: its encoder's); null for a decoder
    decoder: DecoderStatistics | None = None  # the decoder atlas; null for an encoder
    cross: CrossStatistics | None = None  # an encoder-decoder's cross-attention heads; null for other models
    ablation: Ablation | None  # the head-ablation experiments (config `ablation:`); null when ablation is off
    patching: Patching | None = None  # config `patching:`; null when it is off
    comparison: Comparison | None = None  # the second model (config `compare:`); null when none is set
    findings: list[Finding]  # every finding: the pattern findings, then the ablation's, then activation patching's
    claims: list[ClaimCheck] | None = None  # config `claims:`; null when none is set
    headline: Headline  # the few numbers at the top of the findings page
    # what the build warned of: the model, the examples, the decoder's induction test (e.g. a truncated text)
    warnings: list[str]
    manifest: Manifest  # what a reader needs to reproduce the run
    progress: BuildProgress | None = None  # a site written while the build still runs; null once it finished

    @model_validator(mode="after")
    def _sizes_fit(self) -> Report:
        """The sizes a report.json states are checked before anything is made from them (`heads_frame` makes a row
        per head): a billion heads would have taken 21 GB. The model's heads, the groups and each atlas's grid of
        labels must agree, within MAX_HEADS."""
        if not (1 <= self.layers and 1 <= self.heads and self.layers * self.heads <= MAX_HEADS):
            raise ValueError(f"{self.layers} layers x {self.heads} heads: a report holds 1 to {MAX_HEADS:,} heads")
        if self.groups is not None and len(self.groups) != self.layers:
            raise ValueError(f"'groups' names {len(self.groups)} layers, the model has {self.layers}")
        for name, atlas in (("statistics", self.statistics), ("decoder", self.decoder)):
            if atlas is not None and (len(atlas.labels) > self.layers
                                      or any(len(row) != self.heads for row in atlas.labels)):
                raise ValueError(f"'{name}.labels' is not a grid of at most {self.layers} layers of {self.heads} heads")
        return self

    @property
    def atlas(self) -> PatternStatistics | DecoderStatistics:
        """The heads' pattern statistics whatever the architecture: the encoder atlas (an encoder-decoder's
        encoder's), or a decoder's."""
        return self.statistics if self.statistics is not None else self.decoder

    @property
    def atlases(self) -> tuple[str, ...]:
        """The atlases this report holds, in the order its pages show them: "encoder" (the encoder atlas),
        "decoder" (causal self-attention), "cross" (cross-attention). Read from the data, not from the kind of
        model that made it, so that the site renders what is there."""
        held = {"encoder": self.statistics, "decoder": self.decoder, "cross": self.cross}
        return tuple(name for name, atlas in held.items() if atlas is not None)

    @property
    def causal_examples(self) -> bool:
        """Whether an example page's attention is causal (a decoder's own: no encoder atlas), so its entropy is
        beside the uniform causal head's."""
        return self.atlases[:1] == ("decoder",)

    def to_json(self) -> str:
        """report.json: sorted keys, no NaN (a number that is not one is null), one key per line and each list of
        plain values (a head's numbers, a test's resamples) on its key's line: as easy to read and diff as
        indented JSON, and a third lighter (the default site's report, 505 KB indented, is 371 KB so)."""
        return _readable_json(self.model_dump(mode="json"), "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Report:
        """A published report.json (or a site directory holding one) read back into the records.

        Its `schema_version` is checked before anything else is read: a report of another version
        (an older or newer reportgen wrote it), a file that is not a reportgen report, not UTF-8 or
        not JSON, or a missing file raises a `DataError` (exit code 4) whose one line names the file
        and what is wrong.
        """
        path = Path(path)
        if path.is_dir() and (path / "report.json").is_file():
            path = path / "report.json"
        data = _read_json(path)
        if not isinstance(data, dict) or "schema_version" not in data:
            raise DataError(f"{path}: not a reportgen report (no schema_version at the top level)")
        version = data["schema_version"]
        if version != SCHEMA_VERSION:
            if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
                advice = "upgrade reportgen to read it"
            else:
                advice = "rebuild the site with this reportgen"
            raise DataError(f"{path}: schema version {_shown(version)}, this reportgen reads {SCHEMA_VERSION}; "
                            f"{advice}")
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            more = err.error_count() - 1
            raise DataError(f"{path}: not a valid report of schema version {SCHEMA_VERSION}: key '{where}': "
                            f"{first['msg']}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
                            ) from None

    def heads_frame(self) -> pandas.DataFrame:
        """One row per head of the model, in layer then head order: the per-head numbers of the report.

        Columns:

        - `layer`, `head`: 0-based, as on the site.
        - `label`: the head's main pattern, the key of `statistics.labels` ("previous_token", ...,
          "mixed" where no pattern passes its threshold): what colours the head map.
        - for an encoder-decoder, `group` ("encoder", "decoder", "cross") and `group_layer` (the layer within
          its group): its encoder's rows carry the encoder statistics, its decoder self-attention's the
          decoder statistics, its cross-attention's `cross_source_special` and `cross_entropy` (and their nulls,
          a uniform head over the source), NaN elsewhere, and no label on the cross-attention rows.
        - for a decoder, instead of the encoder statistics below: each statistic of `decoder`
          (`previous_token`, `sink`, `causal_entropy`, `duplicate_token`, `induction`) and `<statistic>_null`,
          the uniform causal head's score on the same tokens; NaN for a statistic that was not measured.
        - for each pattern statistic of `statistics` (`previous_token`, `next_token`, `cls_sep`,
          `same_token`, `within_word`, `entropy`, ...): `<statistic>`, the head's mean over the inputs,
          and `<statistic>_null`, what a uniform head scores on the same inputs (`statistics.nulls`;
          the same in every row, NaN where it does not apply).
        - with single-head ablation (`ablation.single_heads`): `ablation_value` (the task metric with
          the head masked), `ablation_delta` (its change from the unmasked model, in the metric's units),
          `ablation_relative` (the change relative to the unmasked metric), `ablation_p_value`,
          `ablation_p_adjusted` (corrected over the heads) and `ablation_significant`; with the
          importance experiment, `importance` (Michel et al.). Absent when the report has none.
        - with activation patching (`patching:`), per direction (`denoising`, `noising`): `patching_<direction>`
          (the normalised effect), `patching_<direction>_low` / `_high` (its 95% interval), `_p_adjusted`,
          `_significant`, and `_estimate` (attribution patching's estimate); NaN for a head not patched exactly.

        A number the report has as null is NaN. Needs pandas (`pip install "reportgen[pandas]"`).
        """
        try:
            import pandas
        except ImportError:
            raise MissingExtra('Report.heads_frame needs pandas: pip install "reportgen[pandas]"') from None
        cells = [(layer, head) for layer in range(self.layers) for head in range(self.heads)]
        where = [self._group_layer(layer) for layer, _ in cells]  # (group, layer within it) of each row
        atlases = {"encoder": self.statistics, "decoder": self.decoder}
        columns: dict[str, list[Any]] = {"layer": [layer for layer, _ in cells], "head": [head for _, head in cells]}
        if self.groups:
            columns["group"] = [group for group, _ in where]
            columns["group_layer"] = [within for _, within in where]
        columns["label"] = [atlases[group].labels[within][head] if atlases.get(group) is not None else None
                            for (group, within), (_, head) in zip(where, cells, strict=True)]

        def column(name: str, atlas: str, statistic, null: Number) -> None:
            """One statistic's values on its atlas's rows, NaN on the other groups' rows."""
            ours = [(within, head) if group == atlas else None
                    for (group, within), (_, head) in zip(where, cells, strict=True)]
            columns[name] = [_number(statistic.mean[c[0]][c[1]]) if statistic and c else float("nan") for c in ours]
            columns[f"{name}_null"] = [_number(null) if c else float("nan") for c in ours]
        for name in decoder_statistics() if self.decoder is not None else ():
            statistic = getattr(self.decoder, name)
            column(name, "decoder", statistic, statistic.null if statistic else None)
        for name in head_statistics() if self.statistics is not None else ():
            null = self.statistics.nulls.get(name)
            column(name, "encoder", getattr(self.statistics, name), null.uniform if null is not None else None)
        for name in ("source_special", "entropy") if self.cross is not None else ():
            statistic = getattr(self.cross, name)
            column(f"cross_{name}", "cross", statistic, statistic.null)
        single = self.ablation.single_heads if self.ablation is not None else None
        if single is not None:
            for key in ("value", "delta", "relative", "p_value", "p_adjusted"):
                columns[f"ablation_{key}"] = _per_head(getattr(single, key), cells)
            columns["ablation_significant"] = [bool(single.significant[layer][head]) for layer, head in cells]
        for effects in self.patching.directions if self.patching is not None else ():
            name = f"patching_{effects.direction}"
            for key in ("effect", "low", "high", "p_adjusted"):
                columns[f"{name}_{key}" if key != "effect" else name] = _per_head(getattr(effects, key), cells)
            columns[f"{name}_significant"] = [bool(effects.significant[layer][head]) for layer, head in cells]
            if effects.estimate is not None:
                columns[f"{name}_estimate"] = _per_head(effects.estimate, cells)
        importance = self.ablation.importance if self.ablation is not None else None
        if importance is not None:
            columns["importance"] = _per_head(importance.importance, cells)
        return pandas.DataFrame(columns)


    def _group_layer(self, layer: int) -> tuple[str, int]:
        """(the atlas a flat layer's heads are in, its layer there): an encoder-decoder's group and layer
        within it; any other model's own atlas ("encoder", or "decoder" for a decoder) and the layer itself."""
        if self.groups:
            return group_layer(layer, self.groups)
        return self.atlases[0], layer


class MissingExtra(ReportgenError, ImportError):
    """An optional dependency is not installed; the message says which extra of reportgen brings it."""


def head_statistics() -> list[str]:
    """The per-head pattern statistics of `PatternStatistics`, in its order (the columns of `heads_frame`)."""
    return [name for name, info in PatternStatistics.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, HeadStatistic)]


def decoder_statistics() -> list[str]:
    """The per-head statistics of `DecoderStatistics`, in its order (a decoder's columns of `heads_frame`)."""
    return [name for name, info in DecoderStatistics.model_fields.items()
            if DecoderStatistic in (info.annotation, *getattr(info.annotation, "__args__", ()))]


def _per_head(grid: list[list[Number]], cells: list[tuple[int, int]]) -> list[float]:
    return [_number(grid[layer][head]) for layer, head in cells]


def _number(value: Number) -> float:
    return float("nan") if value is None else float(value)


def _shown(value: Any) -> str:
    """A value from a file as a one-line message may quote it."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _read_json(path: Path) -> Any:
    """The JSON value in `path`; a DataError naming the file when it cannot be read as JSON."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: report file not found; build the site first (reportgen build)") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    except ValueError:  # a NUL character in the name
        raise DataError(f"{str(path)!r}: the report file name holds a NUL character") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{path}: is a directory without a report.json, not a report file")
    if not stat.S_ISREG(mode):  # a FIFO would block the read forever
        raise DataError(f"{path}: is not a regular file; a report is the report.json a build writes")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}), "
                        "so not a reportgen report.json") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}), "
                        "so not a reportgen report.json") from None
    except (RecursionError, ValueError) as err:  # nesting too deep, a number of thousands of digits
        raise DataError(f"{path}: cannot be read as JSON ({type(err).__name__}), so not a reportgen report.json"
                        ) from None



def _readable_json(value: object, newline: str) -> str:
    """`value` as JSON, objects and lists of lists or objects indented one space per level, lists of plain values
    (numbers, strings, null, booleans) on one line."""
    inner = newline + " "
    if isinstance(value, dict) and value:
        fields = (f"{json.dumps(key)}: {_readable_json(value[key], inner)}" for key in sorted(value))
        return "{" + inner + ("," + inner).join(fields) + newline + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return "[" + inner + ("," + inner).join(_readable_json(item, inner) for item in value) + newline + "]"
    return json.dumps(value, allow_nan=False, separators=(", ", ": "))


def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json (`reportgen schema --report`)."""
    schema = Report.model_json_schema(mode="serialization")
    schema["title"] = f"reportgen report.json, schema_version {SCHEMA_VERSION}"
    return schema
