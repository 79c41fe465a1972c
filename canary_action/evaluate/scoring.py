"""The three held-out metrics, computed from the model's logits by the canary's own code (no model-side loss).

Each returns one value per example (the set's order), so that two models scored on the same set compare example
by example, and the metric's accuracy where it has one. Evaluation mode, no gradients, float32 logits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

import torch
from transformers import PreTrainedTokenizerBase

from canary_action.evaluate.examples import PreferencePair
from canary_action.evaluate.examples import Sequence as TokenSequence

T = TypeVar("T")


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _padded(
    rows: Sequence[list[int]], device: torch.device, *, left: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) of rows padded to the longest; padding's id is never scored, so 0 serves."""
    longest = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(longest - len(row), longest) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(row, dtype=torch.long)
        mask[i, span] = 1
    return ids.to(device), mask.to(device)


def _token_logps(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position t >= 1: log p(ids[t] | ids[:t]) and whether it was the model's top choice."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    targets = ids[:, 1:]
    # The target's logit less the log-normaliser: log_softmax would write a vocabulary-wide tensor (a third of the
    # evaluation's time on a CPU) to read one value of each row.
    logps = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return logps, logits.argmax(dim=-1) == targets


@torch.no_grad()
def next_token(
    model: Any, sequences: Sequence[TokenSequence], *, batch_size: int, device: torch.device
) -> tuple[list[float], float]:
    """(per-example mean negative log-likelihood of the scored tokens, the share of scored tokens predicted)."""
    model.eval()
    losses: list[float] = []
    hits = scored_total = 0
    for batch in _batches(sequences, batch_size):
        ids, mask = _padded([s.ids for s in batch], device)
        scored = torch.zeros_like(mask, dtype=torch.bool)
        for i, s in enumerate(batch):
            scored[i, : len(s.scored)] = torch.tensor(s.scored)
        scored = scored[:, 1:]
        logps, top = _token_logps(model, ids, mask)
        counts = scored.sum(dim=1).clamp(min=1)
        losses += (-(logps * scored).sum(dim=1) / counts).tolist()
        hits += int((top & scored).sum())
        scored_total += int(scored.sum())
    return losses, hits / max(scored_total, 1)


@torch.no_grad()
def answer_logps(
    model: Any, pairs: Sequence[PreferencePair], *, batch_size: int, device: torch.device
) -> list[tuple[float, float]]:
    """Per pair, (log p(chosen | prompt), log p(rejected | prompt)): the answers' summed token log-probabilities."""
    model.eval()
    rows = [(p.prompt, answer) for p in pairs for answer in (p.chosen, p.rejected)]
    sums: list[float] = []
    for batch in _batches(rows, batch_size):
        ids, mask = _padded([prompt + answer for prompt, answer in batch], device)
        logps, _ = _token_logps(model, ids, mask)
        answer_mask = torch.zeros_like(logps, dtype=torch.bool)
        for i, (prompt, answer) in enumerate(batch):  # position t-1 holds the log-prob of token t
            answer_mask[i, max(len(prompt) - 1, 0) : len(prompt) + len(answer) - 1] = True
        sums += (logps * answer_mask).sum(dim=1).tolist()
    return list(zip(sums[0::2], sums[1::2], strict=True))


def preference(
    policy: list[tuple[float, float]], reference: list[tuple[float, float]]
) -> tuple[list[float], float | None]:
    """Per pair, how much more the policy prefers the chosen answer than the reference did (the margin of the
    log-probability ratios, DPO's implicit reward without its beta); and the share of pairs where that is positive
    (None when every margin is 0: the policy is the reference)."""
    margins = [(pc - rc) - (pr - rr) for (pc, pr), (rc, rr) in zip(policy, reference, strict=True)]
    if all(m == 0 for m in margins):
        return margins, None
    return margins, sum(m > 0 for m in margins) / len(margins)


#: The seed of the held-out completions: every model evaluated draws from the same random stream, so two models
#: that would sample alike do, and their per-prompt rewards differ by what differs between them (common random
#: numbers), not by chance.
SAMPLING_SEED: Final = 1234


@torch.no_grad()
def generate(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[list[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    batch_size: int,
    device: torch.device,
) -> list[list[int]]:
    """A completion (ids, cut at the first EOS) of each prompt, sampled at `temperature` from SAMPLING_SEED.

    Sampled, not greedy: a small policy's distribution is nearly flat after a canary's few steps, so its argmax is
    decided by near-ties and flips from one evaluation to the next (the tiny GRPO canary's greedy held-out reward
    went 0.29, 0.36, 0.21, 0.33, 0.37, 0.29 over 60 steps while its sampled training reward rose).
    """
    model.eval()
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or 0)
    completions: list[list[int]] = []
    torch.manual_seed(SAMPLING_SEED)
    for batch in _batches(prompts, batch_size):
        ids, mask = _padded(batch, device, left=True)
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
            temperature=temperature, top_k=0, top_p=1.0, pad_token_id=pad, eos_token_id=eos,
        )  # fmt: skip
        for row in out[:, ids.shape[1] :].tolist():
            completions.append(row[: row.index(eos)] if eos is not None and eos in row else row)
    return completions


RewardFunc = Callable[..., list[float | None]]


def rewards(  # noqa: PLR0917  # the columns of one scoring, in TRL's order
    functions: Sequence[RewardFunc],
    prompts: Sequence[Any],
    completions: Sequence[str],
    completion_ids: Sequence[list[int]],
    columns: dict[str, list[Any]],
    scorers: Sequence[Callable[[Sequence[str]], list[float]]] = (),
) -> list[float]:
    """Per completion, the sum of every reward (TRL's default weights, 1 each; a function's None counts 0).

    Functions are called as TRL calls them: prompts, completions (a conversation's as an assistant message),
    completion_ids and the data's other columns as keywords. `scorers` are reward models, given prompt + completion.
    """
    shaped = [[{"role": "assistant", "content": c}] if not isinstance(p, str) else c
              for p, c in zip(prompts, completions, strict=True)]  # fmt: skip
    totals = [0.0] * len(completions)
    for function in functions:
        values = function(prompts=list(prompts), completions=shaped, completion_ids=list(completion_ids),
                          trainer_state=None, **columns)  # fmt: skip
        totals = [t + (float(v) if v is not None else 0.0) for t, v in zip(totals, values, strict=True)]
    texts = [(p if isinstance(p, str) else "") + c for p, c in zip(prompts, completions, strict=True)]
    for scorer in scorers:
        totals = [t + v for t, v in zip(totals, scorer(texts), strict=True)]
    return totals
