# A real inference code path: Hugging Face transformers' LlamaForCausalLM with random fp16
# weights (no download), greedy decoding of TOKENS tokens at batch 1.
# Prints one JSON line: per-token ms (steady), output token hash, parameter bytes.
# Copied from ../shared/traces/programs/llama.py, the program behind the H200 traces in
# bench/traces (its README gives their provenance); scripts/gpu-overhead.sh times it.
import json, os, sys, time, hashlib, statistics
import torch
from transformers import LlamaConfig, LlamaForCausalLM
layers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
hidden = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 24
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                  num_attention_heads=hidden // 128, num_key_value_heads=max(1, hidden // 512),
                  vocab_size=32000, max_position_embeddings=4096)
torch.set_default_dtype(torch.float16)
with torch.device("cuda"):
    model = LlamaForCausalLM(cfg).eval()
pbytes = sum(p.numel() * p.element_size() for p in model.parameters())
ids = torch.randint(0, 32000, (1, 32), generator=torch.Generator().manual_seed(1)).cuda()
times, out = [], []
past = None
with torch.no_grad():
    x = ids
    for t in range(tokens):
        t0 = time.perf_counter()
        r = model(input_ids=x, past_key_values=past, use_cache=True)
        past = r.past_key_values
        x = r.logits[:, -1:].argmax(-1)
        out.append(int(x.item()))
        times.append(time.perf_counter() - t0)
steady = times[2:] if len(times) > 4 else times
print(json.dumps({"mode": os.environ.get("MSCHED_MODE", "none"), "unknown": os.environ.get("MSCHED_UNKNOWN", ""),
                  "budget": os.environ.get("MSCHED_GPU_MEMORY", ""), "templates": bool(os.environ.get("MSCHED_TEMPLATES")),
                  "layers": layers, "hidden": hidden, "param_gb": pbytes / 1e9,
                  "token_ms_median": 1e3 * statistics.median(steady), "prefill_ms": 1e3 * times[0],
                  "tokens_hash": hashlib.sha256(json.dumps(out).encode()).hexdigest()[:16]}), flush=True)
