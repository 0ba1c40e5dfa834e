// Runs the cases of cases.json (read from stdin) on this node's ECMA-262
// RegExp: unicode mode (the u flag), or without it for the Annex B cases.
// Writes one result per case: whether the pattern compiled, and test() of
// each string of match and nomatch.
import { readFileSync } from "node:fs";

const cases = JSON.parse(readFileSync(0, "utf8"));
const out = cases.map((c) => {
  let re;
  try {
    re = new RegExp(c.pattern, c.annexB ? "" : "u");
  } catch (e) {
    return { compiled: false, error: String(e) };
  }
  const test = (ss) => (ss || []).map((s) => re.test(s));
  return { compiled: true, match: test(c.match), nomatch: test(c.nomatch) };
});
process.stdout.write(JSON.stringify(out));
