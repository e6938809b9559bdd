// Runs INSIDE the Deno kernel at start, silently: tool() and the `tools` object over Jupyter's stdin
// channel (prompt()), and the helpers eval rewrites IPython idioms to (!cmd, %cd, %%bash, %%timeit).
(() => {
  const MARKER = "\u2063tether-call:";
  // named __tether_*: their frames are left out of a cell's traceback (see render.py)
  const send = function __tether_send(calls) {
    // calls go to the run in one request; it runs them (overlapping where its rule allows) and answers
    // all of them at once, in order
    let payload;
    try {
      payload = JSON.stringify({ calls });
    } catch (e) {
      const names = [...new Set(calls.map((c) => c.tool))].sort().join(", ");
      throw new TypeError(`tool(${names}): the arguments must be JSON-serializable (${e.message})`);
    }
    const answer = prompt(MARKER + payload);
    try {
      return JSON.parse(answer).results;
    } catch {
      throw new Error("tools: no answer from the tether run (stdin is not connected)");
    }
  };
  const toolResult = function __tether_toolResult(name, args = {}) {
    if (typeof name !== "string") throw new TypeError("tool(): the tool name must be a string");
    const reply = send([{ tool: name, args: args ?? {} }])[0];
    return { ...reply, images: (reply.images ?? []).length };
  };

  // -- tools: the run's tools as functions returning Promises of a Result ------------------------

  class ToolArgumentsError extends TypeError {
    name = "ToolArgumentsError";
  }
  class ToolNotFoundError extends Error {
    name = "ToolNotFoundError";
  }
  class Result {
    // what `await tools.<name>({...})` gives: String(r) is the text the model would see, r.data the
    // structured data, r.is_error, r.images ({mime_type, data: base64}), r.started / r.ended (the run's clock)
    constructor(reply) {
      this.tool = reply.tool ?? "";
      this.text = reply.text ?? "";
      this.data = reply.data ?? {};
      this.is_error = Boolean(reply.is_error);
      this.images = reply.images ?? [];
      this.started = reply.started;
      this.ended = reply.ended;
    }
    toString() {
      return this.text;
    }
    [Symbol.for("Jupyter.display")]() {
      return { "text/plain": this.text };
    }
  }

  const pyRepr = (s) => { // a string as Python's repr() writes it: the run's messages quote that way
    const q = s.includes("'") && !s.includes('"') ? '"' : "'";
    const body = s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
    return q + (q === "'" ? body.replace(/'/g, "\\'") : body) + q;
  };
  const describe = (v) => { // a value as the run's argument check names it (tether.args._describe)
    if (v === null || v === undefined) return "null";
    if (typeof v === "boolean") return `boolean ${v}`;
    if (typeof v === "number") return Number.isInteger(v) ? `integer ${v}` : `number ${v}`;
    if (typeof v === "string") return `string ${pyRepr(v.length <= 40 ? v : v.slice(0, 37) + "...")}`;
    if (Array.isArray(v)) return "array";
    if (typeof v === "object") return "object";
    return typeof v;
  };
  const ratio = (a, b) => { // difflib.SequenceMatcher(None, a, b).ratio() for short strings
    const where = new Map();
    [...b].forEach((ch, j) => where.set(ch, [...(where.get(ch) ?? []), j]));
    let matched = 0;
    const queue = [[0, a.length, 0, b.length]];
    while (queue.length) {
      const [alo, ahi, blo, bhi] = queue.pop();
      let [bi, bj, size] = [alo, blo, 0];
      let lens = new Map();
      for (let i = alo; i < ahi; i++) {
        const next = new Map();
        for (const j of where.get(a[i]) ?? []) {
          if (j < blo) continue;
          if (j >= bhi) break;
          const k = (lens.get(j - 1) ?? 0) + 1;
          next.set(j, k);
          if (k > size) [bi, bj, size] = [i - k + 1, j - k + 1, k];
        }
        lens = next;
      }
      if (!size) continue;
      matched += size;
      if (alo < bi && blo < bj) queue.push([alo, bi, blo, bj]);
      if (bi + size < ahi && bj + size < bhi) queue.push([bi + size, ahi, bj + size, bhi]);
    }
    return a.length + b.length ? (2 * matched) / (a.length + b.length) : 1;
  };
  const closest = (word, names) => { // difflib.get_close_matches(word, names, n=1)
    let best = null;
    for (const name of names) {
      const r = ratio(name, word);
      if (r >= 0.6 && (!best || r > best[0] || (r === best[0] && name > best[1]))) best = [r, name];
    }
    return best && best[1];
  };
  const mismatch = (prop, v) => { // why v does not fit a top-level property (the run's words), or null
    if ("enum" in prop) {
      if (prop.enum.some((a) => a === v)) return null;
      return `expected one of ${prop.enum.map((a) => JSON.stringify(a)).join(", ")}, got ${describe(v)}`;
    }
    const kind = prop.type;
    const ok = {
      string: typeof v === "string",
      integer: typeof v === "number" && Number.isInteger(v),
      number: typeof v === "number",
      boolean: typeof v === "boolean",
      array: Array.isArray(v),
      object: typeof v === "object" && v !== null && !Array.isArray(v),
    }[kind] ?? true;
    if (ok) return null;
    return `expected ${kind === "boolean" ? "boolean (true or false)" : kind}, got ${describe(v)}`;
  };
  const problems = (schema, args) => { // names, required ones, top-level types; deeper checks are the run's
    const props = schema.properties ?? {};
    const names = Object.keys(props);
    const unknown = Object.keys(args).filter((k) => !(k in props)).map((k) => {
      const close = closest(k, names);
      return `unknown argument '${k}'${close ? ` (did you mean '${close}'?)` : ""}; allowed: ${names.join(", ") || "none"}`;
    });
    if (unknown.length) return unknown;
    const required = new Set(schema.required ?? []);
    const out = [];
    for (const key of names) {
      const v = args[key];
      if (v === undefined || (v === null && !required.has(key))) {
        if (required.has(key) && v === undefined) out.push(`missing required argument '${key}'`);
        continue;
      }
      const why = mismatch(props[key], v);
      if (why) out.push(`${key}: ${why}`);
    }
    return out;
  };

  let catalog = new Map(); // the run's tools for this kernel's surface, by name (set before a cell when they changed)
  const setCatalog = function __tether_setCatalog(text) {
    catalog = new Map(JSON.parse(text).map((e) => [e.name, e]));
  };
  const entryOf = (name) => {
    const entry = catalog.get(name);
    if (entry === undefined) {
      const shown = [...catalog.keys()].sort().slice(0, 40).join(", ") || "none";
      throw new ToolNotFoundError(`tools has no tool '${name}' on this surface; tools.help() lists them (${shown})`);
    }
    return entry;
  };

  let pending = []; // calls not yet sent: sent together once the code that made them waits
  const flush = function __tether_flush() {
    const batch = pending;
    pending = [];
    let replies;
    try {
      replies = send(batch.map((p) => p.call));
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    batch.forEach((p, i) => {
      const reply = replies[i] ?? { tool: p.call.tool, is_error: true, text: "no answer for this call" };
      if (!p.raw && reply.data?.error === "invalid_arguments") p.reject(new ToolArgumentsError(reply.text));
      else p.resolve(new Result(reply));
    });
  };
  const submit = (call, raw) =>
    new Promise((resolve, reject) => {
      pending.push({ call, raw, resolve, reject });
      if (pending.length === 1) queueMicrotask(flush); // after the calls made in the same turn (Promise.all's)
    });
  const stubs = new Map();
  const stubOf = (entry) => {
    let stub = stubs.get(entry);
    if (stub === undefined) {
      stub = {
        [entry.name](args = {}) { // a wrong name or type rejects before the call reaches the run
          if (typeof args !== "object" || args === null || Array.isArray(args)) {
            return Promise.reject(new ToolArgumentsError(`invalid arguments for ${entry.name}: arguments must be a JSON object, got ${describe(args)}`));
          }
          const found = problems(entry.schema, args);
          if (found.length) return Promise.reject(new ToolArgumentsError(`invalid arguments for ${entry.name}: ${found.join("; ")}`));
          return submit({ tool: entry.name, args }, false);
        },
      }[entry.name];
      stub.description = entry.description;
      stub.tier = entry.tier;
      stub.schema = entry.schema;
      stubs.set(entry, stub);
    }
    return stub;
  };
  const tsType = (prop) => { // a property's JSON schema as a TypeScript type
    if (prop.enum) return prop.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (prop.anyOf) return prop.anyOf.map(tsType).join(" | ");
    if (prop.type === "array") return prop.items ? `Array<${tsType(prop.items)}>` : "unknown[]";
    if (prop.type === "object") return prop.properties ? tsObject(prop) : "Record<string, unknown>";
    return { string: "string", integer: "number", number: "number", boolean: "boolean", null: "null" }[prop.type] ?? "unknown";
  };
  const tsKey = (k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k));
  const tsComment = (text, indent) => {
    const lines = String(text ?? "").replace(/\*\//g, "* /").split("\n");
    return `${indent}/** ${lines.map((l, i) => (i ? `${indent} *${l ? " " + l : ""}` : l)).join("\n")} */\n`;
  };
  const tsObject = (schema, indent = "  ") => {
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties ?? {}).map(([k, p]) =>
      `${p.description ? tsComment(p.description, indent + "  ") : ""}${indent}  ${tsKey(k)}${required.has(k) ? "" : "?"}: ${tsType(p)}${required.has(k) ? "" : " | null"};`
    );
    return fields.length ? `{\n${fields.join("\n")}\n${indent}}` : "Record<string, never>";
  };
  const declarations = function __tether_declarations() { // the `tools` of this surface as a .d.ts
    const entries = [...catalog.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
    const methods = entries.map((e) =>
      `${tsComment(`${e.description}\n\ntier: ${e.tier}`, "  ")}  ${tsKey(e.name)}(args${(e.schema.required ?? []).length ? "" : "?"}: ${tsObject(e.schema, "  ")}): Promise<Result>;`
    );
    return [
      "// The run's tools as the `tools` object of a Deno cell sees them (generated by tools.declarations()).",
      "export interface Result {",
      "  tool: string;\n  text: string;\n  data: Record<string, unknown>;\n  is_error: boolean;",
      "  images: Array<{ mime_type: string; data: string }>;\n  started?: number;\n  ended?: number;",
      "}",
      "export interface Tools {",
      ...methods,
      "  /** Any tool by name; never rejects for the tool's own error. */",
      "  call(name: string, args?: Record<string, unknown>): Promise<Result>;",
      "  help(name?: string): void;",
      "  declarations(): string;",
      "}",
      "declare global {\n  var tools: Tools;\n}",
      "",
    ].join("\n");
  };
  const own = {
    call(name, args = {}) { // the untyped door: a Promise of a Result, never rejected for a tool's error
      if (typeof name !== "string") return Promise.reject(new TypeError("tools.call(): the tool name must be a string"));
      return submit({ tool: name, args: args ?? {} }, true);
    },
    declarations, // tools.declarations(): a .d.ts of this surface's tools, for an editor or `deno check`
    help(name) { // one line per tool visible here; tools.help("read"): one tool's arguments and schema
      if (name === undefined) {
        const entries = [...catalog.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
        for (const e of entries) {
          let summary = e.description.split(". ")[0].trim().replace(/\.$/, "");
          if (summary.length > 100) summary = summary.slice(0, 97) + "...";
          console.log(`${e.name} (${e.tier}): ${summary}`);
        }
        console.log(`[${entries.length} tools; tools.help(name) shows one in full]`);
        return;
      }
      const e = entryOf(name);
      const required = new Set(e.schema.required ?? []);
      const lines = [`tools.${name}({...}): Promise<Result>`, "", e.description, "", `tier: ${e.tier}. Arguments:`];
      for (const [key, prop] of Object.entries(e.schema.properties ?? {})) {
        const need = required.has(key) ? "required" : `default ${JSON.stringify(prop.default ?? null)}`;
        lines.push(`  ${key} (${need}): ${prop.description ?? ""}`);
      }
      console.log(lines.join("\n") + "\n\nschema:\n" + JSON.stringify(e.schema, null, 1));
    },
  };
  own[Symbol.for("Jupyter.display")] = () => ({
    "text/plain": `<tools: ${catalog.size} tools on this surface; tools.help() lists them>`,
  });
  const passive = new Set(["then", "toJSON", "constructor", "valueOf", "toString"]); // asked by await, JSON, display
  const tools = new Proxy(own, {
    get(target, prop) {
      if (typeof prop === "symbol" || prop in target || passive.has(prop)) return target[prop];
      return stubOf(entryOf(prop));
    },
    has: (target, prop) => prop in target || catalog.has(prop),
    ownKeys: (target) => [...new Set([...catalog.keys(), ...Reflect.ownKeys(target)])],
    getOwnPropertyDescriptor: (target, prop) =>
      Reflect.getOwnPropertyDescriptor(target, prop) ??
      (catalog.has(prop) ? { configurable: true, enumerable: true, value: stubOf(catalog.get(prop)) } : undefined),
  });
  const tool = function __tether_tool(name, args = {}) {
    const reply = toolResult(name, args);
    if (reply.is_error) throw new Error(reply.text || `tool ${name} failed`);
    return reply.text;
  };
  const decoder = new TextDecoder();
  const sh = function __tether_sh(command, { capture = false, shell = "/bin/sh" } = {}) {
    const out = new Deno.Command(shell, { args: ["-c", command + " 2>&1"], stdin: "null", stdout: "piped", stderr: "piped" }).outputSync();
    const text = decoder.decode(out.stdout);
    globalThis.__tether.exitCode = out.code;
    if (capture) return text.split("\n").filter((l, i, a) => !(i === a.length - 1 && l === ""));
    if (text) console.log(text.replace(/\n$/, "")); // console output is what the kernel forwards
    if (out.code) console.log(`[exit code ${out.code}]`);
  };
  const cd = (path = "") => {
    const target = path.trim().replace(/^['"]|['"]$/g, "") || Deno.env.get("HOME") || "/";
    Deno.chdir(target.startsWith("~") ? (Deno.env.get("HOME") ?? "") + target.slice(1) : target);
    console.log(Deno.cwd());
  };
  const fmt = (s) => {
    for (const [unit, scale] of [["s", 1], ["ms", 1e-3], ["\u00b5s", 1e-6], ["ns", 1e-9]]) if (s >= scale) return `${(s / scale).toPrecision(3)} ${unit}`;
    return `${(s / 1e-9).toPrecision(3)} ns`;
  };
  const timeit = async (fn, repeat = 5) => {
    let number = 1;
    for (;;) { // autorange like Python's timeit: grow until one run takes >= 0.2 s
      const t0 = performance.now();
      for (let i = 0; i < number; i++) await fn();
      if ((performance.now() - t0) / 1000 >= 0.2 || number >= 1e9) break;
      number *= 10;
    }
    const runs = [];
    for (let r = 0; r < repeat; r++) {
      const t0 = performance.now();
      for (let i = 0; i < number; i++) await fn();
      runs.push((performance.now() - t0) / 1000 / number);
    }
    const mean = runs.reduce((a, b) => a + b, 0) / runs.length;
    const std = Math.sqrt(runs.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, runs.length - 1));
    console.log(`${fmt(mean)} \u00b1 ${fmt(std)} per loop (mean \u00b1 std. dev. of ${repeat} runs, ${number.toLocaleString("en")} loops each)`);
  };
  globalThis.tool = tool;
  globalThis.toolResult = toolResult;
  globalThis.tools = tools; // a cell that rebinds the name gets it back as __tether.tools
  const ping = () => { prompt(MARKER + '{"ping": true}'); };
  globalThis.__tether = { sh, cd, timeit, ping, setCatalog, tools, Result, ToolArgumentsError, ToolNotFoundError, exitCode: 0 };
})();
