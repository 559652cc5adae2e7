"""Prompt datasets + a model -> per-model result datasets (docs/REFERENCE.md, "runners").

May import `promptgen` (the item contract, errors, files); never `analysis` or `probes`.

- `scoring/`: text -> token ids (`tokenize`), log-probabilities -> distributions
  (`distributions`, `number_bound`), generated text -> answers (`parse`), the run's `settings`,
  and what a request costs (`token_accounting`);
- `exchange`: the requests and results every backend trades (below `scoring`);
- `backends/`: token ids -> log-probabilities or text; `protocol` is what every backend
  implements, `hf/` (transformers), `vllm/` and `openai/` (a server) implement it, and
  `prompt_logprobs/` is what the last two share;
- `model/`: a model checked, keyed and loaded (`load`, `identity`, `device`, `context_length`);
- `results/`: the result folder, written and read (`layout`, `parts`, `manifest`), validated
  (`check`) and resumed (`resume`);
- `results/` also holds the `--out` guard (`out_folder`) and a finished run's `summary`;
- `run/`: one run of a config: what it asks for (`request`), its resumable `session`, driven in
  this process (`local_driver`) or on a Ray actor pool (`ray_driver`), and `runner`, which
  checks a request, picks the driver and loads the model (`probes run` as one call);
- `plan/`: a sweep priced without running the model (it reads `run`'s request and row selection);
- here: a prompt config loaded and checked (`prompts`); items -> result rows (`rows`); a
  seeded sample of a config's units (`sample`); the extras a command needs (`extras`); the
  small test models (`testmodel`).
"""
