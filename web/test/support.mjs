// Shared by the Node scripts the Rust tests run (tests/web_client.rs).

/** JSON.parse keeping integers beyond 2^53 exact (as BigInt). */
export function parseJson(text) {
  // Quote long integer literals outside strings, then turn them back into BigInt.
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") out += text[++i];
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    const m = /^-?\d+(?![.eE\d])/.exec(text.slice(i, i + 32));
    const starts = (c === "-" || /\d/.test(c)) && !/[\d.eE+-]/.test(text[i - 1] ?? "");
    if (m && starts && m[0].replace("-", "").length >= 16) {
      out += `"__big__${m[0]}"`;
      i += m[0].length - 1;
      continue;
    }
    out += c;
  }
  return JSON.parse(out, (_, v) =>
    typeof v === "string" && v.startsWith("__big__") ? BigInt(v.slice(7)) : v,
  );
}

/** Counts checks and prints the closing line the Rust test reads. */
export class Tally {
  constructor() {
    this.passed = 0;
    this.failures = [];
  }
  check(ok, what) {
    if (ok) this.passed++;
    else this.failures.push(what);
  }
  finish() {
    for (const f of this.failures.slice(0, 40)) console.error(`FAIL ${f}`);
    console.log(`${this.passed} passed, ${this.failures.length} failed`);
    process.exit(this.failures.length ? 1 : 0);
  }
}
