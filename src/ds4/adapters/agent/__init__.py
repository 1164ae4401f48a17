"""The agent's tools against the local machine: files, shell jobs, a headless browser,
and the JSON records of saved sessions."""
