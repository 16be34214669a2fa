"""The site while the ablation runs: where each experiment stands, the time left, and when a partial site
is worth writing.

A build writes a complete site as soon as the model run and the pattern statistics are done (they take
seconds; the ablation, minutes to hours), then again as experiments finish, and the finished site last.
Each write is a whole site swapped in as atomically as the last one (reportgen.site.output), so an
interrupted build leaves the last complete site and resumes from the cache. A write takes seconds,
so a build does not rewrite after every experiment of a small model: `AblationWatch.due` allows a
rewrite only while the time spent on partial sites stays within REWRITE_SHARE of the build's time so
far; on a model whose experiments take minutes each, that is after every one.

Plain data in and out: the pipeline tells the watch what happened (`tick`, `finished`, `wrote`) and
reads back a `BuildProgress` for the report. Nothing here runs a model or writes a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reportgen.report import BuildProgress, ExperimentCost, ExperimentState

REWRITE_SHARE = 0.05  # partial sites may take at most this share of the build's time so far
FIRST_SITE_MASKS = 2  # masks done before their pace is read: the first (the baseline's) also makes the recording pass
FIRST_SITE_SECONDS = 10.0  # a first partial site only for experiments with at least this long to go


class AblationWatch:
    """Where the experiments of one ablation stand, from the progress ticks and the experiments' ends.

    `planned`: each experiment's masks as counted from the settings (experiments.planned_masks), in the
    order they run; `started`: when the build started (the rewrite budget is a share of its time so far);
    `live`: whether the experiments will run (False when their whole record comes from the cache: then the
    watch only gathers their costs, and no partial site is written)."""

    def __init__(self, planned: dict[str, int], stages_left: list[str], started: float, live: bool = True,
                 clock: Callable[[], float] = time.perf_counter, share: float | None = None,
                 first_site: tuple[float, float] | None = None):
        self.planned = dict(planned)
        self.live = live
        self.stages_left = list(stages_left)
        self.started, self.clock = started, clock
        self.share = REWRITE_SHARE if share is None else share  # read when made, so a test can change it
        self.first_site = (FIRST_SITE_MASKS, FIRST_SITE_SECONDS) if first_site is None else first_site
        self.done: dict[str, int] = {name: 0 for name in planned}  # masks done (computed or from the cache)
        self.totals: dict[str, int] = {}  # masks in all, as the runner said once the experiment started
        self.costs: dict[str, ExperimentCost] = {}
        self.ablation_started: float | None = None
        self.writing = 0.0  # seconds spent writing partial sites
        self.writing_in_ablation = 0.0  # of those, while the ablation ran (not time its masks took)
        self.last_write = 0.0  # seconds the last site write took
        self.partial_sites = 0  # partial sites written
        self.interrupted = False  # the build was stopped (Ctrl+C): its last partial site says so

    @property
    def last(self) -> str | None:
        """The experiment that runs last: after it, the finished site is written, not a partial one."""
        return next(reversed(self.planned), None)

    def tick(self, stage: str, done: int, total: int) -> None:
        """The runner's progress: `stage` is an experiment's name ("single_heads"), or one of its
        statistics' resampling ("single_heads: permutations"), which is not a mask and is left out."""
        if self.ablation_started is None:
            self.ablation_started = self.clock()
        if stage in self.planned:
            self.done[stage] = done
            self.totals[stage] = total

    def finished(self, name: str, cost: ExperimentCost) -> None:
        self.costs[name] = cost
        self.done[name] = self.totals[name] = cost.masks

    def wrote(self, seconds: float, partial: bool = True) -> None:
        """A site write took `seconds`; a partial one counts against the rewrite budget."""
        self.last_write = seconds
        if partial:
            self.partial_sites += 1
            self.writing += seconds
            if self.ablation_started is not None:
                self.writing_in_ablation += seconds

    def due(self) -> bool:
        """Whether a partial site is worth writing now: the first once `first_site_due`, then each one more write
        like the last that keeps the time spent on partial sites within `share` of the build's time so far."""
        if not self.partial_sites:
            return self.first_site_due()
        return self.writing + self.last_write <= self.share * (self.clock() - self.started)

    def first_site_due(self) -> bool:
        """Whether the experiments are seen to take long enough for a site before them to be worth its seconds:
        `first_site[0]` masks done with `first_site[1]` seconds or more left at the pace so far, or running for
        `first_site[1]` already (a first mask that takes that long gives no pace before then). The runner makes
        its first stack of one mask (engine.Runner.outputs), so the pace is read a forward pass in."""
        if self.ablation_started is None:
            return False
        masks, worth = self.first_site
        if self.clock() - self.ablation_started >= worth:
            return True
        if sum(self.done.values()) < masks:  # asked at every mask: the pace (a BuildProgress) only once it is read
            return False
        left = self.state().seconds_left
        return left is not None and left >= worth

    def seconds_per_mask(self) -> float | None:
        """Seconds of ablation per mask done so far (partial-site writes left out), or None before any."""
        masks = sum(self.done.values())
        if self.ablation_started is None or not masks:
            return None
        return max(self.clock() - self.ablation_started - self.writing_in_ablation, 0.0) / masks

    def state(self) -> BuildProgress:
        """The progress a partial site shows: each experiment done, running or waiting, and the time left."""
        running = next((name for name in self.planned if name not in self.costs), None)
        states = [ExperimentState(name=name, state="done" if name in self.costs else
                                  "running" if name == running and self.ablation_started is not None else "waiting",
                                  masks_done=self.done[name], masks=self.totals.get(name, planned))
                  for name, planned in self.planned.items()]
        per_mask = self.seconds_per_mask()
        left = sum(max((item.masks or 0) - item.masks_done, 0) for item in states)
        return BuildProgress(experiments=states, seconds_per_mask=None if per_mask is None else round(per_mask, 4),
                             seconds_left=None if per_mask is None else round(per_mask * left, 1),
                             stages_left=self.stages_left, interrupted=self.interrupted)
