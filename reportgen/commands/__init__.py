"""The command line: what a user types in, the pipeline run and its answer out.

`cli` defines the commands (`build`, `serve`, `init`, `schema`, `publish`, `cache`) and turns a
`reportgen.errors.ReportgenError` into one line and its exit code; `publish` puts a built site on a
gh-pages branch, `watch` rebuilds on change for `serve --watch`, and `preview_server` serves the
site with live reload. The top of the flow: it may import every stage, and no stage imports it.
"""
