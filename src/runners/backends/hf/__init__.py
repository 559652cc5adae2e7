"""The transformers backend: `backend` (`HFBackend`), its passes (`logprobs`, `tree_pass`), `bounded` and `generate`."""
