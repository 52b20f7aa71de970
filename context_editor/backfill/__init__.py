"""Jobs over every stored session, on one machine or a Ray cluster: `backfill` (what a new domain
version would change, and `--apply`), `audit verify --all`, `replay --all`.

jobs (the work of one batch, the same on every engine) · engines (local, ray) · driver (key-range
plan, resumable --out, progress) · diff (stored state vs re-run) · report (outputs) · cli.
"""
