"""The settings family reads a line as its words that may hold a setting (grammars/settings.lark
`reduce` and `keep`): whatever the line, that reads the settings the whole line's parse does."""

from __future__ import annotations

from hypothesis import given, strategies as st

from oomlens.grammars import families, parse_prefix

SETTINGS = next(f for f in families() if f.name == "settings")
KEYS = ["max_model_len", "gpu_memory_utilization", "ppo_micro_batch_size_per_gpu", "expandable_segments", "colocate_all_models", "zero_stage"]
# any KEY the grammar's terminal reads (its lookahead aside: the words after it decide that),
# ASCII as configs write them: a name the keep pattern lacked would lose its setting
KEY = next(t.pattern.value for t in SETTINGS.parser.terminals if t.name == "KEY").rsplit("(?=", 1)[0]
WORDS = st.one_of(
    st.from_regex(f"(?a:{KEY})", fullmatch=True),
    st.sampled_from(KEYS),
    st.sampled_from(KEYS).map(lambda k: f"--{k}"),
    st.sampled_from(KEYS).map(lambda k: f"actor.rollout.{k}"),
    st.sampled_from(KEYS).map(lambda k: f"'{k}'"),
    st.sampled_from(KEYS).map(lambda k: f"x_{k}"),  # a name inside a word: no KEY
    st.sampled_from(KEYS).map(lambda k: f",{k}=3"),
    st.sampled_from([":", "=", "':", '":', "=0.6", ":True", "'", '"', "{", "}", "[1,", "2]", ","]),
    st.sampled_from(["0.6", "True", "1.5e-05", "-1", "4096,", "None}", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "x"]),
    st.sampled_from(["CUDA", "out", "of", "memory.", "Tried", "to", "allocate", "2.00", "GiB.", "setting", "to", "avoid"]),
)
SPACES = st.sampled_from([" ", "  ", "\t", " \t ", "\u00a0", ""])


def _whole(text: str) -> list[dict]:
    """The line's settings as its whole parse reads them, no words left out."""
    tree, _ = parse_prefix(SETTINGS.parser, text)
    return SETTINGS._transform(tree)


@given(st.lists(st.tuples(WORDS, SPACES), max_size=24), SPACES)
def test_a_line_read_as_its_setting_words_reads_what_the_whole_line_does(parts, lead):
    text = lead + "".join(word + space for word, space in parts)
    if "\n" in text or not text.strip():
        return
    drafts, complete = SETTINGS.parse(text)
    assert drafts == _whole(text) and complete == bool(drafts)


def test_a_cuda_oom_message_is_read_for_its_one_setting():
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
        "1.05 GiB is free. Of the allocated memory 75.00 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
        "avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    assert SETTINGS.reduce is not None and SETTINGS.keep is not None
    kept = [m.group(0) for m in SETTINGS.keep.finditer(oom)]
    assert kept == ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."]
    assert SETTINGS.parse(oom) == ([], False) and _whole(oom) == []  # the hint's name is inside a word: no KEY of the grammar's


@given(st.from_regex(f"(?a:{KEY})", fullmatch=True), st.sampled_from([": ", "=", " = ", "': ", " "]), st.sampled_from(["0.6", "True", "4096", "x"]), SPACES)
def test_every_key_the_grammar_reads_is_among_the_words_kept(key, separator, value, space):
    """Each KEY the terminal reads, amid words of a sentence: its setting is read."""
    text = f"If memory is large try{space}{key}{separator}{value} to avoid fragmentation"
    drafts, _ = SETTINGS.parse(text)
    assert drafts == _whole(text)
