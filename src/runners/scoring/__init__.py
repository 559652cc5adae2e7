"""Text to token ids to distributions: `tokenize`, `distributions`, `number_bound`, `parse`, the run's `settings`
and `token_accounting` (what a request costs, for plans and the backends' own counts)."""
