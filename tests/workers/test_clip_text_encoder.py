"""The CLIP prompt encoder (workers/clip_text_encoder.py) on a tiny random CLIPTextModel with CLIP's real
BPE vocabulary (ops/random_clip.py): the spec read without the model, the known tokens of a
prompt, shapes, determinism, the same bits in any batch, truncation, and what is refused.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ddm.ops.random_clip import write_clip_fixture
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.conditioning import TextEncoderSpec
from ddm.schema.errors import ConfigError

pytest.importorskip("transformers")

from ddm.workers.clip_text_encoder import (  # noqa: E402  (after the skip)
    KNOWN_IDS,
    clip_text_spec,
    load_clip_text_encoder,
)

HIDDEN = 32
LONG = " ".join(["word"] * 200)  # 200 BPE tokens: more than 75 fit


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip")
    return write_clip_fixture(root / "text_encoder", root / "tokenizer", hidden=HIDDEN)


@pytest.fixture(scope="module")
def encoder(folders):
    return load_clip_text_encoder(*folders)


def test_the_spec_is_read_from_the_files_without_the_model(folders):
    text_dir, tokenizer_dir = folders
    spec = clip_text_spec(text_dir, tokenizer_dir)
    digest = file_sha256(text_dir / "model.safetensors")
    assert spec == TextEncoderSpec("openai/clip-vit-large-patch14", digest, "clip-bpe", 77, HIDDEN, "tokens")
    assert (
        clip_text_spec(text_dir, tokenizer_dir, encoder_id="bagel/paris-clip").encoder_id
        == "bagel/paris-clip"
    )


def test_the_encoder_id_is_a_hub_name_from_the_config_or_the_default(folders, tmp_path):
    text_dir, tokenizer_dir = folders
    copy = tmp_path / "text_encoder"
    shutil.copytree(text_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    for named, want in (
        ("openai/clip-vit-large-patch14", "openai/clip-vit-large-patch14"),
        ("laion/CLIP-ViT-L-14", "laion/CLIP-ViT-L-14"),
        ("/home/someone/sd/text_encoder", "openai/clip-vit-large-patch14"),  # a local path: not a name
        ("./text_encoder", "openai/clip-vit-large-patch14"),
    ):
        (copy / "config.json").write_text(json.dumps(config | {"_name_or_path": named}))
        assert clip_text_spec(copy, tokenizer_dir).encoder_id == want
    assert clip_text_spec(copy, tokenizer_dir, default_id="x/y").encoder_id == "x/y"


def test_clip_tokens_of_a_known_prompt(encoder):
    ids, cut = encoder.tokenize("a photo of a cat")
    assert ids[:7] == KNOWN_IDS == [49406, 320, 1125, 539, 320, 2368, 49407]  # real CLIP's
    assert ids[7:] == [49407] * 70 and not cut  # padded to 77 with <|endoftext|>
    assert encoder.tokenize("")[0] == [49406] + [49407] * 76  # the guidance null


def test_embeddings_are_every_position_deterministic_and_the_same_in_any_batch(folders, encoder):
    prompts = ["a photo of a cat", "", "A red heart, drawn in crayon"]
    emb, truncated = encoder.encode(prompts)
    assert emb.shape == (3, 77, HIDDEN) and emb.dtype == np.float32 and truncated == [False] * 3
    assert np.isfinite(emb).all() and np.all(np.any(emb != 0, axis=-1))  # padding positions too
    again = load_clip_text_encoder(*folders).encode(prompts)[0]
    np.testing.assert_array_equal(again, emb)
    for i, prompt in enumerate(prompts):  # alone, and in another order and company
        np.testing.assert_array_equal(encoder.encode([prompt])[0][0], emb[i])
    mixed = encoder.encode([prompts[2], LONG, prompts[0], prompts[1]])[0]
    np.testing.assert_array_equal(mixed[[2, 3, 0]], emb)
    assert not np.array_equal(emb[0], emb[1])


def test_the_embedding_is_transformers_last_hidden_state(folders, encoder):
    import torch
    from transformers import CLIPTextModel, CLIPTokenizer

    text_dir, tokenizer_dir = folders
    tokenizer = CLIPTokenizer.from_pretrained(str(tokenizer_dir))
    model = CLIPTextModel.from_pretrained(str(text_dir)).eval()
    prompts = ["a photo of a cat", "", LONG]
    ids = tokenizer(prompts, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
    with torch.no_grad():  # Paris's call: all 77 ids, no attention mask, batched
        want = model(ids.input_ids).last_hidden_state.numpy()
    np.testing.assert_allclose(encoder.encode(prompts)[0], want, atol=1e-5)


def test_a_long_prompt_is_cut_and_flagged(encoder):
    ids, cut = encoder.tokenize(LONG)
    assert cut and len(ids) == 77 and ids[0] == 49406 and ids[-1] == 49407
    emb, truncated = encoder.encode(["a cat", LONG])
    assert truncated == [False, True] and emb.shape == (2, 77, HIDDEN)
    exact = " ".join(["word"] * 75)  # 75 + 2 = 77: fits
    assert encoder.tokenize(exact)[1] is False and encoder.tokenize(exact + " word")[1] is True


def test_a_deployments_spec_is_honoured_and_other_weights_refused_naming_both(folders):
    spec = clip_text_spec(*folders, encoder_id="bagel/paris-clip")
    assert load_clip_text_encoder(*folders, spec=spec).spec == spec
    wrong = TextEncoderSpec("bagel/paris-clip", "ab" * 32, "clip-bpe", 77, HIDDEN, "tokens")
    with pytest.raises(ConfigError, match="ab" * 32) as err:
        load_clip_text_encoder(*folders, spec=wrong)
    assert spec.digest in str(err.value)
    for other in (TextEncoderSpec(*list(spec.to_dict().values())[:5], "pooled"),):
        with pytest.raises(ConfigError, match="pooled"):
            load_clip_text_encoder(*folders, spec=other)


def test_only_safetensors_and_only_clips_tokenizer(folders, tmp_path):
    text_dir, tokenizer_dir = folders
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(text_dir / "config.json", pickled)
    (pickled / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    with pytest.raises(ConfigError, match="no model.safetensors.*pytorch_model.bin"):
        clip_text_spec(pickled, tokenizer_dir)
    with pytest.raises(ConfigError, match="no model.safetensors"):
        load_clip_text_encoder(pickled, tokenizer_dir)
    with pytest.raises(ConfigError, match="tokenizer_config.json"):
        clip_text_spec(text_dir, tmp_path)  # no tokenizer there
    bert = tmp_path / "bert"
    shutil.copytree(text_dir, bert)
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    with pytest.raises(ConfigError, match="model_type"):
        clip_text_spec(bert, tokenizer_dir)  # not a CLIPTextModel folder
    small = tmp_path / "small_tokenizer"  # what CLIPTokenizer(vocab_file=..) builds in transformers 5
    shutil.copytree(tokenizer_dir, small)
    (small / "vocab.json").write_text(json.dumps({"<|startoftext|>": 0, "<|endoftext|>": 1, "x": 2}))
    (small / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(ConfigError, match="CLIP's BPE tokenizer"):
        load_clip_text_encoder(text_dir, small)
    with pytest.raises(ConfigError, match="device"):
        load_clip_text_encoder(*folders, device="gpu0")
    with pytest.raises(ConfigError, match="CUDA device torch sees"):
        load_clip_text_encoder(*folders, device="cuda:99")  # none here (a GPU host has no 100th either)


def test_the_one_door_picks_clip_by_the_specs_tokenizer(folders, encoder):
    from ddm.schema.stage_entries import TextEncoderEntry
    from ddm.workers.text_encoder import load_deployment_encoder, load_text_encoder

    text_dir, tokenizer_dir = folders
    spec = clip_text_spec(*folders)
    clip = load_text_encoder(spec=spec, folder=text_dir, tokenizer_folder=tokenizer_dir)
    assert clip.spec == spec and type(clip).__name__ == "ClipTextEncoder"
    np.testing.assert_array_equal(clip.encode(["a cat"])[0], encoder.encode(["a cat"])[0])
    entry = TextEncoderEntry(text_dir, tokenizer_dir, "cpu")  # a deployment's [text_encoder]
    assert load_deployment_encoder(spec, entry).spec == spec
    with pytest.raises(ConfigError, match=r"\[text_encoder\] table"):
        load_deployment_encoder(spec, None)  # no wheel ships CLIP: its folders must be named
    other = TextEncoderSpec(spec.encoder_id, spec.digest, "sentencepiece", 77, HIDDEN, "tokens")
    with pytest.raises(ConfigError, match="sentencepiece"):
        load_text_encoder(spec=other, folder=text_dir)


def test_a_missing_tensor_is_refused_and_an_old_position_ids_buffer_is_not(folders, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    text_dir, tokenizer_dir = folders
    tensors = load_file(text_dir / "model.safetensors")
    for name, edit in (
        ("missing", lambda t: {k: v for k, v in t.items() if "layers.1.mlp.fc2.weight" not in k}),
        ("old", lambda t: t | {"text_model.embeddings.position_ids": torch.arange(77)[None]}),
    ):
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(text_dir / "config.json", folder)
        save_file(edit(tensors), str(folder / "model.safetensors"), metadata={"format": "pt"})
        if name == "missing":  # transformers would fill it at random
            with pytest.raises(ConfigError, match="lacks 1 .*fc2"):
                load_clip_text_encoder(folder, tokenizer_dir)
        else:  # transformers 4's checkpoints (SD's text_encoder/) carry it: same model
            old = load_clip_text_encoder(folder, tokenizer_dir).encode(["a cat"])[0]
            new = load_clip_text_encoder(text_dir, tokenizer_dir).encode(["a cat"])[0]
            np.testing.assert_array_equal(old, new)


def test_importing_the_encoders_and_reading_a_spec_need_no_transformers(folders):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['transformers'] = None\n"  # an import of it now fails
        "import ddm.workers.text_encoder, ddm.workers.text_encoder_worker, ddm.workers.text_rows\n"
        "from ddm.workers.clip_text_encoder import clip_text_spec\n"
        "print(clip_text_spec(*sys.argv[1:]).digest)"
    )
    argv = [sys.executable, "-c", code, *map(str, folders)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == clip_text_spec(*folders).digest
