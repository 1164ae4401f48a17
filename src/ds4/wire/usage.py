"""Usage objects per API (docs/reference/server.md §3.3), with cached-token fields for all three."""

from __future__ import annotations

from ds4.domain.generation.events import Usage


def _clamped(usage: Usage) -> tuple[int, int, int, int]:
    prompt = max(usage.prompt_tokens, 0)
    read = min(max(usage.cached_tokens, 0), prompt)
    write = prompt - read
    return prompt, read, write, max(usage.completion_tokens, 0)


def openai_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def responses_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": prompt + completion,
    }


def anthropic_usage(usage: Usage) -> dict[str, object]:
    prompt, read, write, completion = _clamped(usage)
    return {
        "input_tokens": max(0, prompt - read - write),
        "output_tokens": completion,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }
