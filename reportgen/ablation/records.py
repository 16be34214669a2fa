"""The whole head-ablation stage's record and its cache: `run_ablations` runs the experiments
(`reportgen.ablation.experiments.ablate`) on the model in a directory and stores the record under the
model's fingerprint, the data file's content and every setting (`record_key`), so that a rebuild with
nothing changed reads it back and loads neither the model nor a mask; `has_stored_record` says whether
it would. The warnings about the task and its data (TASK_WARNINGS) are stored with the record and said
again when it is read back.

Kept apart from the experiments, which compute a record from a loaded task: this is the stage's entry
point (`reportgen.pipeline` calls it), which loads the task (`reportgen.ablation.task_loading`) only when
no stored record answers.
"""

from __future__ import annotations

import hashlib
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from reportgen.ablation.engine import CODE_VERSION, Progress, ResultCache, cache_method
from reportgen.ablation.experiment_context import STATS_VERSION
from reportgen.ablation.experiments import Finished, ablate
from reportgen.ablation.task_loading import load_ablation_task
from reportgen.cache.store import Cache, key_of
from reportgen.config import BUILTIN_DATA, AblationSettings
from reportgen.datafiles import open_data_file
from reportgen.errors import DataError, ModelError
from reportgen.report import Ablation, ExperimentCost

if TYPE_CHECKING:  # Ray is imported only when a build asks for it
    from reportgen.ablation.ray_runner import RayCluster

__all__ = ["has_stored_record", "record_key", "run_ablations"]

# Where the warnings about the task and its data come from (the module files, by name): loading the task
# and its data file, and the unmasked model's undefined metric (`make_context`).
TASK_WARNINGS = ("experiment_context.py", "task_loading.py", "datafiles.py")


def run_ablations(model_dir: Path, settings: AblationSettings, *, device: str, cache_dir: Path, fingerprint: str,
                  progress: Progress | None = None, cluster: RayCluster | None = None,
                  finished: Finished | None = None) -> Ablation:
    """Run the enabled experiments on the model in `model_dir` (see the module docstring); every
    finished mask is cached under `cache_dir`, keyed by the model's `fingerprint`, and so is the
    whole record (`record_key`): a rebuild with nothing changed reads it back and loads no model.
    The warnings about the task and its data are stored with it and said again when it is read.
    With a `cluster` (`reportgen.ablation.ray_runner.connected`) the masks are evaluated on its actors.
    `finished` hears of each experiment as it ends (`ablate`); from a stored record, of each at once, with
    the masks it took then and none computed now."""
    store = Cache(Path(cache_dir))
    key = _whole_record_key(model_dir, settings, fingerprint)
    folder = f"ablation/{fingerprint}"
    stored = store.get_json(folder, key) if key else None
    record = _stored_record(stored, settings)
    if record is not None:
        masks = stored.get("masks") if isinstance(stored.get("masks"), dict) else {}  # none in older records
        for name in record.experiments if finished is not None else ():
            finished(record, name, ExperimentCost(masks=int(masks.get(name, 0)), computed=0, seconds=0.0))
        return record
    caught: list[warnings.WarningMessage] = []
    costs: dict[str, int] = {}

    def counted(partial: Ablation, name: str, cost: ExperimentCost) -> None:
        costs[name] = cost.masks
        if finished is not None:
            finished(partial, name, cost)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            task = load_ablation_task(model_dir, settings, device=device)
            cache = ResultCache(Path(cache_dir), fingerprint, task.data_hash(),
                                cache_method(settings.method, settings.seeds[0]))
            pool = cluster.pool(model_dir, settings, device, fingerprint, task.data_hash()) if cluster else None
            with pool if pool is not None else nullcontext():
                result = ablate(task, settings, cache, progress, pool, counted)
    finally:  # said as they were, whether or not the run finished
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                                   source=warning.source)
    notes = [str(warning.message) for warning in caught if issubclass(warning.category, UserWarning)
             and "reportgen" in warning.filename and Path(warning.filename).name in TASK_WARNINGS]
    if key:  # `uses`: the folder of the masks and statistics it was made from, which housekeeping keeps with it
        store.put_json(folder, key, {"record": result.model_dump(mode="json"), "warnings": notes, "masks": costs,
                                     "uses": cache.directory.relative_to(store.root).as_posix()})
    return result


def has_stored_record(model_dir: Path, settings: AblationSettings, cache_dir: Path, fingerprint: str) -> bool:
    """Whether `run_ablations` would read the whole record back (and so run no experiment), said without
    reading it as a build does (its warnings are said once, when it is read)."""
    key = _whole_record_key(model_dir, settings, fingerprint)
    stored = Cache(Path(cache_dir)).get_json(f"ablation/{fingerprint}", key) if key else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _stored_record(stored, settings) is not None


def _whole_record_key(model_dir: Path, settings: AblationSettings, fingerprint: str) -> str | None:
    """The whole record's cache key, or None when the data file cannot be read (loading the task says why)."""
    data_sha256 = _data_sha256(settings)
    return (f"record-{record_key(settings, fingerprint, data_sha256, _grouped(model_dir))}" if data_sha256
            else None)


def record_key(settings: AblationSettings, fingerprint: str, data_sha256: str, grouped: bool = False) -> str:
    """The key of a whole ablation record: everything it depends on. The model's files (`fingerprint`),
    the data file's content, every setting but where the data file is (a moved project keeps its
    record), the statistics' and the masks' code versions. The device is left out, as it is from the
    mask cache: it changes outputs only at float rounding; so is where the masks ran (`ray`), so that
    a Ray build and a local one share the cache both ways. An encoder-decoder's record (its groups, its
    layer halves within each group) has a key of its own, which no record without them was stored under;
    every other model's key is as it was."""
    fields = settings.model_dump(mode="json")
    fields.pop("data")
    fields.pop("ray", None)
    if fields.get("precision") == "float32":  # the default: the key records had before the setting existed
        fields.pop("precision")
    return key_of("ablation-record", STATS_VERSION, CODE_VERSION, fingerprint, data_sha256, fields,
                  *(("groups-1",) if grouped else ()))


def _grouped(model_dir: Path) -> bool:
    """Whether the model's kind has its heads in groups (an encoder-decoder's three, reportgen.kinds), from
    config.json without loading it; False where it cannot be read (loading the task then says why)."""
    from reportgen.kinds import kind_of

    try:
        return kind_of(Path(model_dir)).grouped
    except (ModelError, OSError):
        return False


def _data_sha256(settings: AblationSettings) -> str | None:
    """sha256 of the task's data file; None when it cannot be read (loading the task then says why)."""
    path = BUILTIN_DATA if settings.data == "builtin" else Path(settings.data)
    digest = hashlib.sha256()
    try:
        with open_data_file(path, "data file") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except (DataError, OSError):
        return None
    return digest.hexdigest()


def _stored_record(stored: Any, settings: AblationSettings) -> Ablation | None:
    """A stored whole record as this build shows it (its data file where the settings say), its
    warnings said again; None when there is none, or it is of another layout."""
    if not isinstance(stored, dict) or not isinstance(stored.get("warnings"), list):
        return None
    try:
        record = Ablation.model_validate(stored.get("record"))
    except ValidationError:
        return None
    record.task.data = settings.data
    for note in stored["warnings"]:
        warnings.warn(str(note), UserWarning, stacklevel=1)
    return record
