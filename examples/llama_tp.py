"""A small Llama from ``transformers`` (random weights from a config in code; nothing downloaded), tensor parallel
with torch's TP API on the ``mscclpp`` backend, checked against the same model unsharded on every rank.

    mpirun -np 2 python examples/llama_tp.py [--tokens 32]       (or torchrun --nproc-per-node 2 ...)

fp32: greedy decode of ``--tokens`` tokens gives the unsharded model's tokens. bf16: the logits of one forward agree
with the unsharded bf16 model's within ``--bf16-tol`` times their largest magnitude (a rank sums its partial
products in a different order than one GPU does, and bf16 keeps 8 bits). On GPUs the fp32 decode step also runs
captured in a CUDA graph (static KV cache) and must give the same tokens again. Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import copy


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32, help="tokens to decode greedily")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--bf16-tol", type=float, default=0.05, help="bf16 logits: max |diff| / max |logit|")
    return ap.parse_args()


def make_model(args, device):
    """The same random Llama on every rank (seeded), fp32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=512, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(device).eval()


def tensor_parallel(model, mesh):
    """Megatron layout: q/k/v and gate/up column-parallel, o and down row-parallel (one all-reduce each)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    return model


def greedy(model, prompt, tokens: int, step=None) -> list[int]:
    """Greedy decode with a static KV cache: the prompt in one forward, then ``step(model, cache, token, pos)``
    (one forward by default) per token."""
    import torch
    from transformers import StaticCache
    cache = StaticCache(config=model.config, max_cache_len=prompt.shape[1] + tokens)
    pos = torch.arange(prompt.shape[1], device=prompt.device)
    logits = model(input_ids=prompt, past_key_values=cache, cache_position=pos, use_cache=True).logits
    out = [int(logits[0, -1].argmax())]
    step = step or eager_step
    for k in range(tokens - 1):
        token = torch.tensor([[out[-1]]], device=prompt.device)
        where = torch.tensor([prompt.shape[1] + k], device=prompt.device)
        out.append(int(step(model, cache, token, where)[0, -1].argmax()))
    return out


def eager_step(model, cache, token, pos):
    return model(input_ids=token, past_key_values=cache, cache_position=pos, use_cache=True).logits


class GraphStep:
    """The decode step captured once in a CUDA graph (after two eager warm-up steps) and replayed for every token."""

    def __init__(self):
        self.graph = self.token = self.pos = self.logits = None
        self.calls = 0

    def __call__(self, model, cache, token, pos):
        import torch
        self.calls += 1
        if self.calls <= 2:  # warm-up: first calls set up pymscclpp channels and the cache, outside capture
            return eager_step(model, cache, token, pos)
        if self.graph is None:
            self.token, self.pos = token.clone(), pos.clone()
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.logits = eager_step(model, cache, self.token, self.pos)
        self.token.copy_(token)
        self.pos.copy_(pos)
        self.graph.replay()
        return self.logits


def compare(args) -> tuple[bool, list[str]]:
    """Decode with the sharded and the unsharded model on the default group; (all agree, report lines)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from pymscclpp.runtime.backend import IS_SIM
    device = torch.device("cpu") if IS_SIM else torch.device("cuda", torch.cuda.current_device())
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    full = make_model(args, device)
    sharded = tensor_parallel(copy.deepcopy(full), mesh)
    prompt = torch.randint(0, full.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        want = greedy(full, prompt, args.tokens)
        got = greedy(sharded, prompt, args.tokens)
        ok = got == want
        report = [f"fp32 greedy {args.tokens} tokens: {'same' if ok else f'DIFFER {got} vs {want}'}"]
        if not IS_SIM:
            graphed = greedy(sharded, prompt, args.tokens, GraphStep())
            ok &= graphed == want
            report.append(f"CUDA graph decode: {'same' if graphed == want else f'DIFFER {graphed}'}")
        a = full.to(torch.bfloat16)(prompt).logits.float()
        b = sharded.to(torch.bfloat16)(prompt).logits.float()
        rel = ((a - b).abs().max() / a.abs().max()).item()
        ok &= rel <= args.bf16_tol
        report.append(f"bf16 logits: max |diff| / max |logit| = {rel:.4f} (tolerance {args.bf16_tol})")
    return ok, report


def main() -> int:
    args = parse_args()
    from pymscclpp.torch.launch import init
    init("mscclpp")
    import torch.distributed as dist
    ok, report = compare(args)
    if dist.get_rank() == 0:
        print("\n".join(report), flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
