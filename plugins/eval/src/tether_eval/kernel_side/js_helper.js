// Runs INSIDE the Deno kernel at start, silently: tool() over Jupyter's stdin channel (prompt()),
// and the helpers eval rewrites IPython idioms to (!cmd, %cd, %%bash, %%timeit).
(() => {
  const MARKER = "\u2063tether-call:";
  // named __tether_*: their frames are left out of a cell's traceback (see render.py)
  const toolResult = function __tether_toolResult(name, args = {}) {
    if (typeof name !== "string") throw new TypeError("tool(): the tool name must be a string");
    const answer = prompt(MARKER + JSON.stringify({ calls: [{ tool: name, args: args ?? {} }] }));
    try {
      const reply = JSON.parse(answer).results[0];
      return { ...reply, images: (reply.images ?? []).length };
    } catch {
      throw new Error(`tool(${JSON.stringify(name)}): no answer from the tether run (stdin is not connected)`);
    }
  };
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
  const ping = () => { prompt(MARKER + '{"ping": true}'); };
  globalThis.__tether = { sh, cd, timeit, ping, exitCode: 0 };
})();
