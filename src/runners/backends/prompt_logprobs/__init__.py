"""Scoring read off prompt log-probabilities, as vLLM answers it: what the `vllm` and `openai` backends share.

vLLM has no "score these continuations" call: it generates, and scoring is read off the log-probabilities it
returns for the prompt and for chosen next tokens (docs/DESIGN.md section 6). The in-process engine
(`runners.backends.vllm`) and a vLLM-compatible server (`runners.backends.openai`) answer in the same shapes, so
the two backends plan the same prompts and read the answers with the same code, kept here:

- `queries`: the engine prompts that answer a batch of `ScoreRequest`s (`plan_queries`), the candidate ids cut
  into groups an engine takes (`candidate_groups`), and the results assembled from the answered prompts;
- `read`: the checking readers of the answers (prompt and next-token log-probabilities);
- `bounded`: bounded number tries, one engine call per trie level.

Each backend only sends the prompts and fills in the answers. Nothing here imports vllm, so it is tested
without it and the `openai` backend runs without the `vllm` extra.
"""
