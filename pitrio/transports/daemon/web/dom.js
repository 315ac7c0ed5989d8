// Small DOM helpers shared by the page's modules. Untrusted text only ever goes through
// textContent here; markup from a reply is never assigned as HTML.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** A new element with an optional class and text (set as textContent, never as HTML). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

/** The text blocks of a message's content (a string or a list of blocks), joined. */
export function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
}

/** Show the notice bar above the transcript (an error when `error`). */
export function showNotice(text, error) {
  const box = $("notice");
  box.textContent = text;
  box.classList.remove("hidden");
  box.classList.toggle("error", Boolean(error));
}

/** Hide the notice bar. */
export function hideNotice() {
  $("notice").classList.add("hidden");
}

// Whether the transcript follows new output: true until the reader scrolls up, true again
// once they scroll back to the end.
let following = true;
// Where the page itself last scrolled the transcript to (its end then).
let pageTop = -1;

/** Keep the newest message in view, unless the reader scrolled up to read. */
export function scrollDown() {
  const box = $("messages");
  if (!box.onscroll) {
    box.onscroll = () => {
      const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
      // The event of the page's own scroll comes a frame later: had the transcript grown in
      // between without a scroll of the page's (a new message's header), it would look like
      // a reader who scrolled away from the end. Only a scroll elsewhere is the reader's.
      if (atEnd || box.scrollTop !== pageTop) following = atEnd;
    };
  }
  if (following) {
    box.scrollTop = box.scrollHeight;
    pageTop = box.scrollTop;
  }
}

/** Follow new output again (another session is shown). */
export function followOutput() {
  following = true;
}
