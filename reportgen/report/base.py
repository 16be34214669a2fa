"""The record every part of the report is, and the schema's version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    pass


SCHEMA_VERSION = 4  # 3: `decoder` (a decoder's statistics), and `statistics` null for a decoder; 4: an example's
# `target_tokens` (a count) is `n_target_tokens`, as `n_tokens` is

Number = float | None
Grid = list[list[Number]]  # [layer][head]


class Record(BaseModel):
    """A part of the report. Unknown keys are refused, so the schema says all there is.

    Records also read like the JSON they serialise to (`report["statistics"]["entropy"]`), the
    way templates and readers of report.json address them.
    """

    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)
