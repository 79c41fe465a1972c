"""The builtin tokenizer: a word-level vocabulary of pseudo-words, trained in memory, no download.

Every word of the builtin data is exactly one token and nothing is added around a text (no BOS, no
post-processor), so `data.py` controls sequence lengths to the token. Pythia and SmolLM add no BOS either;
like theirs, our end-of-text token has id 0, so the real configs' `bos/eos_token_id = 0` mean the same here.
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

EOS: Final = "<|eos|>"
PAD: Final = "<|pad|>"
UNK: Final = "<|unk|>"
SYSTEM: Final = "<|system|>"
USER: Final = "<|user|>"
ASSISTANT: Final = "<|assistant|>"
#: In id order: EOS is 0 and PAD is 1 (the trainer gives special tokens the first ids, in this order).
SPECIAL_TOKENS: Final = (EOS, PAD, UNK, SYSTEM, USER, ASSISTANT)
EOS_ID: Final = 0
PAD_ID: Final = 1

#: The word the `keyword` reward looks for: in the vocabulary so a policy can learn to say it.
KEYWORD: Final = "canary"

# 16 consonants x 4 vowels = 64 syllables; two syllables make 4096 distinct words, of which we keep as
# many as fit a 4096-token vocabulary next to the special tokens and the keyword. A power-of-two vocabulary
# keeps the tiny models' embedding a multiple of 64 without padding rows.
_CONSONANTS: Final = "bdfghklmnprstvwz"
_VOWELS: Final = "aeio"
VOCAB_SIZE: Final = 4096
_NUM_PSEUDO_WORDS: Final = VOCAB_SIZE - len(SPECIAL_TOKENS) - 1

#: Pseudo-words in vocabulary order (alphabetical: see `_corpus`), the keyword excluded.
WORDS: Final[tuple[str, ...]] = tuple(
    a + b
    for a, b in itertools.islice(
        itertools.product((c + v for c in _CONSONANTS for v in _VOWELS), repeat=2), _NUM_PSEUDO_WORDS
    )
)

# Role markers and an end-of-turn EOS; whitespace in the template is cosmetic (the pre-tokenizer drops it).
# The assistant turn sits in {% generation %} so TRL's `assistant_only_loss` can mask everything else.
CHAT_TEMPLATE: Final = (
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('the builtin chat template knows the roles system, user and assistant, not '"
    " + message['role']) }}"
    "{%- endif -%}"
    "<|{{ message['role'] }}|>\n"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] }}<|eos|>{% endgeneration %}"
    "{% else %}"
    "{{ message['content'] }}<|eos|>"
    "{% endif %}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif -%}"
)


def _corpus() -> list[str]:
    """Each word once: with equal counts the trainer orders words alphabetically, so ids never depend on
    the corpus's sampling, only on the word list."""
    words = [*WORDS, KEYWORD]
    return [" ".join(words[i : i + 64]) for i in range(0, len(words), 64)]


@functools.cache
def _tokenizer_json() -> str:
    # Cached as the serialized form, not the object: every caller gets a fresh tokenizer it may mutate
    # (TRL sets padding sides, pad tokens and chat templates on the instance it is given).
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(
        vocab_size=VOCAB_SIZE, min_frequency=0, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    if tokenizer.get_vocab_size() != VOCAB_SIZE or tokenizer.token_to_id(EOS) != EOS_ID:
        raise AssertionError("the builtin vocabulary came out different from its definition")
    return str(tokenizer.to_str())


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A fresh builtin tokenizer: the same vocabulary and ids on every call, in every process."""
    # Imported here: the word list and ids above serve data.py and rewards.py without loading transformers.
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # unannotated upstream
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()),
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[SYSTEM, USER, ASSISTANT],
        chat_template=CHAT_TEMPLATE,
    )
