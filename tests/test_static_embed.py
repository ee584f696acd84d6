"""``static-minilm`` (index/dense/static.py): the distillation, and the run-time encoder against
model2vec's ``StaticModel.encode`` on the same weights. Tiny random models, no network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ceg_cli.errors import UsageError
from ceg_cli.index.dense import static
from ceg_cli.index.dense.embedding import (
    choose_backend,
    load_embedder,
    query_backend,
    resolve_model,
)

WORDS = ["aristotle", "plato", "was", "a", "student", "of", "the", "teacher", "athens",
         "##s", "born", "in", "stagira"]  # fmt: skip


def _tiny_sentence_transformer(folder: Path) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    try:  # sentence-transformers 6 moved them
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # pragma: no cover
        from sentence_transformers.models import Pooling, Transformer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    folder.mkdir(parents=True)
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                            ).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, max_position_embeddings=32)
    BertModel(config).save_pretrained(str(folder))
    st = SentenceTransformer(modules=[Transformer(str(folder), max_seq_length=32),
                                      Pooling(8, "mean")])
    st.save(str(folder))
    assert (folder / "tokenizer.json").exists()
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("static")
    source = _tiny_sentence_transformer(root / "st")
    return source, static.distill(source, root / "static", dimension=6)


TEXTS = [
    "Aristotle was a student of Plato.",
    "Plato was the teacher of Aristotle in Athens",
    "",                        # no tokens: a zero vector, as model2vec gives
    "zzz qqq",                 # unknown words only: dropped, so no tokens either
    "Aristotle born in Stagira zzz, Athens's teacher",
    "plato " * 700,            # past 512 tokens: cut as model2vec cuts
]


def test_the_encoder_gives_what_model2vec_gives_on_the_same_weights(
    tiny: tuple[Path, Path],
) -> None:
    from model2vec import StaticModel

    _source, folder = tiny
    ours = static.StaticEmbedder(folder, batch_size=2).embed(TEXTS)
    reference = StaticModel.from_pretrained(str(folder)).encode(TEXTS)
    assert ours.shape == (len(TEXTS), 6) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    assert not ours[2].any() and not ours[3].any()
    assert np.allclose(np.linalg.norm(ours[[0, 1, 4, 5]], axis=1), 1.0, atol=1e-5)


def test_the_distillation_is_the_encoder_on_each_token_then_pca_and_zipf_weights(
    tiny: tuple[Path, Path],
) -> None:
    """Each word's static vector, once its SIF weight is divided out, is the model's own
    (mean-pooled) sentence embedding of that word, PCA-projected: at full width PCA is a
    rotation of the centred vectors, so the distances between words are the model's."""
    from safetensors.numpy import load_file
    from sentence_transformers import SentenceTransformer

    source, _folder = tiny
    full = static.distill(source, source.parent / "static-full", dimension=8)
    vectors = load_file(str(full / "model.safetensors"))["embeddings"].astype(np.float64)
    vocab = vectors.shape[0]
    inv_rank = 1.0 / np.arange(2, vocab + 2)
    weights = static.SIF / (static.SIF + inv_rank / inv_rank.sum())
    unweighted = vectors / weights[:, None]
    words = [w for w in WORDS if not w.startswith("##")]
    ids = np.array([5 + WORDS.index(w) for w in words])
    expected = SentenceTransformer(str(source), device="cpu").encode(words)

    def distances(m: np.ndarray) -> np.ndarray:
        return np.linalg.norm(m[:, None, :] - m[None, :, :], axis=-1)

    np.testing.assert_allclose(distances(unweighted[ids]),
                               distances(expected.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_static_minilm_is_a_model_name_with_its_own_engine(
    tiny: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _source, folder = tiny
    monkeypatch.setattr(static, "static_model_path", lambda: folder)
    embedder = load_embedder("static-minilm")
    assert embedder.name == "static-minilm" and embedder.dimension == 6
    assert embedder.backend == "static"
    assert resolve_model("static").name == "static-minilm"
    # The index's meta decides how queries are embedded: the same engine, not torch.
    assert query_backend({"name": "static-minilm", "backend": "static"}) == "static"
    with pytest.raises(UsageError, match="own engine"):
        load_embedder("static-minilm", backend="onnx")
    with pytest.raises(UsageError, match="CPU only"):
        load_embedder("static-minilm", device="cuda")
    with pytest.raises(UsageError, match="own engine"):
        choose_backend("onnx", "static")


def test_made_once_into_the_cache_and_reused(
    tiny: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first use distills the default model into the cache (here a tiny stand-in for
    it); the second finds the folder and distills nothing."""
    from ceg_cli.cachedir import read_entry_marker

    source, _folder = tiny
    monkeypatch.setenv("CEG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(static, "default_source", lambda: source)
    calls: list[Path] = []
    real = static.distill

    def counting(src: Path, target: Path, **kw: object) -> Path:
        calls.append(target)
        return real(src, target, dimension=6)

    monkeypatch.setattr(static, "distill", counting)
    first = static.static_model_path()
    second = static.static_model_path()
    assert first == second and len(calls) == 1
    assert (first / "model.safetensors").exists() and (first / "config.json").exists()
    assert read_entry_marker(first.parent) == static.STATIC_KIND
    assert not [p for p in first.parent.iterdir() if p.name.endswith(".tmp")]
