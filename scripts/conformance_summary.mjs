// Summarise the conformance suite's results for scripts/conformance.sh.
//
//   node conformance_summary.mjs RESULTS REVISION ...
//
// RESULTS/REVISION/ holds one folder per scenario run (server-NAME-TIMESTAMP/checks.json, a
// list of checks with status SUCCESS | FAILURE | WARNING | SKIPPED | INFO) and suite.log.
// A scenario passes when none of its checks is a FAILURE. Scenarios the suite itself lists
// as "(extension)" in its log are counted apart. Exit 0 when every counted scenario passed,
// 1 when one failed or none ran.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [results, ...revisions] = process.argv.slice(2);
const RUN = /^server-(.+)-(\d{4}-\d\d-\d\dT[\d-]+Z)$/;
let passed = 0, failed = 0, extPassed = 0, extFailed = 0, empty = [];

for (const rev of revisions) {
  const dir = join(results, rev);
  const log = existsSync(join(dir, "suite.log")) ? readFileSync(join(dir, "suite.log"), "utf8") : "";
  const extensions = new Set([...log.matchAll(/^\s+[✓✗] (\S+) \(extension\)$/gmu)].map((m) => m[1]));
  const runs = readdirSync(dir)
    .map((entry) => [entry, RUN.exec(entry)])
    .filter(([entry, m]) => m && existsSync(join(dir, entry, "checks.json")))
    .sort(([, a], [, b]) => a[2].localeCompare(b[2]));
  if (runs.length === 0) {
    empty.push(rev);
    console.log(`${rev}: no scenario ran; the suite said:\n${log.trim().split("\n").slice(-20).join("\n")}`);
    continue;
  }
  console.log(`== ${rev}: ${runs.length} scenarios`);
  const failedNames = [];
  let revPassed = 0;
  for (const [entry, [, name]] of runs) {
    const checks = JSON.parse(readFileSync(join(dir, entry, "checks.json"), "utf8"));
    const bad = checks.filter((c) => c.status === "FAILURE");
    const good = checks.filter((c) => c.status === "SUCCESS").length;
    const ext = extensions.has(name);
    console.log(`${bad.length ? "✗" : "✓"} ${name} (${rev}): ${good} passed, ${bad.length} failed${ext ? " [extension]" : ""}`);
    for (const c of bad) console.log(`    ✗ ${c.id}: ${c.errorMessage ?? c.description ?? ""}`);
    if (ext) bad.length ? extFailed++ : extPassed++;
    else if (bad.length) { failed++; failedNames.push(name); }
    else { passed++; revPassed++; }
  }
  for (const name of failedNames) console.log(`FAILED (${rev}): ${name}`);
  console.log(`${rev}: ${revPassed} passed, ${failedNames.length} failed`);
}
console.log(`extension scenarios (not required): ${extPassed} passed, ${extFailed} failed`);
console.log(`conformance: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && empty.length === 0 ? 0 : 1);
