"""The vLLM backend: `backend` (`VLLMBackend`, the engine), `logprobs` (queries and reads, pure) and `bounded`."""
