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
- `plan/`: a sweep priced without running the model;
- here: a prompt config loaded and checked (`prompts`); items -> result rows (`rows`); one
  resumable run of a config (`session`), driven in this process (`local_run`) or on a Ray
  actor pool (`ray_run`); what one run asks for (`request`); `run` checks it, picks the
  driver and loads the model (`probes run` as one call); the extras a command needs
  (`extras`); the small test models (`testmodel`).
"""
