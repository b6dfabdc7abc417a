/**
 * Records test/golden/answers.json: `npm run golden:record`. Run it only when the arithmetic or the
 * tiny models change on purpose (docs/arithmetic.md, "Golden answers"): it answers every golden call
 * at every level this CPU runs, refuses to write if the levels disagree, and writes the bits with the
 * commit and CPU they came from.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import { runnableIsaLevels } from '../helpers/cpu';
import { answerBits, goldenCalls, goldenConfigs, goldenFile, GoldenFile, goldenModels } from './golden';

async function main() {
  const levels = runnableIsaLevels();
  const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const file: GoldenFile = { recorded: { commit, cpu, levels, date: new Date().toISOString().slice(0, 10) }, models: {} };
  for (const model of goldenModels) {
    const calls = await goldenCalls(model);
    const answers: Record<string, string[][][]> = {};
    for (const config of goldenConfigs) {
      const byLevel = await Promise.all(levels.map((isa) => answerBits(model, calls, config, isa)));
      const kinds = new Set(byLevel.map((b) => JSON.stringify(b)));
      if (kinds.size !== 1) throw new Error(`${model} ${config.name}: the levels ${levels.join(', ')} disagree; nothing written`);
      answers[config.name] = byLevel[0];
    }
    file.models[model] = { calls, answers };
    console.log(`${model}: ${goldenConfigs.length} configurations, ${levels.length} levels agree`);
  }
  // One line per array of numbers or bits.
  const text = JSON.stringify(file, null, 1).replace(/\[[^[\]{}]*\]/g, (a) => a.replace(/\s+/g, ''));
  fs.writeFileSync(goldenFile, text + '\n');
  console.log(`wrote ${goldenFile}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
