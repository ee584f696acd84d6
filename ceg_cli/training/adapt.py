"""``ceg judge train``: adapt the verifier to a user's corpus, with no labels.

The synthetic generator (``synthetic.make_pairs``) runs over the passages of
the user's index. Its pairs are split by document: 80 % train the
cross-encoder further, starting from the base verifier's; 20 % are held out
and scored before and after, with the base verifier's combiner (which was
calibrated on labelled data and is kept as it is: synthetic pairs teach the
cross-encoder the corpus's names and wording, not where the decision
threshold lies). Training is bounded by ``minutes``, checkpoints every few
minutes, and a run started again with the same arguments resumes. The output
directory is a complete ``--judge verifier:DIR`` model with a model card.

The card and then ``adapt.json`` are written last, each atomically: until
``adapt.json`` says the training finished, the folder is a run to continue. A
run killed at any point is taken up by the same command again (from the
checkpoint, from the start when only a half-written ``checkpoint.tmp`` is
there, or, the training done, by writing the card); a folder holding anything
``ceg judge train`` does not write is refused, and so is ``--out`` naming the
``--base`` model.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..index.layout import META_FILE
from ..index.metacheck import file_problem
from ..judges.checkers.verifier import COMBINER_FILE, VerifierJudge
from .crossenc import (
    CHECKPOINT,
    CHECKPOINT_TMP,
    TRAINING_FILE,
    train_cross_encoder,
    write_atomically,
)
from .sources import Pair, split_of
from .synthetic import Passage, make_pairs

__all__ = ["AdaptResult", "adapt"]

#: Fewer documents than this, and the held-out pairs are split by passage.
MIN_DOCUMENTS = 20
CARD_FILE = "MODEL_CARD.md"
#: Written last: while it does not say the training finished, the run is not done.
ADAPT_FILE = "adapt.json"


@dataclass(frozen=True)
class AdaptResult:
    out: Path
    pairs_train: int
    pairs_held_out: int
    training: dict[str, Any]
    before: dict[str, float]
    after: dict[str, float]
    split_by_document: bool = True


def _score(judge: VerifierJudge, pairs: list[Pair], embed: Callable[..., Any]) -> dict[str, float]:
    """Balanced accuracy and nonfactual AUC-PR of ``judge`` on held-out synthetic pairs."""
    from .combiner import evaluate, featurize, items_for

    X = featurize(
        items_for(pairs, embed), judge.entailment, window_words=judge.combiner.window_words
    )
    p = [judge.combiner.probability(x) for x in X]
    return evaluate([q.label for q in pairs], p, judge.combiner.threshold)


def adapt(
    index_dir: Path,
    out: Path,
    *,
    base: Path,
    minutes: float = 30.0,
    max_pairs: int = 2000,
    held_out: int = 300,
    seed: int = 0,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
    progress: Callable[[int, int, float], None] | None = None,
    command: str = "",
    device: str = "cpu",
) -> AdaptResult:
    from ..index import open_index

    check_out(out, index_dir=index_dir, base=base)
    state = out_state(out)
    base_judge = VerifierJudge(base, device=device)
    t0 = time.monotonic()
    with open_index(index_dir) as index:
        passages = (Passage(c.doc_id, c.title, c.text) for c in index.iter_chunks())
        pairs = list(make_pairs(passages, seed=seed, source="corpus"))
        embedder = index.embedder(device)
        if not pairs:
            raise UsageError(f"{index_dir}: no passage has a sentence to make training pairs from")
        rng = random.Random(seed)
        # By document; a corpus of a handful of documents is split by passage
        # instead (the held-out figures then share documents with training).
        by_doc = len({p.group for p in pairs}) >= MIN_DOCUMENTS

        def key(p: Pair) -> str:
            return p.group if by_doc else f"{p.group}#{p.evidence[:200]}"

        train = [p for p in pairs if split_of(key(p), 0.2) == "train"]
        test = [p for p in pairs if split_of(key(p), 0.2) == "val"]
        if not train or not test:
            raise UsageError(f"{index_dir}: too few passages to hold some out")
        train = rng.sample(train, min(max_pairs, len(train)))
        test = rng.sample(test, min(held_out, len(test)))
        log(
            f"{len(pairs)} synthetic pairs from {index_dir}: training on {len(train)}, "
            f"{len(test)} held out ({time.monotonic() - t0:.0f} s)"
        )
        before = _score(base_judge, test, embedder.embed)
        log(
            f"before: balanced accuracy {before['balanced_accuracy']:.3f}, "
            f"nonfactual AUC-PR {before['auc_pr_nonfactual']:.3f} on the held-out pairs"
        )
        from .dataset import to_examples

        out.mkdir(parents=True, exist_ok=True)
        if state == FINALISE:
            info = _finished_training(out, len(train), seed)
            log(f"training in {out} had finished; writing the model card")
            (out / CHECKPOINT).unlink(missing_ok=True)
        else:

            def forget_stale() -> None:
                # A card or adapt.json left by an earlier stop would describe the old
                # state while training goes on: they are written again at the end.
                for name in (CARD_FILE, ADAPT_FILE, CHECKPOINT_TMP):
                    (out / name).unlink(missing_ok=True)

            if (out / CHECKPOINT).exists():
                log(f"resuming from the checkpoint in {out}")
            info = train_cross_encoder(
                to_examples(train),
                out,
                base=str(base),
                max_length=base_judge.combiner.max_length,
                seed=seed,
                time_limit_s=minutes * 60,
                progress=progress,
                save_partial=True,
                on_start=forget_stale,
                device=device,
            )
        write_atomically(out / COMBINER_FILE, (base / COMBINER_FILE).read_text(encoding="utf-8"))
        after = _score(VerifierJudge(out, device=device), test, embedder.embed)
        log(
            f"after: balanced accuracy {after['balanced_accuracy']:.3f}, "
            f"nonfactual AUC-PR {after['auc_pr_nonfactual']:.3f}"
        )
    result = AdaptResult(out, len(train), len(test), info, before, after, by_doc)
    _write_card(result, index_dir, base, Counter(p.kind for p in train), command)
    return result


#: How ``out_state`` finds ``--out``: nothing there yet, a run to resume (or start
#: again), or a finished training whose card and adapt.json are still to write.
NEW, RESUME, FINALISE = "new", "resume", "finalise"
#: What ``ceg judge train`` writes in ``--out``: the model (config, weights,
#: tokenizer, combiner), the run's record and checkpoint, the card, temporary files.
_OWN_FILES = re.compile(
    r"checkpoint\.(pt|tmp)|training\.json|adapt\.json|MODEL_CARD\.md|combiner\.json"
    r"|config\.json|model\.safetensors|tokenizer(_config)?\.json|special_tokens_map\.json"
    r"|vocab\.(txt|json)|merges\.txt|added_tokens\.json|\..+\.tmp"
)
#: Files only a run of ``ceg judge train`` leaves: one of them shows a run began here.
_RUN_FILES = frozenset({CHECKPOINT, CHECKPOINT_TMP, TRAINING_FILE})


def check_out(out: Path, *, index_dir: Path | None, base: Path) -> None:
    """Refuse an ``--out`` that would overwrite the base model or live inside an index
    (an index rebuild replaces its folder, and the model with it)."""
    target = out.expanduser().resolve()
    if target == base.expanduser().resolve():
        raise UsageError(
            f"--out {out}: is the --base model {base}; training writes a new model, "
            "choose another directory"
        )
    index = index_dir.expanduser().resolve() if index_dir is not None else None
    for folder in (target, *target.parents):
        if folder == index or _is_index(folder):
            raise UsageError(
                f"--out {out}: is inside the index {folder}, which a rebuild replaces "
                "(the model with it); choose a directory outside it"
            )
    if target.is_dir():
        # Training writes its files in place (save_pretrained): one that is an index's
        # file under another name (a hard link, a copy) is refused as every output is.
        from ..report.output import refuse_index_files

        refuse_index_files([("--out", out / p.name) for p in sorted(target.iterdir())
                            if p.is_file()], index_dir)


def _is_index(folder: Path) -> bool:
    meta = folder / META_FILE
    return meta.is_file() and file_problem(meta) is None


def out_state(out: Path, *, by: str = "ceg judge train", record: str | None = None) -> str:
    """What ``--out`` holds: NEW, RESUME or FINALISE; UsageError when it holds a finished
    model or files ``by`` did not write.

    ``record``: a JSON file the caller writes first (``scripts/train_verifier.py``'s
    ``data.json``); it counts as the caller's, and as a run begun, only when it says it
    was made by ``by`` (``made_by``), so a user's file of that name is never taken over.
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; choose a new directory")
    names = {p.name for p in out.iterdir()} if out.exists() else set()
    if not names:
        return NEW
    if _says_finished(out / ADAPT_FILE, "training"):
        raise UsageError(
            f"--out {out}: already holds files (a finished adapted model); choose a new directory"
        )
    ours = {record} if record in names and _made_by(out / record, by) else set()
    foreign = sorted(
        n for n in names - ours if not _OWN_FILES.fullmatch(n) or (out / n).is_dir()
    )
    if foreign or not names & (_RUN_FILES | ours):
        shown = foreign[0] if foreign else sorted(names)[0]
        raise UsageError(
            f"--out {out}: already holds files that {by} did not write ({shown}); "
            "choose a new directory"
        )
    return FINALISE if _says_finished(out / TRAINING_FILE) else RESUME


