"""The `openai` backend: models behind an OpenAI-compatible server (docs/REFERENCE.md, "Models behind a server")."""
