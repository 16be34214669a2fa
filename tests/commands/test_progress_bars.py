"""The build's progress bars (reportgen.commands.terminal.RichProgress): each stage's elapsed time, and an
estimate of the time left while it runs, none once it is done (a finished stage used to read 0:00:00)."""

import re

from rich.console import Console

from reportgen.commands.terminal import RichProgress


def rendered(progress: RichProgress) -> str:
    console = Console(record=True, width=120, force_terminal=False)
    console.print(progress._bars.make_tasks_table(progress._bars.tasks))
    return console.export_text()


def test_a_running_stage_shows_its_time_left_and_a_finished_one_only_its_elapsed_time():
    progress = RichProgress()
    clock = [0.0]
    progress._bars.get_time = lambda: clock[0]  # rich reads the time through this: the test sets it
    progress("Ablation: single heads", 0, 100)
    clock[0] = 10.0
    progress("Ablation: single heads", 10, 100)
    clock[0] = 20.0
    progress("Ablation: single heads", 20, 100)  # one mask a second: the 80 left take 80 s
    running = rendered(progress)
    assert re.search(r"20/100\s+0:00:20\s+~0:01:20 left", running), running
    clock[0] = 80.0
    progress("Ablation: single heads", 100, 100)
    done = rendered(progress)
    assert re.search(r"100/100\s+0:01:20\s*$", done.strip()), done
    assert "left" not in done and "0:00:00" not in done
