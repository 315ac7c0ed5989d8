// The composer: Enter sends (Steer while the session runs), Shift+Enter is a new line, Esc
// aborts (or cancels an open dialog); images pasted or chosen with the file input travel as the
// prompt's `images` ({type: "image", data: base64, mimeType}).
import { $, el, showNotice } from "./dom.js";
import { send, state } from "./connection.js";
import { submitCommand } from "./sessions.js";
import { cancelTopDialog, dialogOpen } from "./dialogs.js";

const MAX_IMAGE_BYTES = 10 << 20;
const attachments = []; // {data, mimeType, name}

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren();
  box.classList.toggle("hidden", attachments.length === 0);
  attachments.forEach((image, index) => {
    const item = el("span", "attachment-item");
    const thumb = el("img", "thumb");
    thumb.alt = image.name;
    thumb.src = `data:${image.mimeType};base64,${image.data}`;
    const remove = el("button", "remove", "×");
    remove.type = "button";
    remove.title = "Remove " + image.name;
    remove.onclick = () => {
      attachments.splice(index, 1);
      renderAttachments();
    };
    item.append(thumb, remove);
    box.append(item);
  });
}

function readImage(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve({ data: url.slice(url.indexOf(",") + 1), mimeType: file.type, name: file.name });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** Attach image files (others are refused with a notice). */
export async function attachFiles(files) {
  for (const file of files) {
    if (!file.type.startsWith("image/")) {
      showNotice(`${file.name || "That file"} is not an image; only images can be attached.`, true);
      continue;
    }
    if (file.size > MAX_IMAGE_BYTES) {
      showNotice(`${file.name} is larger than ${MAX_IMAGE_BYTES >> 20} MB.`, true);
      continue;
    }
    attachments.push(await readImage(file));
  }
  renderAttachments();
}

function submit(kind) {
  const input = $("prompt");
  const text = input.value.trim();
  if (!text && attachments.length === 0) return;
  const images = attachments.map(({ data, mimeType }) => ({ type: "image", data, mimeType }));
  const command = { message: text, ...(images.length ? { images } : {}) };
  let type = "prompt";
  if (kind === "followUp") type = "follow_up";
  else if (state.current && state.current.streaming) type = "steer";
  // With no session yet, one is created first; while reconnecting, it waits (sessions.js).
  submitCommand({ type, ...command });
  input.value = "";
  attachments.length = 0;
  renderAttachments();
}

/** Wire the composer's keys, buttons, paste and file input. */
export function wireComposer() {
  $("composer").onsubmit = (event) => {
    event.preventDefault();
    submit("default");
  };
  $("prompt").onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit("default");
    }
  };
  $("prompt").onpaste = (event) => {
    const files = [...(event.clipboardData ? event.clipboardData.files : [])];
    const images = files.filter((file) => file.type.startsWith("image/"));
    if (images.length) {
      event.preventDefault();
      attachFiles(images);
    }
  };
  $("attach").onclick = () => $("image-input").click();
  $("image-input").onchange = () => {
    attachFiles([...$("image-input").files]);
    $("image-input").value = "";
  };
  $("follow-up").onclick = () => submit("followUp");
  $("abort").onclick = () => send({ type: "abort" });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (dialogOpen()) {
      event.preventDefault();
      cancelTopDialog();
    } else if (state.current && state.current.streaming) {
      event.preventDefault();
      send({ type: "abort" });
    }
  });
}
