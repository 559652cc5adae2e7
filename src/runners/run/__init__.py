"""One run of a prompt config: the request, the session, the drivers, and the call that ties them.

From the top down (each imports only what is below it; pyproject `runners-run` contract):

- `runner`: `probes run` as one call: a request checked, its protocol resolved, the model
  loaded and the driver chosen (`run`, `run_many`, `Runner`, `resolve_protocol`);
- `local_driver` scores the session's items in this process, `ray_driver` on a Ray actor pool;
- `sizing`: the positions the selected items need, for an engine sized to them;
- `session`: one resumable run of a config (its rows selected, resumed, written, finished),
  and `served_recheck`, a served model's answers rechecked at resume;
- `request`: what one run asks for (`RunRequest`, `ResolvedRun`, `LoadOptions`).

This package's `__init__` imports nothing: `from runners.run.request import RunRequest` stays as
light as the request.
"""
