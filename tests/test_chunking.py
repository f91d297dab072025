"""split_markdown: chunks fit, cut at the gentlest boundary, and never break a code fence."""

from __future__ import annotations

import random
import re

import pytest

from clawbot.channels.chunking import split_markdown

FENCE_LINE = re.compile(r"^\s*(?:>\s*)*(`{3,}|~{3,})")


def non_whitespace(text: str) -> str:
    return "".join(text.split())


def fence_lines(chunk: str) -> list[str]:
    return [line for line in chunk.split("\n") if FENCE_LINE.match(line)]


def without_fence_lines(text: str) -> str:
    kept = (line for line in text.split("\n") if not FENCE_LINE.match(line))
    return non_whitespace("\n".join(kept))


def test_short_text_is_one_chunk_unchanged() -> None:
    assert split_markdown("Hello **world**", 100) == ["Hello **world**"]


def test_empty_and_whitespace_input_give_no_chunks() -> None:
    assert split_markdown("", 100) == []
    assert split_markdown(" \n\n\t ", 100) == []


def test_surrounding_blank_lines_are_trimmed() -> None:
    assert split_markdown("\n\nHello\n\n", 100) == ["Hello"]


def test_non_positive_limit_is_rejected() -> None:
    with pytest.raises(ValueError):
        split_markdown("text", 0)


def test_long_text_splits_at_paragraph_boundary() -> None:
    first = ("First paragraph. " * 5).strip()
    second = ("Second paragraph. " * 5).strip()
    assert split_markdown(f"{first}\n\n{second}", 100) == [first, second]


def test_paragraph_too_long_splits_at_line_boundary() -> None:
    lines = [f"line number {i} has some words" for i in range(6)]
    chunks = split_markdown("\n".join(lines), 70)
    assert chunks == ["\n".join(lines[i : i + 2]) for i in range(0, 6, 2)]


def test_line_too_long_splits_at_sentence_boundary() -> None:
    sentences = [f"This is sentence number {i}." for i in range(8)]
    chunks = split_markdown(" ".join(sentences), 60)
    assert all(len(chunk) <= 60 for chunk in chunks)
    assert all(chunk.endswith(".") for chunk in chunks)
    assert " ".join(chunks) == " ".join(sentences)


def test_sentence_too_long_splits_at_word_boundary() -> None:
    words = [f"word{i}" for i in range(40)]
    chunks = split_markdown(" ".join(words), 50)
    assert all(len(chunk) <= 50 for chunk in chunks)
    assert [word for chunk in chunks for word in chunk.split()] == words


def test_overlong_single_word_is_hard_split_as_last_resort() -> None:
    word = "x" * 250
    chunks = split_markdown(word, 100)
    assert [len(chunk) for chunk in chunks] == [100, 100, 50]
    assert "".join(chunks) == word


def test_chunks_fill_up_to_the_limit_before_cutting() -> None:
    text = "short one\n\nshort two\n\nshort three"
    assert split_markdown(text, 1000) == [text]
    assert split_markdown(text, 25) == ["short one\n\nshort two", "short three"]


def test_code_block_split_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"value_{i} = compute({i})" for i in range(30))
    chunks = split_markdown(f"Here is the code:\n\n```python\n{code}\n```\n\nThat was it.", 200)
    assert len(chunks) > 2
    assert all(len(chunk) <= 200 for chunk in chunks)
    code_chunks = [chunk for chunk in chunks if "value_" in chunk]
    assert len(code_chunks) > 1
    assert code_chunks[0].startswith("Here is the code:\n\n```python\n")
    for chunk in code_chunks[1:]:
        assert chunk.startswith("```python\n")
    for chunk in code_chunks:
        assert len(fence_lines(chunk)) == 2
    assert non_whitespace("".join(chunks)).count("value_") == 30


def test_code_block_is_kept_whole_when_it_fits_a_chunk_of_its_own() -> None:
    block = "```js\nconsole.log(1)\nconsole.log(2)\n```"
    chunks = split_markdown("intro " * 10 + "\n\n" + block, len(block) + 5)
    assert block in chunks


def test_blank_lines_inside_code_block_are_not_paragraph_boundaries() -> None:
    block = "```\na = 1\n\nb = 2\n```"
    assert block in split_markdown("x" * 30 + "\n\n" + block, 35)


def test_tilde_fence_is_reopened_with_tildes() -> None:
    code = "\n".join(f"row {i}" for i in range(20))
    chunks = split_markdown(f"~~~sql\n{code}\n~~~", 60)
    assert len(chunks) > 1
    assert all(chunk.startswith("~~~sql\n") and chunk.endswith("\n~~~") for chunk in chunks)


