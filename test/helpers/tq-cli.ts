/**
 * Runs the engine's command-line program (csrc/cli/main.cpp, built next to the addon by
 * `npm run build:addon`) and parses the JSON it prints. Shared by its test and the benchmarks.
 */
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { defaultSpinCount } from '../../src/engine/native';

export const cliPath = path.resolve(__dirname, '..', '..', 'build', 'tq_cli');

export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<any> {
  if (!fs.existsSync(cliPath)) throw new Error(`${cliPath} is not built; run: npm run build:addon`);
  return new Promise((resolve, reject) => {
    // The addon's OpenMP spin setting (src/engine/native.ts), so timings compare like with like.
    const childEnv = { GOMP_SPINCOUNT: defaultSpinCount, ...process.env, ...env };
    execFile(cliPath, args, { env: childEnv, maxBuffer: 256 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`tq_cli ${args[0]} failed (${error.code}): ${stderr.trim()}`));
      else resolve(JSON.parse(stdout));
    });
  });
}
