"""Greedy continuation and one-pass logits of a transformers model, with the checks every golden
script makes (imported by make_dense_golden.py and make_deepseek_golden.py).

greedy_and_logits(model, prompt, new_tokens, eos_ids, bos_id, label) runs
model.generate(do_sample=False, min_new_tokens = max_new_tokens = new_tokens) with the KV cache,
then ONE forward pass (use_cache=False) over prompt + continuation, and checks that (b) the
cached generation picks the argmax of the plain forward pass at every step (so min_new_tokens
never had to suppress an eos) and that no greedy token is an eos id. Returns
(sequence [1, T], greedy [new_tokens], logits [T, vocab] float32, cache_err = max |generate's
logits - the forward pass's| over the continuation, margins = top-1 minus top-2 logit per step).
"""
import torch
from transformers import GenerationConfig


def check_reference(ref, logits, label):
    """(a) of the golden scripts: the independent float64 forward pass `ref` agrees with
    transformers' `logits` (both numpy) to 1e-5 * max|ref|; returns (max abs difference, max|ref|)."""
    import numpy as np
    ref_err = float(np.abs(ref - logits).max())
    scale = float(np.abs(ref).max())
    assert ref_err <= 1e-5 * scale, f"{label}: HF and the float64 reference differ by {ref_err} (max {scale})"
    return ref_err, scale


def golden_fields(prompt, greedy, margins, ref_err, cache_err, logits):
    """The leading fields of every golden.json: the ids, the greedy margin and the cross-check
    errors (insertion order is the file's order)."""
    import numpy as np
    return {
        "prompt_ids": prompt[0].tolist(),
        "greedy_ids": greedy.tolist(),
        "min_greedy_margin": min(margins),
        "max_abs_error_vs_float64_reference": ref_err,
        "max_abs_error_generate_vs_forward": cache_err,
        "max_abs_logit": float(np.abs(logits).max()),
    }


def greedy_and_logits(model, prompt, new_tokens, eos_ids, bos_id, label):
    eos = sorted(eos_ids)
    P = prompt.shape[1]
    with torch.no_grad():
        gc = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              eos_token_id=eos, bos_token_id=bos_id, pad_token_id=eos[0])
        res = model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=gc,
                             return_dict_in_generate=True, output_logits=True)
        seq = res.sequences
        assert seq.shape[1] == P + new_tokens
        greedy = seq[0, P:]
        logits = model(seq, use_cache=False).logits[0].float()
    fwd_pick = logits[P - 1:-1].argmax(-1)
    if not torch.equal(fwd_pick, greedy):
        raise AssertionError(f"{label}: generate() and the forward pass disagree:\n{greedy.tolist()}\n{fwd_pick.tolist()}")
    gen_logits = torch.cat(list(res.logits), 0)
    assert torch.equal(gen_logits.argmax(-1), greedy)
    assert not (set(greedy.tolist()) & set(eos)), f"{label}: greedy continuation hits an eos id"
    cache_err = float((gen_logits - logits[P - 1:-1]).abs().max())
    top2 = torch.topk(logits[P - 1:-1], 2, -1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    return seq, greedy, logits, cache_err, margins


def route_deepseek_v3_like_deepseek():
    """Makes transformers 4.57.1's DeepseekV3TopkRouter mask the experts of unchosen groups with
    -inf, as DeepSeek-V3's own inference/model.py (Gate.forward) and tessera do, instead of 0.0
    (transformers issue #45440): with a negative e_score_correction_bias a biased score can be
    below 0.0, and HF would then choose a masked expert. The trained DeepSeek model is trained and
    its goldens made under this rule (deepseek.md section 6)."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as v3

    @torch.no_grad()
    def get_topk_indices(self, scores):
        scores_for_choice = scores.view(-1, self.n_routed_experts) + self.e_score_correction_bias.unsqueeze(0)
        per_group = self.n_routed_experts // self.n_group
        group_scores = scores_for_choice.view(-1, self.n_group, per_group).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, self.n_group, per_group).reshape(-1, self.n_routed_experts)
        scores_for_choice = scores_for_choice.masked_fill(~score_mask.bool(), float("-inf"))
        return torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]

    v3.DeepseekV3TopkRouter.get_topk_indices = get_topk_indices
