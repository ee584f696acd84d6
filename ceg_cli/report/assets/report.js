/* ceg report: draws the responses embedded as JSON, one page at a time.
   Safety: every piece of data reaches the page through textContent, Text
   nodes or setAttribute; nothing is ever parsed as HTML. Links are followed
   only for http(s) URLs. The data format is described in ceg_cli/report/html.py. */
(function () {
  "use strict";
  const doc = document;
  const VERDICTS = new Map([["supported", "supported"], ["contradicted", "contradicted"],
    ["not_enough_evidence", "not enough evidence"], ["no_claim", "no claim"],
    ["judge_error", "not judged"]]);
  const LABELS = new Map([["factual", "factual"], ["nonfactual", "nonfactual"],
    ["not_judged", "not judged"], ["error", "unreadable line"]]);
  const PRINT_MAX = 2000;

  const $ = (id) => doc.getElementById(id);
  const list = $("list"), status = $("status"), search = $("search");
  let data;
  try {
    data = JSON.parse($("ceg-data").textContent);
  } catch (err) {
    status.textContent = "The report's data could not be read: " + err;
    throw err;
  }
  const passages = data.passages || [];
  const contexts = data.contexts || [];
  const responses = data.responses || [];
  const hay = new Array(responses.length);
  const state = { filter: "all", terms: [], sort: "input", page: 0, size: 50 };
  let matches = [];
  let printing = false;

  function el(tag, attrs, children) {
    const node = doc.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children || []) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  const labelName = (label) => LABELS.get(label) || label || "unknown";
  const labelClass = (label) => (LABELS.has(label) ? label : "other");
  function kind(seg) {
    if (seg.l === "not_judged" || seg.v === "judge_error") return "not_judged";
    return VERDICTS.has(seg.v) ? seg.v : "other";
  }
  const verdictName = (seg) => VERDICTS.get(seg.v) || seg.v || seg.l || "unknown";
  const flagged = (seg) => seg.l !== "factual";
  const flagCount = (r) => r.segs.filter(flagged).length;
  const segText = (obj, si) => obj.parts.filter((p) => p[1] === si).map((p) => p[0]).join("");
  const fmt = (n) => n.toLocaleString("en");

  function safeUrl(url) {
    if (typeof url !== "string" || !url) return null;
    try {
      const parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (err) {
      return null;
    }
  }

  function haystack(i) {
    if (hay[i] === undefined) {
      const r = responses[i];
      const texts = [r.id, r.q || "", r.err || "", r.parts.map((p) => p[0]).join("")];
      for (const s of r.segs) texts.push(s.r, (s.cc && s.cc.r) || "");
      for (const a of (r.regen && r.regen.attempts) || []) {
        if (a.parts) texts.push(a.parts.map((p) => p[0]).join(""));
      }
      hay[i] = texts.join("\n").toLowerCase();
    }
    return hay[i];
  }

  function recompute() {
    matches = [];
    for (let i = 0; i < responses.length; i++) {
      if (state.filter !== "all" && responses[i].label !== state.filter) continue;
      if (state.terms.length && !state.terms.every((t) => haystack(i).includes(t))) continue;
      matches.push(i);
    }
    if (state.sort === "flagged") {
      const counts = new Map(matches.map((i) => [i, flagCount(responses[i])]));
      matches.sort((a, b) => counts.get(b) - counts.get(a) || a - b);
    }
  }

  /* The cited passage, as a disclosure: title and similarity, then the text and its link. */
  function passageView(pi, sim, mark) {
    const [title, url, text, docId, context] = passages[pi] || ["(missing passage)", null, "", null];
    const href = safeUrl(url);
    return el("details", { class: "passage" }, [
      el("summary", {}, [
        mark ? el("span", { class: "mark", text: mark }) : null,
        typeof context === "number" ? el("span", { class: "pctx", text: "context " + context }) : null,
        el("span", { class: "ptitle", dir: "auto", text: title || docId || "untitled" }),
        typeof sim === "number" ? el("span", { class: "sim", text: "similarity " + sim.toFixed(2) }) : null,
        el("span", { class: "snip", dir: "auto", text: text.length > 90 ? text.slice(0, 90) + "…" : text }),
      ]),
      el("blockquote", { class: "ptext", dir: "auto", text: text }),
      el("p", { class: "psrc" }, [
        href ? el("a", { href: href, target: "_blank", rel: "noopener noreferrer", text: "Open the source ↗" })
          : url ? el("span", { text: "Source: " + url }) : null,
        docId ? el("span", { class: "doc", text: "document " + docId }) : null,
      ]),
    ]);
  }

  function reveal(id) {
    const target = $(id);
    if (!target) return;
    for (const d of target.querySelectorAll(":scope > details")) d.open = true;
    target.classList.remove("flash");
    void target.offsetWidth; // restart the animation
    target.classList.add("flash");
    target.scrollIntoView({ block: "nearest" });
    const focusable = target.querySelector("summary") || target;
    if (focusable === target) target.setAttribute("tabindex", "-1");
    focusable.focus({ preventScroll: true });
  }

  /* The cited passages of context `pos` that `markers` name: the context opened,
     the passages outlined, the first scrolled to and focused. */
  function revealPassages(prefix, pos, markers) {
    const item = $(prefix + "-c" + pos);
    if (!item) return;
    const marks = [...item.querySelectorAll("mark.hl")].filter((m) =>
      m.getAttribute("data-m").split(" ").some((x) => markers.includes(Number(x))));
    if (!marks.length) return reveal(prefix + "-c" + pos);
    item.querySelector(":scope > details").open = true;
    for (const m of item.parentNode.querySelectorAll("mark.on")) m.classList.remove("on", "flash");
    for (const m of marks) {
      m.classList.add("on");
      void m.offsetWidth; // restart the animation
      m.classList.add("flash");
    }
    marks[0].setAttribute("tabindex", "-1");
    marks[0].scrollIntoView({ block: "center" });
    marks[0].focus({ preventScroll: true });
  }

  const refList = (refs) => refs.map((x) => "[" + x + "]").join("");

  /* What the answer's own citations of a segment came to: a mark beside the
     sentence, with the reason, when they failed; a tick when they hold. */
  function citationMark(cc, prefix) {
    if (!cc) return null;
    const problems = [];
    if (cc.st === "unsupported") problems.push(cc.refs ? "cited " + refList(cc.refs) + (cc.refs.length === 1 ? " does" : " do") + " not support it" : "its citations do not support it");
    else if (cc.st === "uncited") problems.push("no citation");
    if (cc.un) problems.push(refList(cc.un) + (cc.un.length === 1 ? " names" : " name") + " no context");
    if (cc.ir) problems.push(cc.ir.length === 1 ? "context " + cc.ir[0] + " supports no part of it"
      : "contexts " + cc.ir.slice(0, -1).join(", ") + " and " + cc.ir[cc.ir.length - 1] + " support no part of it");
    const target = (cc.ir || cc.cx || [])[0];
    const open = target ? () => reveal(prefix + "-c" + target) : null;
    if (!problems.length) {
      if (cc.st !== "supported") return null;
      const tip = "Its citations " + refList(cc.refs || []) + " support it";
      // The answer's own markers, which the checked text may no longer hold, with a tick.
      return el(open ? "button" : "span", { type: open ? "button" : null, class: "cc ok", title: tip, "aria-label": tip, onclick: open },
        [refList(cc.refs || []) + "✓"]);
    }
    // A short name for what failed, then the check's own reason (or the details).
    const name = cc.st === "unsupported" ? "unsupported citation" : cc.st === "uncited" ? "no citation"
      : cc.un ? "citation to no context" : "irrelevant citation";
    const text = "⚠ " + name + (cc.r ? ": " + cc.r : " (" + problems.join("; ") + ")");
    return el(open ? "button" : "span", {
      type: open ? "button" : null, class: "cc bad k-" + (cc.st === "uncited" ? "uncited" : "unsupported"),
      title: problems.join("; ") + (open ? " · show context " + target : ""), onclick: open,
    }, [text]);
  }

  /* The text with each segment highlighted, citation markers after supported
     segments and a flag after the others. */
  function textBlock(obj, prefix) {
    // dir="auto": an answer whose first letters are right to left (Arabic,
    // Hebrew) reads right to left. Its segments carry no dir of their own: the
    // browser's choice looks past elements that have one.
    const block = el("div", { class: "text", dir: "auto" });
    const contextOf = new Map(((obj.ctx && obj.ctx.hl) || []).map((h) => [h[3], h[0]]));
    for (const [text, si] of obj.parts) {
      const seg = si >= 0 ? obj.segs[si] : undefined;
      if (!seg) {
        block.append(text);
        continue;
      }
      const k = kind(seg);
      const tip = verdictName(seg) + (seg.r ? ": " + seg.r : "");
      block.append(el("span", { class: "seg k-" + k, title: tip }, segPieces(seg, text)));
      const markers = [...new Set((seg.c || []).map((c) => c[0]))].sort((a, b) => a - b);
      // A passage of the record's own contexts is shown inside its context, by position.
      const inContext = new Map();
      for (const m of markers.filter((x) => contextOf.has(x))) {
        const pos = contextOf.get(m);
        inContext.set(pos, (inContext.get(pos) || []).concat([m]));
      }
      for (const [pos, ms] of [...inContext].sort((a, b) => a[0] - b[0])) {
        block.append(el("button", {
          type: "button", class: "cite ctx", "aria-label": "Supported by context " + pos,
          title: "Supported by context " + pos + ": show the passage",
          "aria-controls": prefix + "-c" + pos, onclick: () => revealPassages(prefix, pos, ms),
        }, ["ctx " + pos]));
      }
      for (const m of markers.filter((x) => !contextOf.has(x))) {
        block.append(el("button", {
          type: "button", class: "cite", "aria-label": "Source " + m,
          "aria-controls": prefix + "-s" + m, onclick: () => reveal(prefix + "-s" + m),
        }, ["[" + m + "]"]));
      }
      if (flagged(seg)) {
        block.append(el("button", {
          type: "button", class: "flag k-" + k, "aria-label": "Why: " + verdictName(seg),
          title: verdictName(seg), onclick: () => reveal(prefix + "-f" + si),
        }, [k === "not_judged" ? "?" : "⚑"]));
      }
      const checked = citationMark(seg.cc, prefix);
      if (checked) block.append(checked);
    }
    return block;
  }

  /* A flagged segment's text with its unsupported spans marked: each a <mark> whose
     title gives what the evidence says, and that says it in visually hidden text to a
     screen reader. A segment whose text does not match its pieces is shown whole. */
  function segPieces(seg, text) {
    if (!Array.isArray(seg.p) || seg.p.map((p) => p[0]).join("") !== text) return [text];
    return seg.p.map(([piece, span]) => {
      if (!span) return piece;
      const [what, evidence] = span;
      const said = "unsupported " + what + (evidence ? "; the evidence has " + evidence : "");
      return el("mark", { class: "unsup", "data-kind": what, title: said }, [
        piece, el("span", { class: "vh", text: " (" + said + ")" })]);
    });
  }

  function flagsBlock(obj, prefix) {
    const items = [];
    obj.segs.forEach((seg, si) => {
      if (!flagged(seg)) return;
      const k = kind(seg);
      const evidence = seg.e || [];
      items.push(el("li", { class: "flagged k-" + k, id: prefix + "-f" + si }, [
        el("q", { dir: "auto" }, segPieces(seg, segText(obj, si))), " ",
        el("span", { class: "badge k-" + k, text: verdictName(seg) }),
        typeof seg.s === "number" ? el("span", { class: "score", text: "score " + seg.s.toFixed(2) }) : null,
        el("p", { class: "reason" }, [el("span", { class: "k", text: "Judge: " }),
          el("span", { dir: "auto", text: seg.r || "(no reason given)" })]),
        evidence.length
          ? el("details", { class: "evidence" }, [
            el("summary", { text: "Evidence the judge saw (" + evidence.length + ")" }),
            el("ol", { class: "plain" }, evidence.map(([pi, sim]) => el("li", {}, [passageView(pi, sim, null)]))),
          ])
          : el("p", { class: "muted", text: "No evidence was retrieved." }),
      ]));
    });
    if (!items.length) return null;
    return el("section", { class: "flags" }, [el("h4", { text: "Flagged segments" }), el("ol", { class: "plain" }, items)]);
  }

  function sourcesBlock(obj, prefix) {
    const cited = new Map();
    const inContext = new Set(((obj.ctx && obj.ctx.hl) || []).map((h) => h[3]));
    for (const seg of obj.segs) {
      for (const c of seg.c || []) if (!cited.has(c[0]) && !inContext.has(c[0])) cited.set(c[0], c);
    }
    if (!cited.size) return null;
    const items = [...cited.keys()].sort((a, b) => a - b).map((m) =>
      el("li", { id: prefix + "-s" + m }, [passageView(cited.get(m)[1], cited.get(m)[2], "[" + m + "]")]));
    return el("section", { class: "sources" }, [el("h4", { text: "Sources" }), el("ol", { class: "plain" }, items)]);
  }

  /* A context's text, the cited passages (spans in UTF-16 units, as JavaScript
     counts) marked; overlapping passages are cut at every boundary. */
  function highlighted(text, spans, supports) {
    if (!spans.length) return [text];
    const points = [...new Set([0, text.length, ...spans.flatMap((h) => [h[1], h[2]])])]
      .filter((x) => x >= 0 && x <= text.length).sort((a, b) => a - b);
    const out = [];
    for (let i = 0; i + 1 < points.length; i++) {
      const [a, b] = [points[i], points[i + 1]];
      const ms = [...new Set(spans.filter((h) => h[1] <= a && h[2] >= b).map((h) => h[3]))];
      if (!ms.length) {
        out.push(text.slice(a, b));
        continue;
      }
      const tip = "Supports: " + [...new Set(ms.flatMap((m) => [...(supports.get(m) || [])]))].join(" · ");
      out.push(el("mark", { class: "hl", "data-m": ms.join(" "), title: tip }, [text.slice(a, b)]));
    }
    return out;
  }

  function contextsBlock(r, prefix) {
    const ctx = r.ctx;
    if (!ctx) return null;
    const head = el("h4", {}, ["Contexts (" + ctx.n.length + ")",
      el("span", { class: "field", text: " from the field " + ctx.f })]);
    if (!ctx.n.length) {
      return el("section", { class: "contexts" }, [head,
        el("p", { class: "muted", text: "The record's list of contexts is empty: it was judged on no evidence." })]);
    }
    const supports = new Map();
    r.segs.forEach((seg, si) => {
      // A citation's number is its context's: every sentence a context supports, once each.
      for (const c of seg.c || []) supports.set(c[0], (supports.get(c[0]) || new Set()).add("“" + segText(r, si) + "”"));
    });
    const items = ctx.n.map((ci, at) => {
      const pos = at + 1;
      const [cid, title, url, text] = contexts[ci] || [null, null, null, ""];
      const spans = ctx.hl.filter((h) => h[0] === pos);
      const href = safeUrl(url);
      const nCited = new Set(spans.map((h) => h[1] + ":" + h[2])).size;
      return el("li", { id: prefix + "-c" + pos, class: "context" + (nCited ? " cited" : "") }, [
        el("details", { class: "passage" }, [
          el("summary", {}, [
            el("span", { class: "mark", text: "[" + pos + "]" }),
            el("span", { class: "ptitle", dir: "auto", text: title || cid || "context " + pos }),
            title && cid ? el("span", { class: "sim", text: "id " + cid }) : null,
            nCited ? el("span", { class: "supports", text: nCited + " cited passage" + (nCited === 1 ? "" : "s") }) : null,
            el("span", { class: "snip", dir: "auto", text: text.length > 90 ? text.slice(0, 90) + "…" : text }),
          ]),
          el("blockquote", { class: "ptext", dir: "auto" }, highlighted(text, spans, supports)),
          href || url ? el("p", { class: "psrc" }, [
            href ? el("a", { href: href, target: "_blank", rel: "noopener noreferrer", text: "Open the source ↗" })
              : el("span", { text: "Source: " + url }),
          ]) : null,
        ]),
      ]);
    });
    return el("section", { class: "contexts" }, [head, el("ol", { class: "plain" }, items)]);
  }

  const pct = (x) => (typeof x === "number" ? Math.round(x * 100) + "%" : "n/a");
  const SOURCES = new Map([["contexts", "checked against its contexts"],
    ["both", "checked against its contexts and the index"],
    ["none", "judged on no evidence (no contexts)"]]);

  function citationSummary(cc) {
    if (!cc) return null;
    const parts = [];
    if (typeof cc.n === "number") parts.push(cc.n + " sentences", (cc.sup || 0) + " supported by their citations");
    if (cc.unc) parts.push(cc.unc + " uncited");
    if (typeof cc.cit === "number") parts.push(cc.cit + " citations", (cc.rel || 0) + " relevant");
    if (cc.un) parts.push(cc.un + " naming no context");
    return el("span", { class: "ccsum", title: parts.join(", ") || null },
      ["citation recall " + pct(cc.rec) + " · precision " + pct(cc.prec)]);
  }

  function regenBlock(r, prefix) {
    const regen = r.regen;
    if (!regen) return null;
    const head = el("h4", { text: "Regeneration" });
    if (!regen.attempts) return el("section", { class: "regen" }, [head, el("pre", { class: "raw", dir: "auto", text: regen.raw })]);
    const columns = [el("div", { class: "attempt" }, [
      el("header", {}, ["Original ", el("span", { class: "badge label-" + labelClass(r.label), text: labelName(r.label) })]),
      textBlock(r, prefix),
    ])];
    regen.attempts.forEach((a, n) => {
      const p = prefix + "-a" + n;
      const name = (a.final ? "Final answer" : "Attempt " + (n + 1));
      if (a.raw !== undefined) {
        columns.push(el("div", { class: "attempt" }, [el("header", { text: name }), el("pre", { class: "raw", dir: "auto", text: a.raw })]));
        return;
      }
      columns.push(el("div", { class: "attempt" + (a.final ? " final" : "") }, [
        el("header", {}, [name + " ", a.label ? el("span", { class: "badge label-" + labelClass(a.label), text: labelName(a.label) }) : null]),
        a.err ? el("p", { class: "error", text: a.err }) : null,
        textBlock(a, p), flagsBlock(a, p), sourcesBlock(a, p),
      ]));
    });
    return el("section", { class: "regen" }, [head, el("div", { class: "regen-grid" }, columns)]);
  }

  function card(i) {
    const r = responses[i];
    const prefix = "r" + i;
    const nFlagged = flagCount(r);
    const meta = [r.line ? "line " + r.line : null, r.segs.length + " segment" + (r.segs.length === 1 ? "" : "s"),
      nFlagged ? nFlagged + " flagged" : null, SOURCES.get(r.src) || null].filter(Boolean).join(" · ");
    const fields = Object.entries(r.fields || {});
    return el("article", { class: "card label-" + labelClass(r.label), id: prefix, tabindex: "-1", "aria-label": "Response " + r.id }, [
      el("header", { class: "card-head" }, [
        el("h3", { text: r.id || "(no id)" }),
        el("span", { class: "badge label-" + labelClass(r.label), text: labelName(r.label) }),
        el("span", { class: "meta", text: meta }),
        citationSummary(r.cc),
      ]),
      r.q ? el("p", { class: "question" }, [el("span", { class: "k", text: "Question: " }),
        el("span", { dir: "auto", text: r.q })]) : null,
      r.err ? el("p", { class: "error", text: r.err }) : null,
      r.parts.length ? textBlock(r, prefix) : null,
      flagsBlock(r, prefix),
      sourcesBlock(r, prefix),
      contextsBlock(r, prefix),
      regenBlock(r, prefix),
      fields.length ? el("dl", { class: "fields" }, fields.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { dir: "auto", text: v })])) : null,
    ]);
  }

  function render() {
    const pages = Math.max(1, Math.ceil(matches.length / state.size));
    state.page = Math.min(state.page, pages - 1);
    const start = printing ? 0 : state.page * state.size;
    const shown = matches.slice(start, printing ? PRINT_MAX : start + state.size);
    list.replaceChildren(...shown.map(card));
    const all = matches.length === responses.length;
    const inAll = all ? "" : " (" + fmt(responses.length) + " in all)";
    status.textContent = matches.length
      ? "Showing " + fmt(start + 1) + "–" + fmt(start + shown.length) + " of " + fmt(matches.length) +
        (all ? " responses" : " matching responses") + inAll
      : "No response matches" + inAll + ".";
    $("page").textContent = "Page " + fmt(state.page + 1) + " of " + fmt(pages);
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
  }

  function update() {
    state.page = 0;
    recompute();
    render();
  }

  function goPage(delta) {
    const pages = Math.max(1, Math.ceil(matches.length / state.size));
    const page = Math.min(pages - 1, Math.max(0, state.page + delta));
    if (page === state.page) return;
    state.page = page;
    render();
    $("responses").scrollIntoView({ block: "start" });
  }

  function setFilter(value) {
    const radio = doc.querySelector('input[name="filter"][value="' + value + '"]');
    if (radio) radio.checked = true;
    state.filter = value;
    update();
  }

  function moveCard(delta) {
    const cards = [...list.children];
    if (!cards.length) return;
    const at = cards.indexOf(doc.activeElement && doc.activeElement.closest("article.card"));
    const next = at < 0 ? (delta > 0 ? 0 : cards.length - 1) : Math.min(cards.length - 1, Math.max(0, at + delta));
    cards[next].focus();
  }

  let timer = 0;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.terms = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      update();
    }, 120);
  });
  $("toolbar").addEventListener("submit", (event) => event.preventDefault());
  for (const radio of doc.querySelectorAll('input[name="filter"]')) {
    radio.addEventListener("change", () => { if (radio.checked) setFilter(radio.value); });
  }
  $("sort").addEventListener("change", (event) => { state.sort = event.target.value; update(); });
  $("size").addEventListener("change", (event) => { state.size = Number(event.target.value); update(); });
  $("prev").addEventListener("click", () => goPage(-1));
  $("next").addEventListener("click", () => goPage(1));

  doc.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // Letters are shortcuts everywhere except where they are typed or pick an option.
    const typing = event.target.matches &&
      event.target.matches("textarea, select, input:not([type=radio]):not([type=checkbox])");
    if (event.key === "Escape" && event.target === search) {
      search.blur();
      return;
    }
    if (typing) return;
    const actions = {
      "/": () => search.focus(),
      j: () => moveCard(1),
      k: () => moveCard(-1),
      f: () => setFilter(state.filter === "nonfactual" ? "all" : "nonfactual"),
      "[": () => goPage(-1),
      "]": () => goPage(1),
    };
    if (Object.prototype.hasOwnProperty.call(actions, event.key)) {
      event.preventDefault();
      actions[event.key]();
    }
  });

  // Printing shows every matching response (up to PRINT_MAX) with its passages open.
  window.addEventListener("beforeprint", () => {
    printing = true;
    render();
    for (const d of list.querySelectorAll("details")) d.open = true;
  });
  window.addEventListener("afterprint", () => {
    printing = false;
    render();
  });

  recompute();
  render();
  doc.documentElement.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  doc.documentElement.setAttribute("data-ready", "1");
})();
