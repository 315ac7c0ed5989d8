// Evaluated in the QuickJS context before a codemode script (see child.py). It evaluates to a
// function (bridge, toolsJson, globalsJson, storeJson) returning {settle, run, stalled}.
// Only `bridge` reaches the host; it stays in this closure, so a script cannot call it. It is
// called with primitives only:
//   bridge("call" | "global", id, name, argsJson)   a tool call or a host global
//   bridge("output", kind, data, mimeType)          kind "text", "console" or "image"
//   bridge("done", ok, valueOrErrorJson, writesJson)
(function (bridge, toolsJson, globalsJson, storeJson) {
  "use strict";
  // First of all, the built-ins are locked (as pi 1.6.0 locks them): every object reachable
  // from the global object, and the intrinsics only instances lead to, is frozen, and the
  // built-in globals become read-only. The script shares these objects with this file, so a
  // script that patched one (Array.prototype.toJSON, JSON.stringify) could otherwise change
  // what this file reports to the host.
  (function lock() {
    // A frozen prototype's data property cannot be assigned on an instance either (the
    // "override mistake"): `this.name = "X"` in an Error subclass would throw. These keys
    // (and every key of Object.prototype) become accessors whose setter defines an own
    // property on the instance instead.
    const SHADOWABLE = ["constructor", "name", "message", "toString", "toLocaleString", "valueOf", "toJSON"];
    const visited = new Set([globalThis]);
    const todo = [];
    function visit(value) {
      const kind = typeof value;
      if (((kind === "object" && value !== null) || kind === "function") && !visited.has(value)) {
        visited.add(value);
        todo.push(value);
      }
    }
    function shadowable(owner, key, value, enumerable) {
      // Methods of an object literal: they have no `prototype` that would be walked again.
      const pair = Object.getOwnPropertyDescriptor({
        get slot() {
          return value;
        },
        set slot(next) {
          if (this === owner) throw new TypeError("Cannot assign to read only property '" + String(key) + "' of a built-in");
          if ((typeof this !== "object" || this === null) && typeof this !== "function") return;
          Object.defineProperty(this, key, { value: next, writable: true, enumerable: true, configurable: true });
        },
      }, "slot");
      Object.defineProperty(owner, key, { get: pair.get, set: pair.set, enumerable, configurable: false });
      visit(pair.get);
      visit(pair.set);
    }
    for (const key of Reflect.ownKeys(globalThis)) {
      const slot = Object.getOwnPropertyDescriptor(globalThis, key);
      visit(slot.value);
      visit(slot.get);
      visit(slot.set);
      if ("value" in slot && slot.configurable) Object.defineProperty(globalThis, key, { writable: false, configurable: false });
    }
    const protoOf = Object.getPrototypeOf;
    visit(protoOf(function* () {}));
    visit(protoOf(async function () {}));
    visit(protoOf(async function* () {}));
    visit(protoOf(Int8Array));
    visit(protoOf([][Symbol.iterator]()));
    visit(protoOf(new Map()[Symbol.iterator]()));
    visit(protoOf(new Set()[Symbol.iterator]()));
    visit(protoOf(""[Symbol.iterator]()));
    visit(protoOf(/x/[Symbol.matchAll]("")));
    if (typeof Iterator === "function") {
      if (typeof Iterator.prototype.map === "function") visit(protoOf([].values().map((x) => x)));
      if (typeof Iterator.from === "function") visit(protoOf(Iterator.from({ next() {} })));
    }
    while (todo.length > 0) {
      const owner = todo.pop();
      visit(protoOf(owner));
      const slots = Object.getOwnPropertyDescriptors(owner);
      for (const key of Reflect.ownKeys(slots)) {
        const slot = slots[key];
        if ("value" in slot) {
          visit(slot.value);
          if (slot.writable && slot.configurable && (owner === Object.prototype || SHADOWABLE.includes(key))) {
            shadowable(owner, key, slot.value, slot.enumerable);
          }
        } else {
          visit(slot.get);
          visit(slot.set);
        }
      }
      Object.freeze(owner);
    }
  })();
  // Captured before the script runs: a script that replaces one of these cannot change what
  // this file reports to the host.
  const toJson = JSON.stringify;
  const fromJson = JSON.parse;
  const thenOf = Promise.prototype.then;
  const Err = Error;
  const TypeErr = TypeError;
  const RangeErr = RangeError;
  const MAX_VALUE = 262144;
  const MAX_TOTAL = 1048576;
  const MAX_CHARS = 16777216;
  const MAX_ITEMS = 100000;
  const waiting = new Map();
  let counter = 0;
  let over = false;
  const UNWIND = Object.freeze({});

  function finish(ok, payload, writes) {
    if (over) return;
    over = true;
    bridge("done", ok, payload, writes);
  }

  // "Name: message" then the frames, as an error reads in Node.
  function errorText(e) {
    const first = e.message ? e.name + ": " + e.message : String(e.name);
    const lines = typeof e.stack === "string" ? e.stack.split("\n").filter((l) => l.trim() !== "") : [];
    return [first].concat(lines).join("\n");
  }

  function show(value) {
    if (typeof value === "string") return value;
    if (value instanceof Err) return errorText(value);
    if (typeof value === "number") return String(value);
    try {
      const json = toJson(value);
      return json === undefined ? String(value) : json;
    } catch (_) {
      return String(value);
    }
  }

  function describe(e) {
    // QuickJS throws null when it cannot even allocate the error of an exhausted heap; a
    // script that throws null itself reads the same (rare, and not worth a second channel).
    if (e === null) return toJson({ name: "InternalError", message: "out of memory", stack: "InternalError: out of memory" });
    try {
      if (e instanceof Err) return toJson({ name: String(e.name), message: String(e.message), stack: errorText(e) });
      return toJson({ message: String(show(e)) });
    } catch (_) {
      return toJson({ message: "The script threw a value that cannot be described" });
    }
  }

  function hostCall(kind, name, spread) {
    return function (...args) {
      return new Promise((resolve, reject) => {
        let json;
        try {
          const value = spread ? args : args[0];
          json = value === undefined ? undefined : toJson(value);
        } catch (e) {
          reject(e);
          return;
        }
        counter += 1;
        waiting.set(counter, { resolve, reject });
        bridge(kind, counter, name, json);
      });
    };
  }

  const table = Object.create(null);
  const listing = [];
  for (const entry of fromJson(toolsJson)) {
    const fn = hostCall("call", entry.name, false);
    if (!(entry.jsName in table)) {
      table[entry.jsName] = fn;
      listing.push(Object.freeze({ name: entry.jsName, description: entry.description }));
    }
    if (!(entry.name in table)) table[entry.name] = fn;
  }
  Object.freeze(table);
  Object.freeze(listing);

  // A missing member is an error naming the near ones, rather than "not a function" later.
  const squash = (s) => s.toLowerCase().replace(/[^a-z0-9]/g, "");
  function guarded(target, label, names, hint) {
    return new Proxy(target, {
      get(object, key, receiver) {
        if (typeof key !== "string" || key in object || key in Object.prototype || key === "then" || key === "toJSON") {
          return Reflect.get(object, key, receiver);
        }
        const want = squash(key);
        let near = names.filter((n) => squash(n) === want);
        if (near.length === 0) near = names.filter((n) => want !== "" && (squash(n).includes(want) || want.includes(squash(n))));
        let text = label + "." + key + " does not exist.";
        if (near.length > 0) text += " Did you mean " + near.slice(0, 5).map((n) => label + "." + n).join(", ") + "?";
        else if (names.length <= 20) text += " Available: " + names.join(", ") + ".";
        if (hint) text += " " + hint;
        text += ' Check for a member with "' + key + '" in ' + label + ".";
        throw new TypeErr(text);
      },
    });
  }
  const tools = guarded(table, "tools", listing.map((t) => t.name), "ALL_TOOLS lists every tool; searchTools(query) finds tools by topic.");

  const groups = new Map();
  for (const entry of fromJson(globalsJson)) {
    const fn = hostCall("global", entry.name, entry.spread);
    const dot = entry.name.indexOf(".");
    if (dot < 0) {
      Object.defineProperty(globalThis, entry.name, { value: fn, enumerable: true });
    } else {
      const group = entry.name.slice(0, dot);
      if (!groups.has(group)) groups.set(group, Object.create(null));
      groups.get(group)[entry.name.slice(dot + 1)] = fn;
    }
  }
  for (const [group, members] of groups) {
    Object.freeze(members);
    Object.defineProperty(globalThis, group, { value: guarded(members, group, Object.keys(members)), enumerable: true });
  }

  // store() / load(): JSON text by key; sizes count key and JSON characters.
  const kept = new Map(Object.entries(fromJson(storeJson)));
  const written = new Map();
  let keptChars = 0;
  for (const [key, json] of kept) keptChars += key.length + json.length;
  const STORE_ADVICE = "store() is for small state such as IDs or summaries. Show images with image(), keep large data in variables, or write it to a file with a tool.";
  function needKey(fn, key) {
    if (typeof key !== "string") throw new TypeErr(fn + "() key must be a string");
  }
  function store(key, value) {
    needKey("store", key);
    const before = kept.has(key) ? key.length + kept.get(key).length : 0;
    if (value === undefined) {
      kept.delete(key);
      keptChars -= before;
      written.set(key, undefined);
      return;
    }
    let json;
    try {
      json = toJson(value);
    } catch (e) {
      throw new TypeErr("store(" + toJson(key) + ") value is not JSON-serializable: " + show(e));
    }
    if (json === undefined) throw new TypeErr("store(" + toJson(key) + ") value is not JSON-serializable");
    if (json.length > MAX_VALUE) {
      throw new RangeErr("store(" + toJson(key) + ") value has " + json.length + " characters of JSON, more than the limit of " + MAX_VALUE + ". " + STORE_ADVICE);
    }
    const after = keptChars - before + key.length + json.length;
    if (after > MAX_TOTAL) {
      throw new RangeErr("store is full: stored values would exceed " + MAX_TOTAL + " characters of JSON. Delete keys with store(key, undefined). " + STORE_ADVICE);
    }
    kept.set(key, json);
    keptChars = after;
    written.set(key, json);
  }
  function load(key) {
    needKey("load", key);
    const json = kept.get(key);
    return json === undefined ? undefined : fromJson(json);
  }
  function writesJson() {
    const list = [];
    for (const [key, json] of written) list.push(json === undefined ? [key] : [key, json]);
    return toJson(list);
  }

  let chars = 0;
  let items = 0;
  function emit(kind, data, mimeType) {
    if (over) return;
    chars += data.length;
    items += 1;
    if (chars > MAX_CHARS || items > MAX_ITEMS) {
      const e = new RangeErr("script output exceeded the limit of " + MAX_CHARS + " characters or " + MAX_ITEMS + " text(), image(), and console calls. Print a summary instead, or write large data to a file with a tool.");
      finish(false, describe(e));
      throw e;
    }
    bridge("output", kind, data, mimeType);
  }

  function text(value) {
    let rendered;
    try {
      if (value === undefined || value === null || (typeof value !== "object" && typeof value !== "function")) {
        rendered = String(value);
      } else {
        const json = toJson(value);
        rendered = json === undefined ? String(value) : json;
      }
    } catch (e) {
      throw new TypeErr(e instanceof Err ? e.message : String(e));
    }
    emit("text", rendered);
  }

  const IMAGE_EXPECTS = 'image expects a non-empty image URL string, an object with image_url, or an image block { type: "image", data, mimeType }';
  function urlOf(value) {
    if (typeof value === "string") return value;
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeErr(IMAGE_EXPECTS);
    if (value.image_url !== undefined) {
      if (typeof value.image_url !== "string") throw new TypeErr(IMAGE_EXPECTS);
      return value.image_url;
    }
    if (typeof value.type !== "string") throw new TypeErr(IMAGE_EXPECTS);
    if (value.type !== "image") throw new TypeErr('image only accepts image blocks, got "' + value.type + '"');
    if (typeof value.data !== "string" || value.data === "") throw new TypeErr("image expected image block data");
    if (value.data.toLowerCase().startsWith("data:")) return value.data;
    return "data:;base64," + value.data;
  }
  // The base64 forms of the first bytes of PNG, JPEG, GIF and WebP files.
  const KINDS = [
    ["image/png", /^iVBORw0KGg/],
    ["image/jpeg", /^[/]9j[/](?!9)/],
    ["image/gif", /^R0lGOD[dl]h/],
    ["image/webp", /^UklG.{8}RUJQ/],
  ];
  function image(value) {
    const url = urlOf(value);
    if (url === "") throw new TypeErr(IMAGE_EXPECTS);
    const colon = url.indexOf(":");
    const scheme = colon < 0 ? "" : url.slice(0, colon).toLowerCase();
    if (scheme === "http" || scheme === "https") {
      throw new TypeErr("remote image URLs are not supported in tool outputs. Pass a base64 data URI instead");
    }
    const comma = url.indexOf(",");
    const params = comma < 0 ? [] : url.slice(colon + 1, comma).split(";");
    if (scheme !== "data" || comma < 0 || params.slice(1).every((p) => p.toLowerCase() !== "base64")) {
      throw new TypeErr("invalid image output. Pass a base64 data URI instead");
    }
    const data = url.slice(comma + 1).replace(/\s+/g, "");
    if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
      throw new TypeErr("invalid image output. The image data is not valid base64 (truncated or corrupted?)");
    }
    const found = KINDS.find((kind) => kind[1].test(data.slice(0, 16)));
    if (!found) throw new TypeErr("invalid image output. The image data is not a PNG, JPEG, GIF, or WebP image");
    emit("image", data, found[0]);
  }

  function exit() {
    let writes;
    try {
      writes = writesJson();
    } catch (e) {
      finish(false, describe(e));
      throw UNWIND;
    }
    finish(true, undefined, writes);
    throw UNWIND;
  }

  const con = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    con[level] = (...args) => emit("console", args.map(show).join(" "));
  }
  Object.freeze(con);

  const define = (name, value) => Object.defineProperty(globalThis, name, { value, enumerable: true });
  define("tools", tools);
  define("ALL_TOOLS", listing);
  define("console", con);
  define("text", text);
  define("image", image);
  define("exit", exit);
  define("store", store);
  define("load", load);

  return {
    settle(id, ok, payload, propertiesJson) {
      const entry = waiting.get(id);
      if (!entry) return;
      waiting.delete(id);
      if (!ok) {
        const e = new Err(payload);
        if (propertiesJson !== undefined && propertiesJson !== null) {
          const extra = fromJson(propertiesJson);
          for (const key of Object.keys(extra)) {
            if (key !== "name" && key !== "message" && key !== "stack") {
              Object.defineProperty(e, key, { value: extra[key], writable: true, enumerable: true, configurable: true });
            }
          }
        }
        entry.reject(e);
        return;
      }
      let value;
      try {
        value = payload === undefined || payload === null ? undefined : fromJson(payload);
      } catch (e) {
        entry.reject(e);
        return;
      }
      entry.resolve(value);
    },
    run(fn) {
      let promise;
      try {
        promise = fn(tools, con);
      } catch (e) {
        finish(false, describe(e));
        return;
      }
      thenOf.call(
        promise,
        (value) => {
          let json;
          try {
            json = value === undefined ? undefined : toJson(value);
          } catch (e) {
            finish(false, describe(e));
            return;
          }
          finish(true, json, writesJson());
        },
        (e) => {
          if (e === UNWIND) return;
          finish(false, describe(e));
        },
      );
    },
    stalled() {
      if (over || waiting.size > 0) return false;
      finish(false, toJson({
        name: "Error",
        message: "The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here.",
      }));
      return true;
    },
  };
})
