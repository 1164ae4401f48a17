"""--backend vulkan before and after the device-resident forward, side by side.

One process, one model, the same greedy decode with both: "host forward" is the earlier
path (the reference forward in numpy, each weight product one submission, activations
copied both ways: vulkan_runner(device_forward=False)), "device forward" is the current
one (state and activations on the device, a step recorded as one command buffer).
Printed per path: decode t/s, prefill t/s, submissions per decode step, the host
fallbacks a device step took (none expected), and a decode step split into the output
head (timed alone) and the rest; then the ratio.

On Mesa's lavapipe these are CPU numbers (the "GPU" is llvmpipe on the host's cores):
they show what leaving the host saves, not GPU speed. Run:
  bench/vulkan_device_forward_bench.py [-m models/demo.gguf] [--steps 8] [--numerics ds4]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import numpy as np

from ds4.adapters.compute.vulkan.runner import VulkanRunner, vulkan_runner
from ds4.adapters.compute.vulkan.runtime import runtime
from ds4.adapters.gguf.model_files import load_model


class CountingRun:
    """Counts the runtime's submissions (wraps VulkanRuntime.run on the instance)."""

    def __init__(self, rt: Any) -> None:
        self.count = 0
        self._inner = rt.run
        rt.run = self

    def __call__(self, record: Any) -> None:
        self.count += 1
        self._inner(record)


def measure(runner: Any, counter: CountingRun, prompt: list[int], steps: int) -> dict[str, Any]:
    runner.new_session(4).prefill(prompt[:2])  # weights up, pipelines built: not timed
    session = runner.new_session(len(prompt) + steps + 1)
    t0 = time.perf_counter()
    last = session.prefill(prompt)
    prefill_s = time.perf_counter() - t0
    picks, fallbacks = [], Counter[str]()
    before = counter.count
    t0 = time.perf_counter()
    for _ in range(steps):
        picks.append(int(np.argmax(last)))
        last = session.eval(picks[-1])
        if isinstance(runner, VulkanRunner):
            fallbacks += runner.device_forward.last.fallbacks
    decode_s = time.perf_counter() - t0
    subs = (counter.count - before) / steps
    head = runner.device_forward.head if isinstance(runner, VulkanRunner) else runner.forward.head
    x = np.full((1, runner.forward.hp.n_hc, runner.forward.hp.n_embd), 0.5, np.float32)
    t0 = time.perf_counter()
    for _ in range(3):
        head(x)
    head_s = (time.perf_counter() - t0) / 3
    return {"prefill_tps": len(prompt) / prefill_s, "decode_tps": steps / decode_s,
            "layers_ms": 1000 * (decode_s / steps - head_s), "head_ms": 1000 * head_s,
            "subs_per_step": subs, "picks": picks,
            "fallbacks": dict(fallbacks)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", default="models/demo.gguf", help="GGUF (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=8, help="decode steps (default: %(default)s)")
    ap.add_argument("--prompt-tokens", type=int, default=16,
                    help="prefill length (default: %(default)s)")  # fmt: skip
    ap.add_argument("--numerics", default="ds4", choices=["ds4", "fp32"],
                    help="numerics (default: %(default)s)")  # fmt: skip
    args = ap.parse_args()
    if not 1 <= args.steps <= 4096 or not 1 <= args.prompt_tokens <= 4096:
        ap.error("--steps and --prompt-tokens must be in 1..4096")
    model, hp = load_model(args.model)
    rt = runtime()
    counter = CountingRun(rt)
    prompt = [int(t) for t in np.random.default_rng(5).integers(0, hp.n_vocab, args.prompt_tokens)]
    print(f"{args.model}: {hp.n_layer} layers, numerics {args.numerics}, device {rt.dev.name}")
    results = {}
    for name, device in (("host forward", False), ("device forward", True)):
        runner = vulkan_runner(model, hp, numerics=args.numerics, device_forward=device)
        results[name] = r = measure(runner, counter, prompt, args.steps)
        print(
            f"{name:15s} decode {r['decode_tps']:7.2f} t/s  prefill {r['prefill_tps']:7.2f} t/s"
            f"  submissions/step {r['subs_per_step']:6.1f}  fallbacks {r['fallbacks'] or 'none'}"
        )
        print(f"{'':15s} per step: head {r['head_ms']:7.1f} ms, the rest {r['layers_ms']:7.1f} ms")
    a, b = results["host forward"], results["device forward"]
    print(
        f"device/host: decode x{b['decode_tps'] / a['decode_tps']:.2f}, "
        f"prefill x{b['prefill_tps'] / a['prefill_tps']:.2f}; "
        f"same greedy picks: {a['picks'] == b['picks']}"
    )


if __name__ == "__main__":
    main()
