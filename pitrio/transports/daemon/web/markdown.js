// Markdown to safe DOM: marked parses, DOMPurify sanitizes (the only way reply text becomes
// markup), highlight.js colours code blocks. Streaming text is re-rendered at most once per
// animation frame, however many deltas arrive in between.
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import hljs from "./vendor/highlight.min.js";
import { scrollDown } from "./dom.js";

marked.setOptions({ gfm: true, breaks: true });

// Links from a reply open in a new tab and cannot reach back into the page.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const PURIFY = { RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ["style", "form"], FORBID_ATTR: ["style"] };

/**
 * `text` (markdown from the model or a user) as a sanitized DocumentFragment. Code blocks with
 * a known language are highlighted; unlabelled ones are guessed only when `guess` (the guess
 * costs, so a streaming message leaves it to its final render).
 */
export function markdownFragment(text, guess = true) {
  let html;
  try {
    html = marked.parse(text || "");
  } catch {
    // marked does not throw on odd input today; if it ever does, show the text as it is.
    const fragment = document.createDocumentFragment();
    fragment.append(document.createTextNode(text || ""));
    return fragment;
  }
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const code of fragment.querySelectorAll("pre code")) {
    const label = [...code.classList].find((name) => name.startsWith("language-"));
    const language = label && label.slice("language-".length);
    if (language ? hljs.getLanguage(language) : guess && code.textContent.length < 20000) {
      hljs.highlightElement(code);
    }
  }
  return fragment;
}

/** Render `text` as markdown into `node` (replacing what it held). */
export function renderMarkdown(node, text, guess = true) {
  node.replaceChildren(markdownFragment(text, guess));
}

const dirty = new Map(); // node -> text to render at the next frame
let frame = 0;

/** Render `text` into `node` at the next animation frame (coalescing updates). */
export function renderSoon(node, text) {
  dirty.set(node, text);
  if (!frame) frame = requestAnimationFrame(flush);
}

/** Render pending updates now (a message ended: its final text must show at once). */
export function flush() {
  if (frame) cancelAnimationFrame(frame);
  frame = 0;
  const work = [...dirty];
  dirty.clear();
  for (const [node, text] of work) {
    if (node.isConnected) renderMarkdown(node, text, false);
  }
  // The text just rendered grew the transcript after the delta's own scroll: follow it now
  // (unless the reader scrolled up), not a delta later.
  if (work.length) scrollDown();
}

/** Forget a pending update of `node` (it is being replaced). */
export function cancelRender(node) {
  dirty.delete(node);
}
