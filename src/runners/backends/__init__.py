"""The scoring backends: `protocol` (what every backend implements), `hf` (transformers) and `vllm`."""
