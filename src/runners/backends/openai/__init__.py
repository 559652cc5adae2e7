"""The `openai` backend: models behind an OpenAI-compatible server (docs/ARCHITECTURE.md, "Models behind a server")."""