def _made_by(path: Path, by: str) -> bool:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(raw, dict) and raw.get("made_by") == by


def _says_finished(path: Path, key: str | None = None) -> bool:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        record = raw[key] if key else raw
        return record.get("finished") is True
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _finished_training(out: Path, n_examples: int, seed: int) -> dict[str, Any]:
    """The record of a finished training in ``out``, checked to be this run's."""
    path = out / TRAINING_FILE
    info: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    made_for = (info.get("n_examples", n_examples), info.get("seed"))
    if made_for != (n_examples, seed):
        raise UsageError(
            f"{path}: made for other training data ({made_for[0]} pairs, seed {made_for[1]}; "
            f"this run has {n_examples}, seed {seed}): run with the arguments it was made with"
        )
    return info


def _write_card(
    r: AdaptResult, index_dir: Path, base: Path, kinds: Counter[str], command: str
) -> None:
    """The card, then adapt.json: adapt.json saying finished is the last thing written."""
    t = r.training
    state = (
        "one full pass"
        if t["finished"]
        else f"stopped at the time limit after {t['steps']} of {t['steps_total']} steps; "
        "run the same command again to continue"
    )
    lines = [
        "# Verifier adapted with `ceg judge train`",
        "",
        f"- Command: `{command}`" if command else "- Command: (called from Python)",
        f"- Corpus: the passages of the index at `{index_dir}`",
        f"- Base model: `{base}` (its cross-encoder, fine-tuned further; its combiner, kept)",
        f"- Synthetic pairs: {r.pairs_train} for training "
        f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
        f"{r.pairs_held_out} held out from "
        + (
            "other documents"
            if r.split_by_document
            else "other passages (too few documents to hold whole ones out)"
        ),
        f"- Training: {t['steps']} steps of {t['batch_size']}, {t['seconds']:.0f} s, {state}",
        "",
        "| held-out synthetic pairs | balanced accuracy | nonfactual AUC-PR |",
        "|---|---|---|",
        f"| before | {r.before['balanced_accuracy']:.3f} | {r.before['auc_pr_nonfactual']:.3f} |",
        f"| after | {r.after['balanced_accuracy']:.3f} | {r.after['auc_pr_nonfactual']:.3f} |",
        "",
        "Synthetic pairs are perturbations of the corpus's own sentences (changed numbers, "
        "swapped names, negations, sentences against other passages): the figures say how well "
        "the model tells those apart, not how well it judges real chatbot answers.",
        "",
        "Use it with `ceg check ... --judge verifier:" + str(r.out) + "`.",
    ]
    write_atomically(r.out / CARD_FILE, "\n".join(lines) + "\n")
    write_atomically(
        r.out / ADAPT_FILE,
        json.dumps(
            {
                "pairs_train": r.pairs_train,
                "pairs_held_out": r.pairs_held_out,
                "training": t,
                "before": r.before,
                "after": r.after,
                "command": command,
            },
            indent=2,
        )
        + "\n",
    )
