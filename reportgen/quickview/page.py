"""One input's single-file page, and writing it where a user asked without overwriting their files."""

from __future__ import annotations

from pathlib import Path

from reportgen.errors import OutputError, writing
from reportgen.quickview.inputs import QuickRun
from reportgen.site.standalone import MARKER, page_html, write_page
from reportgen.site.views import combined_payload, seq2seq_groups

MARKER_WITHIN = 4096  # the marker is in the <head>, within the first bytes of a file reportgen wrote


def title_of(quick: QuickRun) -> str:
    return f"Attention of {quick.model}" if quick.model else "Attention"


# What a page of an encoder-decoder says under its title: what its switch shows, and what it leaves out.
GROUPS_NOTE = ("Encoder: the source attending to itself; Decoder: the decoder's inputs (the target shifted right "
               "behind the start token) attending to themselves and those before them; Cross: the decoder's "
               "inputs (left) attending to the source (right). The query/key view is not shown for "
               "encoder-decoders.")


def view_payload(quick: QuickRun) -> dict:
    """The payload of `quick`'s page (reportgen.site.views.combined_payload), with an encoder-decoder's
    groups and target: the encoder's attention stays the top level, the views' default group."""
    payload = combined_payload(quick.run)
    if quick.pair_run is not None:
        payload["target"] = quick.pair_run.target
        payload["groups"] = seq2seq_groups(quick.pair_run, quick.special["source"], quick.special["target"])
    return payload


def page_text(quick: QuickRun) -> str:
    """The single-file page of `quick` (reportgen.site.standalone.page_html)."""
    run = quick.run
    shape = run.attention.shape
    lines = [f"{shape[0]} layers x {shape[1]} heads, {run.n_tokens} tokens."]
    if quick.pair_run is not None:
        pair = quick.pair_run
        lines = [f"{shape[0]} encoder layers, {pair.decoder_attention.shape[0]} decoder layers x {shape[1]} heads; "
                 f"{run.n_tokens} source tokens, {len(pair.target_tokens)} decoder tokens.", GROUPS_NOTE]
    return page_html(view_payload(quick), title_of(quick), lines + [f"Note: {note}" for note in quick.notes])


def check_target(path: Path) -> None:
    """Refuses a path that is a directory, a link, a file reportgen did not write or a name that does not end in
    .html (`--out reportgen.yaml` wrote a page over the project's config to be), before any work."""
    if path.is_symlink():
        raise OutputError(f"--out {path}: a symlink; reportgen writes only files of its own (nothing was written)")
    if path.exists() and not path.is_file():
        raise OutputError(f"--out {path}: not a file (a directory?); give a file name such as view.html")
    if path.suffix.lower() not in (".html", ".htm"):
        raise OutputError(f"--out {path}: a view is one HTML file; give a name ending in .html (nothing was written)")
    if path.parent != Path("") and not path.parent.is_dir():
        raise OutputError(f"--out {path}: the directory {path.parent} does not exist")
    if path.is_file():
        with path.open("rb") as handle:
            head = handle.read(MARKER_WITHIN)
        if MARKER.encode("ascii") not in head:
            raise OutputError(f"--out {path}: the file exists and was not written by `reportgen view`; "
                              "reportgen overwrites only its own files (nothing was written)")


def write_view(quick: QuickRun, path: Path) -> int:
    """Writes the page of `quick` to `path` (checked by `check_target`); returns its size in bytes."""
    check_target(path)
    text = page_text(quick)
    with writing(f"--out {path}", "nothing was written"):
        write_page(path, text)
    return len(text.encode("utf-8"))
