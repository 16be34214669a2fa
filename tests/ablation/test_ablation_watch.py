"""The watch over a running ablation (reportgen.ablation.watch): where each experiment stands, the time left,
and when a partial site is worth writing, driven by a clock the test sets."""

from reportgen.ablation.watch import AblationWatch
from reportgen.report import ExperimentCost


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch(clock: Clock, share: float = 0.05) -> AblationWatch:
    return AblationWatch({"baseline": 1, "single_heads": 72, "whole_layers": 6}, ["comparison"], started=clock.now,
                         clock=clock, share=share)


def test_before_any_mask_every_experiment_waits_and_no_time_is_guessed():
    state = watch(Clock()).state()
    assert [item.state for item in state.experiments] == ["waiting"] * 3
    assert [item.masks for item in state.experiments] == [1, 72, 6]
    assert state.seconds_left is None and state.seconds_per_mask is None
    assert state.stages_left == ["comparison"]


def test_the_time_left_is_the_masks_left_at_the_measured_seconds_per_mask():
    clock = Clock()
    follow = watch(clock)
    follow.tick("baseline", 0, 1)  # the ablation starts
    clock.now += 2
    follow.tick("baseline", 1, 1)
    follow.finished("baseline", ExperimentCost(masks=1, computed=1, seconds=2.0))
    clock.now += 18
    follow.tick("single_heads", 9, 80)  # the runner's own total wins over the planned 72
    follow.tick("single_heads: permutations", 500, 1000)  # resampling, not masks: left out
    state = follow.state()
    assert [item.state for item in state.experiments] == ["done", "running", "waiting"]
    assert state.experiments[1].masks_done == 9 and state.experiments[1].masks == 80
    assert state.seconds_per_mask == 2.0  # 20 s over 10 masks
    assert state.seconds_left == 2.0 * (71 + 6)


def test_writing_partial_sites_is_left_out_of_the_seconds_per_mask():
    clock = Clock()
    follow = watch(clock)
    follow.wrote(7.0)  # a site written before the ablation started: not part of its time
    clock.now += 7
    follow.tick("single_heads", 0, 72)
    clock.now += 30
    follow.wrote(10.0)
    follow.tick("single_heads", 10, 72)
    assert follow.seconds_per_mask() == 2.0  # (30 - 10) s over 10 masks


def test_a_partial_site_is_due_only_within_the_share_of_the_build_time():
    clock = Clock()
    follow = watch(clock, share=0.1)
    follow.wrote(5.0)  # the first site took 5 s
    clock.now += 60  # 60 s in: 5 + 5 > 6
    assert not follow.due()
    clock.now += 40  # 100 s in: 5 + 5 <= 10
    assert follow.due()
    follow.wrote(5.0)
    assert not follow.due()  # 10 s spent, one more would make 15 > 10
    follow.wrote(3.0, partial=False)  # the finished site counts for the next estimate only
    clock.now += 70  # 170 s in: 10 + 3 <= 17
    assert follow.due()


def test_the_last_experiment_is_the_one_after_which_the_finished_site_is_written():
    assert watch(Clock()).last == "whole_layers"
    assert AblationWatch({}, [], started=0.0).last is None


def test_a_short_ablation_gets_no_first_site_and_a_long_one_gets_it_once_its_pace_is_read():
    clock = Clock()
    short, long = watch(clock), watch(clock)
    assert not short.due()  # no experiment started: nothing is known
    short.tick("baseline", 0, 1)
    long.tick("baseline", 0, 1)
    clock.now += 1.5
    long.tick("baseline", 1, 1)  # one mask, which made the recording pass: no pace read from it alone
    assert not long.due() and long.state().seconds_left is not None
    clock.now += 0.5  # 2 s in: 72 masks done, 7 left, at 0.028 s each / 2 done, 77 left at 1 s each
    short.tick("single_heads", 72, 72)
    long.tick("single_heads", 1, 72)
    assert not short.due()
    assert long.due() and long.first_site_due()
    long.wrote(4.0)  # the first partial site: from here the share of the build's time decides
    clock.now += 3.0
    assert not long.due() and long.first_site_due()


def test_a_first_mask_slower_than_the_first_site_threshold_gets_the_site_without_a_pace():
    clock = Clock()
    follow = watch(clock)
    follow.tick("single_heads", 0, 72)
    clock.now += 9.9
    assert not follow.due() and follow.state().seconds_left is None
    clock.now += 0.2  # FIRST_SITE_SECONDS running, no mask done yet
    assert follow.due()


def test_the_first_site_thresholds_are_read_when_the_watch_is_made(monkeypatch):
    from reportgen.ablation import watch as module

    monkeypatch.setattr(module, "FIRST_SITE_SECONDS", 0.0)
    monkeypatch.setattr(module, "FIRST_SITE_MASKS", 0)
    follow = watch(Clock())
    follow.tick("baseline", 0, 1)
    assert follow.due()  # what the tests of partial sites use: every build writes one
    given = AblationWatch({"baseline": 1}, [], started=100.0, clock=Clock(), first_site=(2, 10.0))
    given.tick("baseline", 0, 1)
    assert not given.due()  # thresholds given when it is made win