def test_overlong_code_line_is_cut_inside_the_fence() -> None:
    chunks = split_markdown("```\n" + "y" * 300 + "\n```", 100)
    assert all(len(chunk) <= 100 for chunk in chunks)
    assert all(chunk.startswith("```\n") and chunk.endswith("\n```") for chunk in chunks)
    assert non_whitespace("".join(chunks)).count("y") == 300


def test_unclosed_code_block_is_closed_in_its_last_chunk_when_split() -> None:
    code = "\n".join(f"line {i}" for i in range(30))
    chunks = split_markdown(f"```\n{code}", 80)
    assert len(chunks) > 1
    assert all(len(fence_lines(chunk)) == 2 for chunk in chunks)


def test_code_block_in_a_quote_reopens_inside_the_quote() -> None:
    code = "\n".join(f"> print({i})" for i in range(20))
    chunks = split_markdown(f"> ```py\n{code}\n> ```", 80)
    assert len(chunks) > 1
    assert all(chunk.startswith("> ```py\n") and chunk.endswith("\n> ```") for chunk in chunks)


@pytest.mark.parametrize("limit", [2000, 4000, 4096])
def test_platform_limits_hold_for_a_long_reply(limit: int) -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "Some words here. " * 40 for i in range(40))
    chunks = split_markdown(text, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    assert non_whitespace("".join(chunks)) == non_whitespace(text)


def _random_markdown(rng: random.Random) -> str:
    words = ["alpha", "beta", "**bold**", "_it_", "`code`", "x" * rng.randint(1, 90), "end."]
    blocks: list[str] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.25:
            language = rng.choice(["", "python", "js", "c++"])
            fence = rng.choice(["```", "~~~", "````"])
            body = "\n".join(
                " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
                for _ in range(rng.randint(0, 25))
            )
            blocks.append(f"{fence}{language}\n{body}\n{fence}")
        elif kind < 0.4:
            blocks.append(
                "\n".join(f"- {rng.choice(words)} item" for _ in range(rng.randint(1, 8)))
            )
        else:
            sentences = (
                " ".join(rng.choice(words) for _ in range(rng.randint(1, 15))) + rng.choice(".!? ")
                for _ in range(rng.randint(1, 20))
            )
            blocks.append(rng.choice([" ", "\n"]).join(sentences))
    return rng.choice(["\n\n", "\n\n\n"]).join(blocks)


def test_random_inputs_keep_limit_content_and_balanced_fences() -> None:
    rng = random.Random(20240501)
    for _ in range(400):
        text = _random_markdown(rng)
        limit = rng.choice([40, 64, 100, 250, 1000])
        chunks = split_markdown(text, limit)
        assert chunks, text
        assert all(0 < len(chunk) <= limit for chunk in chunks)
        assert without_fence_lines("\n".join(chunks)) == without_fence_lines(text)
        chunk_fences = {line.strip() for chunk in chunks for line in fence_lines(chunk)}
        assert {line.strip() for line in fence_lines(text)} <= chunk_fences
        for chunk in chunks:
            assert len(fence_lines(chunk)) % 2 == 0, (limit, chunk)


def test_a_paragraph_too_long_for_any_chunk_first_fills_the_current_one() -> None:
    sentences = [f"Sentence {n} of part two." for n in range(12)]
    chunks = split_markdown("Part one.\n\n" + " ".join(sentences), 100)
    assert chunks[0].startswith("Part one.\n\nSentence 0 of part two.")
    assert 100 - len(sentences[0]) < len(chunks[0]) <= 100
    assert all(chunk.endswith(".") for chunk in chunks)  # still cut at sentence ends


def test_a_word_too_long_for_any_chunk_first_fills_the_current_one() -> None:
    chunks = split_markdown("Part one.\n\n" + "x" * 150, 100)
    assert chunks == ["Part one.\n\n" + "x" * 89, "x" * 61]


def test_a_code_block_too_long_for_any_chunk_first_fills_the_current_one() -> None:
    code = "\n".join(f"row_{n} = {n}" for n in range(20))
    chunks = split_markdown(f"Part one.\n\n```py\n{code}\n```", 120)
    assert chunks[0].startswith("Part one.\n\n```py\nrow_0 = 0\n")
    assert chunks[0].endswith("\n```")
    assert all(len(chunk) <= 120 and len(fence_lines(chunk)) == 2 for chunk in chunks)
