"""Prompt datasets + a model -> per-model result datasets (DESIGN sections 6 and 7).

May import `promptgen` (the item contract, errors, files); never `analysis` or `probes`.

- text -> token ids: `tokenize`; token ids -> log-probabilities: the backends (`backend` is the
  protocol; `hf`, `vllm_backend` + `vllm_logprobs`); log-probabilities -> distributions:
  `distributions` (pure maths), selected by `scoring_settings`; generated text -> answers:
  `parse`; items -> result rows: `rows`;
- a prompt config loaded and checked: `prompts`; a model checked and loaded: `models`;
- one resumable run of a config (selection, resume, key, flush, manifest): `session`, driven in
  this process (`local_run`) or on a Ray actor pool (`ray_run`); what one run asks for:
  `request` (`RunRequest`, `LoadOptions`); `run` checks it, picks the driver and loads the model
  (`probes run` as one call);
- the result folder, written and read: `results`; what a model is: `model_identity`; where and
  how it runs: `device`, `context_length`, `extras`; the small test models: `testmodel`.
"""
