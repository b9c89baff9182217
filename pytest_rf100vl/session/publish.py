"""``--rf100vl-push-results ORG/NAME``: push this session's rows to a results dataset on the Hub
when the session ends (append-and-merge, see ``docs/publishing.md``).

A push happens after ``results.jsonl``, ``results.parquet`` and ``summary.md`` are written, and
reads them only: a failed push changes nothing local and never the test outcome; it is a
warning line with the exact command that retries it. The token is read by huggingface_hub
(``hf auth login`` or ``HF_TOKEN``) and never written anywhere by the plugin.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from rf100vl_hf.controls import visible
from rf100vl_hf.hub.results_repo import push_results
from rf100vl_hf.results.schema import ResultRow


def retry_command(folder: Path, repo_id: str, run_id: str) -> str:
    return shlex.join(["rf100vl-hf", "results", "push", str(folder), "--repo-id", repo_id, "--run", run_id])


def push_session(folder: Path, rows: list[ResultRow], repo_id: str, run_id: str) -> tuple[bool, str]:
    """Push ``rows``; returns whether it failed and the line to show: what was pushed, or what
    failed and how to retry."""

    if not rows:
        return True, f"no rows to push to {repo_id}"
    try:
        pushed = push_results(rows, repo_id)
    except Exception as exc:  # whatever failed, the session's results stand: say so and how to retry
        reason = visible((str(exc).splitlines() or [type(exc).__name__])[0])  # a Hub's message may hold escapes
        return True, f"pushing results to {repo_id} failed: {reason}; retry with: {retry_command(folder, repo_id, run_id)}"
    return False, f"pushed {len(rows)} row(s) to {repo_id}, which now holds {pushed.rows} ({pushed.commit_url})"
