const assert = require("node:assert");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

assert.strictEqual([1, 2, 3].map((n) => n * 2).join(","), "2,4,6");
// A test that uses a scratch file: the call's own TMPDIR is writable.
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "tiny-"));
fs.writeFileSync(path.join(scratch, "x"), "ok");
assert.strictEqual(fs.readFileSync(path.join(scratch, "x"), "utf8"), "ok");
console.log("tiny npm tests passed");
