"""The on-disk cache: what a build computed, kept so a rebuild runs no model.

`store` is the cache itself (atomic, checksummed entries; model runs as `ExampleRun` records),
`usage` records which entries each build used, `info` answers `reportgen cache info` and `prune`
`reportgen cache prune`. The stages read and write through `store`; nothing here runs a model.
"""
